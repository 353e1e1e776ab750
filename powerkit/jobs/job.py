"""``powerkit jobs``: per-job (and per-user, per-account, per-partition) energy, cost and
carbon of a fleet trace, from the scheduler's records or the trace's own pod labels."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from powerkit.core.errors import BadInputError, option
from powerkit.jobs.attribute import Attribution, Timeline, attribute
from powerkit.jobs.records import Job, read_allocations
from powerkit.jobs.report import (
    BY,
    GroupRow,
    JobRow,
    JobsOptions,
    JobsReport,
    JobsTimeline,
    TimelineGroup,
)
from powerkit.jobs.slurm import read_sacct, read_scontrol
from powerkit.trace.model import Trace
from powerkit.trace.timeparse import iso_utc

__all__ = ["check_jobs", "load_jobs", "run_jobs", "write_jobs_csv"]


def _intensity(
    opts: JobsOptions,
) -> tuple[Callable[[np.ndarray], np.ndarray] | None, bool, str | None]:
    """(g/kWh of an array of clock-hour starts, whether it changes by the hour, its source),
    or (None, False, None) without an intensity; a missing hour is one line."""
    given = (opts.region, opts.intensity, opts.intensity_csv)
    if all(g is None for g in given):
        return None, False, None
    from powerkit.econ.carbon import CarbonOptions, carbon_intensity

    grams, table, source = carbon_intensity(
        CarbonOptions(
            region=opts.region, intensity=opts.intensity, intensity_csv=opts.intensity_csv
        )
    )
    if table is None:
        constant = float(grams or 0.0)
        return (lambda hours: np.full(hours.shape, constant)), False, source

    def hourly(hours: np.ndarray) -> np.ndarray:
        out = np.array([table.get(int(h), np.nan) for h in hours.tolist()])
        if np.isnan(out).any():
            when = iso_utc(float(hours[np.isnan(out)][0]))
            raise BadInputError(
                f"{opts.intensity_csv}: no intensity for the hour of {when}, in which a job "
                "ran (gaps are not filled)"
            )
        return out

    return hourly, True, source


def check_jobs(opts: JobsOptions) -> None:
    """Refuse, before any reading, what ``jobs`` cannot account: not exactly one job map,
    ``--scontrol`` without sacct, an unknown ``--by``, more than one intensity."""
    given = [opts.sacct is not None, opts.allocations is not None, opts.by_label is not None]
    if sum(given) != 1:
        raise BadInputError(
            f"give one of {option('sacct')}, {option('allocations')} or {option('by-label')}"
        )
    if opts.scontrol is not None and opts.sacct is None:
        raise BadInputError(f"{option('scontrol')} adds GPU indices to {option('sacct')}")
    if opts.by not in BY:
        raise BadInputError(f"{option('by')} {opts.by!r}: one of {', '.join(BY)}")
    if sum(g is not None for g in (opts.region, opts.intensity, opts.intensity_csv)) > 1:
        raise BadInputError(
            f"give one of {option('region')}, {option('intensity')} or {option('intensity-csv')}"
        )


def load_jobs(opts: JobsOptions, notes: list[str]) -> tuple[list[Job], str]:
    """The jobs of the records ``opts`` names, and which (``sacct`` or ``allocations``)."""
    if opts.allocations is not None:
        naive: list[str] = []
        jobs = read_allocations(opts.allocations, opts.tz, naive)
        if naive and opts.tz is None:
            notes.append(
                f"{opts.allocations}: {len(naive)} time(s) without a zone (first "
                f"{naive[0]!r}) read as UTC (give {option('tz')})"
            )
        return jobs, "allocations"
    assert opts.sacct is not None
    if opts.tz is None:  # (sacct prints the cluster's local time, never a zone)
        notes.append(
            f"{opts.sacct}: sacct's times carry no zone; read as UTC (give {option('tz')}, "
            "e.g. --tz America/Chicago)"
        )
    read = read_sacct(opts.sacct, opts.tz)
    if read.steps:
        notes.append(f"{read.steps} job step line(s) folded into their jobs")
    if read.not_started:
        notes.append(f"{read.not_started} job(s) that never started left out")
    if read.no_gpu:
        notes.append(f"{read.no_gpu} job(s) without GPUs left out")
    if opts.scontrol is not None:
        indices = read_scontrol(opts.scontrol)
        for job in read.jobs:
            known = indices.get(job.job, {})
            for hold in job.holds:
                if hold.host in known:
                    hold.gpus = known[hold.host]
                    hold.count = len(hold.gpus)
    return read.jobs, "sacct"


def _host_gpus(trace: Trace) -> dict[str, list[int]]:
    from powerkit.core import db

    con = db.connect()
    try:
        trace.register(con)
        rows = con.execute("SELECT host, list(DISTINCT gpu ORDER BY gpu) FROM trace GROUP BY host")
        return {str(h): [int(g) for g in gpus] for h, gpus in rows.fetchall()}
    finally:
        con.close()


def _check_holds(jobs: list[Job], host_gpus: dict[str, list[int]], notes: list[str]) -> None:
    """Refuse a GPU index the host does not have; say which jobs ran on hosts the trace
    lacks (their coverage is 0 there)."""
    missing: dict[str, int] = {}
    for job in jobs:
        for hold in job.holds:
            have = host_gpus.get(hold.host)
            if have is None:
                missing[hold.host] = missing.get(hold.host, 0) + 1
                continue
            if hold.gpus is not None and not set(hold.gpus) <= set(have):
                extra = sorted(set(hold.gpus) - set(have))
                raise BadInputError(
                    f"job {job.job}: GPU {extra[0]} of {hold.host}, which the trace does not "
                    f"have (its GPUs there: {', '.join(map(str, have))})"
                )
    if missing:
        shown = ", ".join(f"{h} ({n} job(s))" for h, n in sorted(missing.items())[:5])
        notes.append(
            f"{len(missing)} host(s) the records name are not in the trace: {shown}"
            + (" …" if len(missing) > 5 else "")
        )


def run_jobs(trace: Trace, opts: JobsOptions) -> JobsReport:
    """``powerkit jobs`` (module docstring)."""
    check_jobs(opts)
    notes: list[str] = []
    per_hour, hourly, carbon_source = _intensity(opts)
    if opts.by_label is not None:
        from powerkit.jobs.labels import jobs_by_label

        report = jobs_by_label(trace, opts, per_hour, hourly)
    else:
        jobs, source = load_jobs(opts, notes)
        host_gpus = _host_gpus(trace)
        _check_holds(jobs, host_gpus, notes)
        counts = {h: len(g) for h, g in host_gpus.items()}
        first_us, last_us = trace.span_us()
        key = "account" if opts.by == "job" else opts.by
        names = sorted({str(getattr(j, key)) for j in jobs if getattr(j, key) is not None})
        index = {name: i for i, name in enumerate(names)}
        group = np.array([index.get(str(getattr(j, key)), len(names)) for j in jobs], np.int64)
        hour0 = math.floor(first_us / 3.6e9) * 3600.0
        timeline = Timeline(group, len(names) + 1, hour0, int(last_us / 3.6e9 - hour0 / 3600) + 1)
        acc = attribute(
            trace,
            jobs,
            counts,
            idle_below=opts.idle_below,
            intensity=per_hour,
            hourly=hourly,
            fill=opts.fill,
            engine=opts.engine,
            timeline=timeline,
        )
        end_s = last_us * 1e-6
        rows = [_row(k, job, acc, end_s, opts, per_hour is not None) for k, job in enumerate(jobs)]
        rows.sort(key=lambda r: (-r.energy_j, r.job))
        attributed = float(acc.energy_j.sum())
        report = JobsReport(
            source,
            rows,
            acc.total_j,
            attributed,
            acc.total_j - attributed,
            idle_below=None if opts.idle_below is None else opts.idle_below.text,
            timeline=_timeline(acc.by_hour, [*names, None], key, timeline),
        )
        flagged = sum(1 for r in rows if r.overlap_s > 0)
        if flagged:
            notes.append(
                f"{flagged} job(s) shared a GPU with another holder at some time (overlap_s): "
                "each got an equal share of it then"
            )
        shared = sum(1 for r in rows if not r.indices_known)
        if shared:
            notes.append(
                f"{shared} job(s) without GPU indices on a host: each held its share of every "
                f"GPU there (give {option('scontrol')} or an allocations file with indices)"
            )
    report = replace(
        report,
        by=opts.by,
        groups=None if opts.by == "job" else _groups(report.jobs, opts.by, report.attributed_j),
        price_per_kwh=opts.price_per_kwh,
        carbon_source=carbon_source,
        tz=opts.tz or "UTC",
        notes=[*notes, *report.notes],
    )
    return report


def _timeline(
    by_hour: np.ndarray, names: list[str | None], key: str, timeline: Timeline
) -> JobsTimeline:
    hours = [iso_utc(timeline.first_hour_s + 3600 * h) for h in range(timeline.hours)]
    groups = [
        TimelineGroup(name, [float(x) for x in row])
        for name, row in zip(names, by_hour, strict=True)
        if row.any()
    ]
    return JobsTimeline(key, hours, sorted(groups, key=lambda g: -sum(g.energy_j)))


def _row(
    k: int, job: Job, acc: Attribution, end_s: float, opts: JobsOptions, carbon: bool
) -> JobRow:
    held_s = sum(h.count * (min(h.end_s, end_s) - h.start_s) for h in job.holds)
    held_s = max(held_s, 0.0)
    covered = float(acc.covered_s[k])
    energy = float(acc.energy_j[k])
    idle_known = float(acc.idle_known_s[k])
    span = min(job.end_s, end_s) - job.start_s
    gpus = held_s / span if span > 0 else float(sum(h.count for h in job.holds))
    return JobRow(
        job=job.job,
        user=job.user,
        account=job.account,
        partition=job.partition,
        state=job.state or ("RUNNING" if math.isinf(job.end_s) else None),
        start=iso_utc(job.start_s),
        end=None if math.isinf(job.end_s) else iso_utc(job.end_s),
        hosts=sorted({h.host for h in job.holds}),
        gpus=gpus,
        gpu_hours=held_s / 3600,
        energy_j=energy,
        coverage=covered / held_s if held_s > 0 else None,
        mean_power_w=energy / covered if covered > 0 else None,
        peak_power_w=None if np.isnan(acc.peak_w[k]) else float(acc.peak_w[k]),
        j_per_gpu_hour=energy / (covered / 3600) if covered > 0 else None,
        idle_share=float(acc.idle_s[k]) / idle_known if idle_known > 0 else None,
        cost=None if opts.price_per_kwh is None else energy / 3.6e6 * opts.price_per_kwh,
        co2_kg=float(acc.grams[k]) / 1000 if carbon else None,
        overlap_s=float(acc.overlap_s[k]),
        indices_known=all(h.gpus is not None for h in job.holds),
    )


def _groups(rows: list[JobRow], by: str, attributed_j: float) -> list[GroupRow]:
    sums: dict[str | None, list[Any]] = {}
    for r in rows:
        g = sums.setdefault(getattr(r, by), [0, 0.0, 0.0, None, None])
        g[0] += 1
        g[1] += r.gpu_hours
        g[2] += r.energy_j
        g[3] = r.cost if g[3] is None else g[3] + (r.cost or 0.0)
        g[4] = r.co2_kg if g[4] is None else g[4] + (r.co2_kg or 0.0)
    out = [
        GroupRow(key, n, h, e, e / attributed_j if attributed_j else 0.0, c, co2)
        for key, (n, h, e, c, co2) in sums.items()
    ]
    return sorted(out, key=lambda g: (-g.energy_j, str(g.key)))


#: the chargeback CSV's columns (``--csv``), a row per job (or per group with ``--by``)
CSV_FIELDS = (
    "job",
    "user",
    "account",
    "partition",
    "state",
    "start",
    "end",
    "hosts",
    "gpus",
    "gpu_hours",
    "energy_kwh",
    "coverage",
    "mean_power_w",
    "peak_power_w",
    "idle_share",
    "cost",
    "co2_kg",
    "overlap_s",
)


def write_jobs_csv(report: JobsReport, path: Path) -> Path:
    """The report as CSV for chargeback (atomically, through the one writer): a row per job,
    energy in kWh, text cells that a spreadsheet would take for formulas quoted."""
    import csv
    import io

    from powerkit.core.outputs import csv_safe, write_text

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for r in report.jobs:
        values = {**r.__dict__, "energy_kwh": r.energy_j / 3.6e6, "hosts": " ".join(r.hosts)}
        writer.writerow(
            [
                ""
                if values[f] is None
                else csv_safe(values[f])
                if isinstance(values[f], str)
                else f"{values[f]:.9g}"
                for f in CSV_FIELDS
            ]
        )
    return write_text(path, out.getvalue())
