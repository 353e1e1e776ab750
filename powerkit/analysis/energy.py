"""Energy per interval of a run (training steps, workload phases), per GPU.

Per series, the steps of :mod:`powerkit.cells.steps` (the trapezoid ``info`` integrates,
with its gap rule and ``--fill``) are summed into a cumulative energy E(t) at the sample times;
an interval [a, b] holds E(b) - E(a), with E linear between samples (so a step cut by the
interval's edge contributes in proportion to the time inside). The same cumulative sums give the
time that was integrated (the interval's *coverage*: a gap that is not integrated, or a part of
the interval outside the series, is not) and the *waiting* time: steps whose mean power is below
the series' wait threshold (or, with ``wait_util``, whose mean GPU utilization is below that
percentage: a step with an unlogged end does not count as waiting). Where a series carries an
energy counter (``energy_j``, e.g. NVML's total energy) with no hole, the counter's difference
over the interval (interpolated the same way) is used instead of the trapezoid, and the source
says so.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from powerkit.analysis.limits import REASON_COLUMN, THROTTLE_KINDS, step_reasons
from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.cells.grid import RawSeries
from powerkit.cells.steps import counter_of, series_steps
from powerkit.core.db import connect
from powerkit.core.documents import Document, from_plain
from powerkit.core.errors import BadInputError, option
from powerkit.core.jsonable import to_plain
from powerkit.core.schemas import field_properties
from powerkit.core.units import PowerSpec
from powerkit.engine import LOCAL, Engine, reduce
from powerkit.sensors.bounds import interval_bounds
from powerkit.trace.intervals import Interval, read_phases, read_steps
from powerkit.trace.model import Trace
from powerkit.trace.semantics import resolved_semantics, series_sensors

__all__ = [
    "EnergyReport",
    "IntervalEnergy",
    "SeriesTotal",
    "energy_report",
    "interval_energy",
    "trace_steps",
]


def energy_report(
    trace: Trace,
    *,
    steps: Path | None = None,
    phases: Path | None = None,
    tokens: bool = False,
    wait_below: PowerSpec | None = None,
    wait_util: float | None = None,
    fill: FillPolicy = NO_FILL,
    engine: Engine = LOCAL,
    tz: str | None = None,
) -> EnergyReport:
    """``powerkit energy``: the energy per step (``steps``: a file of step starts, its naive
    times in zone ``tz``, or ``trace`` for the trace's own step column; ``tokens``: every step
    must carry tokens) or per phase (``phases``: a workload's phase file with its counters)."""
    if (steps is None) == (phases is None):
        raise BadInputError(f"give one of {option('steps')} or {option('phases')}")
    if steps is not None:
        intervals = trace_steps(trace) if str(steps) == "trace" else read_steps(steps, tz)
        if tokens and any(iv.tokens is None for iv in intervals):
            raise BadInputError(f"{steps}: {option('tokens')} given, but not every step has tokens")
    else:
        assert phases is not None
        intervals = read_phases(phases)
    return interval_energy(
        trace,
        intervals,
        kind="steps" if steps is not None else "phases",
        fill=fill,
        wait_below=wait_below if steps is not None else None,  # phases show no waiting share
        wait_util=wait_util if steps is not None else None,
        engine=engine,
    )


@dataclass(frozen=True)
class IntervalEnergy:
    """One interval: energy over every GPU and per GPU (J), coverage, waiting, counters."""

    name: str | int  # the step's number (or name), the phase's name
    start: str  # ISO 8601, UTC
    duration_s: float
    energy_j: float  # sum over GPUs of the integrated (or counted) energy
    energy_per_gpu_j: list[float]
    coverage: float  # integrated time / (duration x GPUs)
    waiting_share: float | None  # waiting time / integrated time (None: no threshold)
    tokens: float | None = None
    j_per_token: float | None = None
    #: the interval the true energy lies in, given the sensor (powerkit.sensors.bounds; None:
    #: not known), summed over GPUs
    energy_low_j: float | None = None
    energy_high_j: float | None = None
    counter_energy_j: float | None = None  # the workload's own counters, summed over GPUs
    counter_per_gpu_j: list[float | None] = field(default_factory=list)
    difference_pct: float | None = None  # (trace - counter) / counter
    #: whether the workload's counters fall inside [energy_low_j, energy_high_j]
    counter_inside: bool | None = None
    #: time throttled by the power cap / time with known clock-event reasons, over every GPU
    #: (powerkit.analysis.limits; None: the trace gives no reasons)
    cap_throttled_share: float | None = None


@dataclass(frozen=True)
class SeriesTotal:
    """One GPU over every interval."""

    host: str
    gpu: int
    energy_j: float
    busy_s: float  # integrated time
    waiting_s: float | None
    wait_below_w: float | None  # the power threshold (None when waiting is by utilization)
    source: str  # "trapezoid" or "energy counter"
    wait_util_pct: float | None = None  # the utilization threshold, when waiting is by it


@dataclass(frozen=True)
class EnergyReport(Document):
    """What ``powerkit energy`` reports (its document lists the intervals under ``steps`` or
    ``phases``, each named by ``step`` or ``phase``)."""

    COMMAND: ClassVar[str] = "energy"

    kind: str  # "steps" or "phases"
    intervals: list[IntervalEnergy]
    gpus: list[SeriesTotal]
    fill: str = "none"
    power_semantics: str = "unknown"
    interval_s: float | None = None  # the trace's nominal sampling interval
    notes: list[str] = field(default_factory=list)
    #: the share of its time above which a step is flagged as throttled by the power cap
    CAPPED_FLAG: ClassVar[float] = 0.5

    @classmethod
    def schema_body(cls, defs: dict[str, Any]) -> dict[str, Any]:
        """The schema of :meth:`body` (docs/schemas/): the intervals under ``steps`` or
        ``phases`` (as ``by`` says), each named by its ``step`` or ``phase``."""
        properties, required = field_properties(cls, defs)
        interval, named = field_properties(IntervalEnergy, defs)
        del interval["name"]
        rows = {
            label: {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {label[:-1]: {"type": ["string", "integer"]}, **interval},
                    "required": [label[:-1], *(k for k in named if k != "name")],
                },
            }
            for label in ("steps", "phases")
        }
        del properties["kind"], properties["intervals"]
        required = [k for k in required if k not in ("kind", "intervals")]
        return {
            "properties": {"by": {"enum": ["steps", "phases"]}, **rows, **properties},
            "required": ["by", *required],
        }

    def body(self) -> dict[str, Any]:
        """``by`` (steps or phases), the intervals under that key, the GPUs, the rest."""
        label = "phase" if self.kind == "phases" else "step"
        rows = []
        for row in to_plain(self.intervals):
            rows.append({label: row.pop("name"), **row})
            if self.kind == "phases":
                rows[-1]["trace_energy_j"] = rows[-1]["energy_j"]
        return {
            "by": self.kind,
            self.kind: rows,
            "gpus": to_plain(self.gpus),
            "fill": self.fill,
            "power_semantics": self.power_semantics,
            "interval_s": self.interval_s,
            "notes": self.notes,
        }

    @classmethod
    def from_body(cls, doc: dict[str, Any]) -> EnergyReport:
        """The report a document holds."""
        kind = doc.get("by")
        if kind not in ("steps", "phases") or not isinstance(doc.get(kind), list):
            raise BadInputError("by must be steps or phases, with the intervals under it")
        label = "phase" if kind == "phases" else "step"
        rows = [{**r, "name": r.get(label)} if isinstance(r, dict) else r for r in doc[kind]]
        return from_plain(cls, {**doc, "kind": kind, "intervals": rows}, "document")


def trace_steps(trace: Trace) -> list[Interval]:
    """The steps a trace carries in its own ``step`` column (what ``record`` stores from the
    workload's annotations): a step starts at its first sample, over all series, and ends where
    the next starts (the last, unfinished, is left out); tokens are the cumulative ``tokens``
    column's increase from one start to the next."""
    con = connect()
    trace.register(con)
    try:
        columns = {r[0] for r in con.execute("DESCRIBE trace").fetchall()}
        if "step" not in columns:
            raise BadInputError(
                f"{trace.origin}: no step column (record with {option('annotate-from')}, or "
                f"give {option('steps')} "
                "FILE)"
            )
        tokens = "min(tokens)" if "tokens" in columns else "NULL"
        rows = con.execute(
            f"SELECT step, epoch_us(min(ts)), {tokens} FROM trace WHERE step IS NOT NULL "
            "GROUP BY step ORDER BY 2"
        ).fetchall()
    finally:
        con.close()
    out = [
        Interval(
            step if isinstance(step, int) else str(step),
            a / 1e6,
            b / 1e6,
            None if ta is None or tb is None else float(tb - ta),
        )
        for (step, a, ta), (_, b, tb) in itertools.pairwise(rows)
    ]
    if not out:
        raise BadInputError(f"{trace.origin}: fewer than two steps in its step column")
    for iv in out:
        if iv.tokens is not None and iv.tokens < 0:
            raise BadInputError(
                f"{trace.origin}: the tokens column goes down during step {iv.name} (a "
                "cumulative count never does: a restarted counter?)"
            )
    return out


def _at(times: np.ndarray, cumulative: np.ndarray, when: np.ndarray) -> np.ndarray:
    """The cumulative quantity at ``when`` (linear between samples, constant outside)."""
    return np.interp(when, times, cumulative)


@dataclass
class _Acc:
    energy: list[np.ndarray] = field(default_factory=list)  # per series: J per interval
    below: list[np.ndarray] = field(default_factory=list)  # per series: how far the truth
    above: list[np.ndarray] = field(default_factory=list)  # may lie below and above, J
    covered: list[np.ndarray] = field(default_factory=list)
    waiting: list[np.ndarray | None] = field(default_factory=list)
    #: per series, two rows: time with known reasons, then time throttled by the cap, per interval
    capped: list[np.ndarray] = field(default_factory=list)
    totals: list[SeriesTotal] = field(default_factory=list)

    def merge(self, other: _Acc) -> _Acc:
        """Another part of the trace's series, after these."""
        self.energy += other.energy
        self.below += other.below
        self.above += other.above
        self.covered += other.covered
        self.waiting += other.waiting
        self.capped += other.capped
        self.totals += other.totals
        return self


def interval_energy(
    trace: Trace,
    intervals: list[Interval],
    *,
    kind: str,
    fill: FillPolicy = NO_FILL,
    wait_below: PowerSpec | None = None,
    wait_util: float | None = None,
    engine: Engine = LOCAL,
) -> EnergyReport:
    """Account ``intervals`` (epoch seconds) on every series of ``trace``.

    ``wait_below``: the power under which a GPU counts as waiting (watts or a share of its
    nameplate); None, or a share of an unknown nameplate, leaves the waiting share out.
    ``wait_util``: instead, the GPU utilization (percent) under which it counts as waiting; the
    trace must log ``gpu_util``.
    """
    if not intervals:
        raise BadInputError("no interval to account")
    if wait_util is not None and "gpu_util" not in trace.column_names():
        raise BadInputError(
            f"{trace.origin}: {option('wait-util')} needs GPU utilization, and this trace logs "
            "none "
            f"(use {option('wait-below')} with a power)"
        )
    reasons = REASON_COLUMN in trace.column_names()  # the time the cap throttled, where known
    a_s = np.array([iv.start_s for iv in intervals])
    b_s = np.array([iv.end_s for iv in intervals])
    nominal = trace.meta.interval_s
    notes: list[str] = []
    sensor_of_series = series_sensors(trace.meta)

    def add(acc: _Acc, s: RawSeries) -> None:
        t = s.t_us * 1e-6
        steps = series_steps(s, nominal, fill)
        integrated = ~np.isnan(steps.energy_j)
        energy = np.where(integrated, steps.energy_j, 0.0)
        covered = np.where(integrated, steps.dt_s, 0.0)
        cum_e = np.concatenate(([0.0], np.cumsum(energy)))
        cum_c = np.concatenate(([0.0], np.cumsum(covered)))
        source = "trapezoid"
        counter = counter_of(s)
        if counter is not None:
            cum_e, source = counter - counter[0], "energy counter"
        e = _at(t, cum_e, b_s) - _at(t, cum_e, a_s)
        c = _at(t, cum_c, b_s) - _at(t, cum_c, a_s)
        nameplate = trace.meta.nameplate_w(s.host, s.gpu)
        threshold = None
        by_power = wait_util is None and wait_below is not None
        if by_power and wait_below is not None and (not wait_below.is_relative or nameplate):
            threshold = wait_below.resolve(nameplate)
        w = None
        util = s.extra.get("gpu_util")
        level = s.power_w if wait_util is None else util.astype(np.float64)  # type: ignore[union-attr]
        below = threshold if wait_util is None else wait_util
        if below is not None and level is not None:
            mean = 0.5 * (level[1:] + level[:-1])  # NaN (an unlogged end) is not below
            cum_w = np.concatenate(([0.0], np.cumsum(np.where(mean < below, covered, 0.0))))
            w = _at(t, cum_w, b_s) - _at(t, cum_w, a_s)
        short, over = interval_bounds(
            sensor_of_series(s.host, s.gpu),
            t,
            s.power_w,
            integrated,
            a_s,
            b_s,
            counter=counter is not None,
            nameplate_w=nameplate,
        )
        acc.energy.append(e)
        acc.below.append(short)
        acc.above.append(over)
        acc.covered.append(c)
        acc.waiting.append(w)
        if reasons:
            known, bits = step_reasons(s, nominal)
            dt = s.steps_us * 1e-6
            for mask in (known, bits & THROTTLE_KINDS["power_cap"] != 0):
                cum = np.concatenate(([0.0], np.cumsum(np.where(mask, dt, 0.0))))
                acc.capped.append(_at(t, cum, b_s) - _at(t, cum, a_s))
        acc.totals.append(
            SeriesTotal(
                s.host,
                s.gpu,
                float(e.sum()),
                float(c.sum()),
                None if w is None else float(w.sum()),
                threshold,
                source,
                wait_util,
            )
        )

    acc = reduce(
        trace,
        _Acc,
        add,
        _Acc.merge,
        engine=engine,
        energy=trace.has_energy or wait_util is not None,
        columns=(
            *(() if wait_util is None else ("gpu_util",)),
            *((REASON_COLUMN,) if reasons else ()),
        ),
    )
    if not acc.energy:
        raise BadInputError(f"{trace.origin}: no samples")
    if wait_util is None and wait_below is not None and any(w is None for w in acc.waiting):
        notes.append(
            f"waiting share left out: {option('wait-below')} {wait_below.text} is a share of a "
            "nameplate "
            f"this trace does not give (give {option('nameplate')} or {option('wait-below')} in W)"
        )
    energy = np.vstack(acc.energy)  # series x intervals
    low = energy.sum(axis=0) - np.vstack(acc.below).sum(axis=0)  # (NaN: a sensor not known)
    high = energy.sum(axis=0) + np.vstack(acc.above).sum(axis=0)
    covered = np.vstack(acc.covered)
    waiting = None if any(w is None for w in acc.waiting) else np.vstack(acc.waiting)  # type: ignore[arg-type]
    gpus = energy.shape[0]
    known_s = np.sum(acc.capped[0::2], axis=0) if reasons else None
    capped_s = np.sum(acc.capped[1::2], axis=0) if reasons else None
    out = []
    for k, iv in enumerate(intervals):
        duration = iv.end_s - iv.start_s
        total = float(energy[:, k].sum())
        integrated = float(covered[:, k].sum())
        share = None
        if waiting is not None and integrated > 0:
            share = float(waiting[:, k].sum()) / integrated
        counters: list[float | None] = [iv.counter_j.get(g) for g in range(gpus)]
        counted = [c for c in counters if c is not None]
        counter_total = float(sum(counted)) if iv.counter_j else None
        difference = None
        if counter_total and len(counted) == gpus:
            difference = 100 * (total - counter_total) / counter_total
        tokens = iv.tokens
        bounded = bool(np.isfinite(low[k]) and np.isfinite(high[k]))
        inside = None
        if bounded and counter_total is not None and len(counted) == gpus:
            inside = bool(low[k] <= counter_total <= high[k])
        out.append(
            IntervalEnergy(
                name=iv.name,
                start=datetime.fromtimestamp(iv.start_s, UTC).isoformat(timespec="milliseconds"),
                duration_s=duration,
                energy_j=total,
                energy_per_gpu_j=[float(x) for x in energy[:, k]],
                # (sums of float steps can pass the duration by an ulp: a share is at most 1)
                coverage=min(1.0, integrated / (duration * gpus)) if duration > 0 else 0.0,
                waiting_share=share,
                tokens=tokens,
                j_per_token=total / tokens if tokens else None,
                energy_low_j=float(low[k]) if bounded else None,
                energy_high_j=float(high[k]) if bounded else None,
                counter_energy_j=counter_total,
                counter_per_gpu_j=counters if iv.counter_j else [],
                difference_pct=difference,
                counter_inside=inside,
                cap_throttled_share=None
                if known_s is None or capped_s is None or known_s[k] <= 0
                else float(capped_s[k] / known_s[k]),
            )
        )
    counter_gpus = max((max(iv.counter_j) + 1 for iv in intervals if iv.counter_j), default=0)
    if counter_gpus and counter_gpus != gpus:
        notes.append(
            f"the phase file counts {counter_gpus} GPU(s) and the trace holds {gpus}: "
            "no difference is stated"
        )
    flagged = [iv for iv in out if (iv.cap_throttled_share or 0) > EnergyReport.CAPPED_FLAG]
    if flagged:
        notes.append(
            f"{len(flagged)} {kind} spent more than half their time throttled by the power cap "
            f"(clock-event reasons), the first {flagged[0].name}: their energy and time are the "
            "capped job's"
        )
    outside = sum(1 for iv in out if iv.coverage < 0.5)
    if outside:
        notes.append(
            f"{outside} interval(s) have less than half their time in the trace (a zone "
            f"mismatch? text logs without a zone need {option('tz')})"
        )
    return EnergyReport(
        kind,
        out,
        acc.totals,
        str(fill),
        resolved_semantics(trace.meta),
        nominal,
        notes,
    )
