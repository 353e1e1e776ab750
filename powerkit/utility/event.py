"""``powerkit utility event``: did the fleet deliver the curtailment it promised, judged as a
demand-response program's meter judges it (docs/utility.md, "Curtailment events").

The fleet's power is summed on an absolute clock (cell k covers [k·grid, (k+1)·grid)), every
GPU series of every member (a member ``path:N`` counts N times; ``--site-mw`` scales the fleet
to a site of replicas, as ``utility`` does); a cell is present when every series has a sample
in it. Against a **baseline** (what the fleet would have drawn: the mean of a window before
the event, the same hours of earlier days, or the program's own figures), the event is cut
into **metering intervals**; each interval's reduction (baseline − mean power) is judged
against the **commitment** (a share of the baseline or a power). The response time, the
shortfall energy, the performance factor and the rebound after the event are defined in
:func:`judge_event`.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from powerkit.cells.grid import series_cells
from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import read_text_input
from powerkit.core.units import PowerSpec, check_site_mw, format_duration, parse_duration
from powerkit.trace.model import Trace
from powerkit.trace.timeparse import iso_utc, parse_start
from powerkit.utility.certificate import Criterion, EventInterval, EventReport, fingerprint

__all__ = ["EventOptions", "event_report", "fleet_series", "parse_baseline"]

#: the share of an interval's (or a window's) cells that must be present to judge it
COVERED = 0.9


@dataclass(frozen=True)
class EventOptions:
    """An event and how to judge it.

    Attributes:
        start_s: the event's start (epoch s). duration_s: its length.
        commit: the reduction promised: a share of the baseline (``25%``) or a power (``2MW``).
        respond_within_s: the time allowed to reach the commitment.
        interval_s: the metering interval (each judged on its own).
        baseline: ``before:DUR``, ``days:N``, ``high:AofB`` or ``csv:FILE`` (parse_baseline).
        notice_s: ``before:``'s window ends this long before the start (a declared notice).
        rebound_s: how long after the end the rebound is looked for.
        grid_s: the cell length. site_mw: scale the fleet to a site (None: as measured).
    """

    start_s: float
    duration_s: float
    commit: PowerSpec
    respond_within_s: float = 30.0
    interval_s: float = 60.0
    baseline: str = "before:30m"
    notice_s: float = 0.0
    rebound_s: float = 900.0
    grid_s: float = 1.0
    site_mw: float | None = None


def parse_baseline(text: str) -> tuple[str, str]:
    """``before:30m``, ``days:10``, ``high:4of5`` or ``csv:FILE`` as (method, argument)."""
    method, sep, arg = text.partition(":")
    ok = sep and arg and method in ("before", "days", "high", "csv")
    if ok and method == "before":
        parse_duration(arg)
    elif ok and method == "days":
        ok = arg.isdigit() and 1 <= int(arg) <= 60
    elif ok and method == "high":
        parts = arg.split("of")
        ok = len(parts) == 2 and all(p.isdigit() for p in parts)
        ok = ok and 1 <= int(parts[0]) <= int(parts[1]) <= 60
    if not ok:
        raise BadInputError(
            f"{option('baseline')} {text!r}: before:DUR (e.g. before:30m), days:N (1-60), "
            "high:AofB (e.g. high:4of5) or csv:FILE"
        )
    return method, arg


def fleet_series(
    traces: list[tuple[Trace, int]], grid_s: float
) -> tuple[int, np.ndarray, np.ndarray]:
    """(first absolute cell, fleet power per cell W, present per cell) of the members, on an
    absolute clock; a member ``(trace, n)`` counts n times. Every series' cells are held at
    once (as a fleet's members are), then summed into the fleet's two arrays."""
    series = [(s, copies) for trace, copies in traces for s in series_cells(trace, grid_s)]
    if not series:
        raise BadInputError("no GPU series in the traces given")
    first = min(s.first_cell for s, _ in series)
    last = max(s.first_cell + s.values.size for s, _ in series)
    power = np.zeros(last - first)
    count = np.zeros(last - first, dtype=np.int64)
    for s, copies in series:
        at = slice(s.first_cell - first, s.first_cell - first + s.values.size)
        power[at] += np.where(s.present, s.values, 0.0) * copies
        count[at] += s.present * copies
    return first, power, count == sum(copies for _, copies in series)


def _means(power: np.ndarray, present: np.ndarray, lo: int, hi: int) -> tuple[float | None, float]:
    """The mean of the present cells lo..hi−1 (None below COVERED) and their coverage."""
    lo_c, hi_c = max(lo, 0), min(hi, power.size)
    if hi <= lo:
        return None, 0.0
    ok = present[lo_c:hi_c]
    coverage = float(ok.sum()) / (hi - lo)
    if coverage < COVERED:
        return None, coverage
    return float(power[lo_c:hi_c][ok].mean()), coverage


def _baseline(
    method: str,
    arg: str,
    opts: EventOptions,
    power: np.ndarray,
    present: np.ndarray,
    start_cell: int,
    bounds: list[tuple[int, int]],
    notes: list[str],
) -> np.ndarray:
    """The baseline per metering interval (W) by ``method`` (docs/utility.md)."""
    g = opts.grid_s
    if method == "before":
        window = parse_duration(arg)
        hi = start_cell - round(opts.notice_s / g)
        lo = hi - round(window / g)
        mean, coverage = _means(power, present, lo, hi)
        if mean is None:
            raise BadInputError(
                f"{option('baseline')} before:{arg}: the traces hold {coverage:.0%} of the "
                f"{format_duration(window)} before the event (at least {COVERED:.0%} needed)"
            )
        notes.append(f"baseline: the fleet's mean over the {format_duration(window)} before")
        return np.full(len(bounds), mean)
    if method == "csv":
        return _baseline_csv(Path(arg), opts, len(bounds))
    # days:N and high:AofB: the same clock window of earlier days
    want, pool = (int(arg), int(arg)) if method == "days" else map(int, arg.split("of"))
    day = round(86_400 / g)
    days: list[np.ndarray] = []
    k = 1
    while len(days) < pool and start_cell - k * day + (bounds[-1][1] - bounds[0][0]) > 0:
        shifted = [(a - k * day, b - k * day) for a, b in bounds]
        means = [_means(power, present, a, b)[0] for a, b in shifted]
        if all(m is not None for m in means):
            days.append(np.array(means, dtype=float))
        k += 1
        if k > 366:
            break
    if len(days) < pool:
        raise BadInputError(
            f"{option('baseline')} {method}:{arg}: needs {pool} earlier day(s) whose same "
            f"hours the traces hold ({COVERED:.0%} of each interval); they hold {len(days)} "
            "(a shorter trace takes before:DUR)"
        )
    chosen = sorted(days, key=lambda d: -float(d.mean()))[:want] if method == "high" else days
    notes.append(
        f"baseline: the mean of the same intervals on {len(chosen)} earlier day(s)"
        + (f", the highest {want} of the {pool} most recent" if method == "high" else "")
    )
    return np.mean(chosen, axis=0)


def _baseline_csv(path: Path, opts: EventOptions, intervals: int) -> np.ndarray:
    """The program's baseline: ``time,kW`` rows (a step: each holds until the next)."""
    text = read_text_input(path, option("baseline"))
    rows: list[tuple[float, float, int]] = []
    for n, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or (n == 1 and not row[-1].strip().replace(".", "", 1).isdigit()):
            continue
        if len(row) != 2:
            raise BadInputError(f"{path}: line {n}: expected time,kW")
        try:
            when, kw = parse_start(row[0].strip(), f"{path}: line {n}").timestamp(), float(row[1])
        except ValueError:
            raise BadInputError(f"{path}: line {n}: {row[1]!r} is not a power in kW") from None
        if not (math.isfinite(kw) and kw >= 0):
            raise BadInputError(f"{path}: line {n}: {row[1]!r} is not a power in kW")
        rows.append((when, kw * 1000, n))
    if not rows:
        raise BadInputError(f"{path}: no time,kW rows")
    late = next((k for k in range(1, len(rows)) if rows[k][0] <= rows[k - 1][0]), None)
    if late is not None:
        raise BadInputError(
            f"{path}: line {rows[late][2]} ({iso_utc(rows[late][0])}) is not after the row before "
            "it: a baseline's rows run forward in time"
        )
    times = np.array([r[0] for r in rows])
    starts = opts.start_s + np.arange(intervals) * opts.interval_s
    at = np.searchsorted(times, starts, side="right") - 1
    if (at < 0).any():
        raise BadInputError(f"{path}: no baseline at the event's start (first row later)")
    return np.array([rows[i][1] for i in at.tolist()])


def _check(opts: EventOptions) -> None:
    g = opts.grid_s
    if opts.site_mw is not None:
        check_site_mw(opts.site_mw)
    if not (math.isfinite(opts.duration_s) and opts.duration_s >= g):
        raise BadInputError(
            f"{option('duration')} must be at least one cell ({format_duration(g)})"
        )
    if not (g <= opts.interval_s <= opts.duration_s):
        raise BadInputError(
            f"{option('interval')} {format_duration(opts.interval_s)}: from the grid "
            f"({format_duration(g)}) to the event's length ({format_duration(opts.duration_s)})"
        )
    if abs(opts.interval_s / g - round(opts.interval_s / g)) > 1e-6:
        raise BadInputError(
            f"{option('interval')} {format_duration(opts.interval_s)}: a whole number of "
            f"{format_duration(g)} cells"
        )
    for name, value in (("respond-within", opts.respond_within_s), ("rebound", opts.rebound_s)):
        if not (math.isfinite(value) and 0 <= value <= opts.duration_s + 86_400):
            raise BadInputError(f"{option(name)} {value:g} s is out of range")
    if not opts.commit.is_relative and not (opts.commit.watts or 0) > 0:
        raise BadInputError(
            f"{option('commit')} must be a share of the baseline or a power above 0"
        )
    if opts.commit.is_relative and not 0 < (opts.commit.fraction or 0) < 1:
        raise BadInputError(
            f"{option('commit')} {opts.commit.text}: a reduction is less than 100 % of the "
            "baseline (the fleet cannot draw less than nothing)"
        )


def _response(
    p: np.ndarray, present: np.ndarray, target: np.ndarray, hold: int, g: float
) -> float | None:
    """The time to the first present cell at or below ``target`` from which the mean power
    over ``hold`` cells (a metering interval, or to the end) stays at or below the mean
    target: the commitment first reached, then held as a meter sees it. None: never."""
    n = p.size
    pw = np.where(present, p, 0.0)
    cp = np.concatenate(([0.0], np.cumsum(pw)))
    cc = np.concatenate(([0.0], np.cumsum(present)))
    ct = np.concatenate(([0.0], np.cumsum(np.where(present, target, 0.0))))
    i = np.arange(n)
    j = np.minimum(i + hold, n)
    cells = cc[j] - cc[i]
    with np.errstate(invalid="ignore", divide="ignore"):
        held = (cp[j] - cp[i]) <= (ct[j] - ct[i]) + 1e-9 * np.abs(ct[j] - ct[i])
    reached = present & (p <= target + 1e-9 * np.abs(target)) & held & (cells > 0)
    at = np.flatnonzero(reached)
    return float(at[0] * g) if at.size else None


def event_report(
    traces: list[tuple[Trace, int]], paths: list[str], opts: EventOptions
) -> EventReport:
    """Judge the event of ``opts`` on the fleet of ``traces`` (module docstring): per
    metering interval, reduction = baseline − mean power, met when at least the commitment
    (``commit`` × that interval's baseline, or the power given). ``response_s``: from the
    start to the first cell at or below baseline − commitment from which the mean power
    over a metering interval stays at or below
    baseline − commitment for a whole metering interval (or to the end). ``shortfall_j``:
    Σ max(0, committed − reduction) × cell over the event's present cells, the response
    window included. ``performance_factor``: the mean reduction ÷ the mean commitment, in
    [0, 1]. ``rebound_w``: the highest metering-interval mean within ``rebound_s`` after the
    end − the last interval's baseline (a meter's view: a training job's own swings within
    an interval are not a rebound). Passed: responded within ``respond_within_s``, every
    interval from then on met, and the event covered (COVERED of its cells)."""
    _check(opts)
    method, arg = parse_baseline(opts.baseline)
    g = opts.grid_s
    first, power, present = fleet_series(traces, g)
    notes: list[str] = []
    replicas = 1
    if opts.site_mw is not None:
        plate = sum(
            copies
            * sum(trace.meta.nameplate_w(gm.host, gm.gpu) or math.nan for gm in trace.meta.gpus)
            for trace, copies in traces
        )
        if not (math.isfinite(plate) and plate > 0):
            raise BadInputError(
                f"{option('site-mw')} needs every GPU's nameplate (give {option('nameplate')})"
            )
        replicas = max(1, round(opts.site_mw * 1e6 / plate))
        power = power * replicas
    start_cell = round(opts.start_s / g) - first
    n = round(opts.duration_s / g)
    if start_cell < 0 or start_cell + n > power.size:
        raise BadInputError(
            f"the event ({iso_utc(opts.start_s)}, {format_duration(opts.duration_s)}) is not "
            f"within the traces ({iso_utc(first * g)} to {iso_utc((first + power.size) * g)})"
        )
    m = round(opts.interval_s / g)
    bounds = [(a, min(a + m, start_cell + n)) for a in range(start_cell, start_cell + n, m)]
    base = _baseline(method, arg, opts, power, present, start_cell, bounds, notes)
    committed = (
        base * opts.commit.fraction
        if opts.commit.is_relative
        else np.full(base.size, float(opts.commit.watts or 0))
    )
    rows = []
    for (a, b), bw, cw in zip(bounds, base.tolist(), committed.tolist(), strict=True):
        mean, coverage = _means(power, present, a, b)
        red = None if mean is None else bw - mean
        rows.append(
            EventInterval(
                iso_utc((first + a) * g),
                mean,
                bw,
                cw,
                red,
                None if red is None or bw <= 0 else red / bw,
                None if red is None else red >= cw - 1e-9 * max(1.0, cw),
                coverage,
            )
        )
    lengths = np.array([b - a for a, b in bounds])
    base_c, comm_c = np.repeat(base, lengths), np.repeat(committed, lengths)
    lo, hi = start_cell, start_cell + n
    here = present[lo:hi]
    target = base_c - comm_c
    response = _response(power[lo:hi], here, target, min(m, n), g)
    reduction = base_c - power[lo:hi]
    shortfall = float(np.where(here, np.maximum(comm_c - reduction, 0.0), 0.0).sum() * g)
    factor = None
    if here.any() and comm_c[here].mean() > 0:
        factor = float(np.clip(reduction[here].mean() / comm_c[here].mean(), 0.0, 1.0))
    after = [
        _means(power, present, a, min(a + m, power.size))[0]
        for a in range(hi, min(hi + round(opts.rebound_s / g), power.size), m)
    ]
    seen = [x for x in after if x is not None]
    rebound = max(seen) - float(base[-1]) if seen else None
    judged = [r.met for r in rows if r.met is not None]
    coverage = float(here.mean())
    late = [
        r for r, (a, _) in zip(rows, bounds, strict=True) if (a - lo) * g >= opts.respond_within_s
    ]
    allowed = format_duration(opts.respond_within_s)
    criteria = [
        Criterion(
            "responded",
            response is not None and response <= opts.respond_within_s,
            "never reached and held"
            if response is None
            else f"in {format_duration(response)} (allowed {allowed})",
        ),
        Criterion(
            "held",
            all(r.met is True for r in late),
            f"{sum(r.met is True for r in late)} of {len(late)} interval(s) after the "
            "response window met",
        ),
        Criterion("covered", coverage >= COVERED, f"{coverage:.1%} of the event's cells"),
    ]
    plot = _plot(power, present, first, g, start_cell, n, bounds, base, opts)
    return EventReport(
        start=iso_utc(opts.start_s),
        duration_s=opts.duration_s,
        commit=opts.commit.text,
        respond_within_s=opts.respond_within_s,
        interval_s=opts.interval_s,
        grid_s=g,
        baseline_method=opts.baseline,
        baseline_w=float(base_c.mean()),
        committed_w=float(comm_c.mean()),
        intervals=rows,
        response_s=response,
        met_share=sum(judged) / len(judged) if judged else None,
        shortfall_j=shortfall,
        performance_factor=factor,
        rebound_w=rebound,
        coverage=coverage,
        passed=all(c.passed for c in criteria),
        criteria=criteria,
        inputs=[
            fingerprint(p, t, opts.start_s, opts.duration_s, g)
            for p, (t, _) in zip(paths, traces, strict=True)
        ],
        replicas=replicas,
        plot_t_s=plot[0],
        plot_power_w=plot[1],
        plot_baseline_w=plot[2],
        notes=notes,
    )


def _plot(
    power: np.ndarray,
    present: np.ndarray,
    first: int,
    g: float,
    start_cell: int,
    n: int,
    bounds: list[tuple[int, int]],
    base: np.ndarray,
    opts: EventOptions,
    points: int = 1500,
) -> tuple[list[float], list[float | None], list[float | None]]:
    """The fleet's power around the event (as long before it as the event lasts, and the
    rebound window after), bucket means of at most ``points`` buckets, with the baseline."""
    lo = max(0, start_cell - n)
    hi = min(power.size, start_cell + n + round(opts.rebound_s / g))
    edges = np.unique(np.linspace(lo, hi, min(points, hi - lo) + 1).astype(np.int64))
    t, p, b = [], [], []
    per_cell = np.full(hi - lo, np.nan)
    for (a, e), bw in zip(bounds, base.tolist(), strict=True):
        per_cell[a - lo : e - lo] = bw
    for a, e in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        ok = present[a:e]
        t.append(round((a - start_cell) * g, 6))
        p.append(float(power[a:e][ok].mean()) if ok.any() else None)
        seg = per_cell[a - lo : e - lo]
        b.append(None if np.isnan(seg).all() else float(np.nanmean(seg)))
    return t, p, b
