"""What is in a trace: series, span, sampling intervals, gaps, power and energy per GPU."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar

import numpy as np

from powerkit.analysis.limits import LIMIT_COLUMN, REASON_COLUMN, series_limits
from powerkit.analysis.sensor_check import (
    SensorCheck,
    SeriesSensor,
    sensor_check_of,
    series_sensor,
)
from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.cells.grid import RawSeries, check_grid, default_grid_s
from powerkit.cells.sql import connect
from powerkit.cells.steps import GAP_FACTOR, MAX_INTEGRATION_GAP, counter_of, series_steps
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.tables import Column
from powerkit.core.units import format_energy
from powerkit.engine import LOCAL, Engine, reduce
from powerkit.sensors import Sensor
from powerkit.sensors.bounds import energy_bounds
from powerkit.trace.model import Trace
from powerkit.trace.schema import LABEL_PREFIX, GpuMeta
from powerkit.trace.semantics import SEMANTICS, resolved_semantics, series_sensors
from powerkit.trace.timeparse import iso_utc

__all__ = [
    "GAP_FACTOR",
    "MAX_INTEGRATION_GAP",
    "SERIES_COLUMNS",
    "LabelEnergy",
    "LabelGroup",
    "SeriesInfo",
    "TraceInfo",
    "energy_by_label",
    "info_report",
    "label_column",
    "label_columns",
    "series_columns",
    "trace_info",
]


@dataclass(frozen=True)
class SeriesInfo:
    """One GPU series of a trace; times in s, power in W, energy in J."""

    host: str
    gpu: int
    name: str | None
    nameplate_w: float | None
    samples: int
    start: str
    end: str
    span_s: float
    interval_median_s: float | None
    interval_p99_s: float | None
    max_gap_s: float
    gaps: int
    gap_time_s: float
    min_power_w: float
    mean_power_w: float
    max_power_w: float
    energy_j: float
    energy_source: str  # "counter" or "trapezoid"
    #: the interval the true energy lies in, given the sensor (powerkit.sensors.bounds; None:
    #: the sensor is not known), and how the energy was found
    energy_low_j: float | None = None
    energy_high_j: float | None = None
    energy_method: str = ""
    coverage: float = 1.0  # present (or filled) grid cells / cells from first to last
    filled_cells: int = 0  # cells --fill bridged
    unintegrated_s: float = 0.0  # time in steps too long to integrate (after --fill)
    #: the enforced power limit's range over the samples, and the share of time at it
    #: (powerkit.analysis.limits; None: the trace gives no limit)
    power_limit_min_w: float | None = None
    power_limit_max_w: float | None = None
    at_limit_share: float | None = None
    #: shares of the time with known clock-event reasons throttled by the power cap, by
    #: temperature, and idle (powerkit.analysis.limits; None: the trace gives no reasons)
    cap_throttled_share: float | None = None
    thermal_throttled_share: float | None = None
    idle_share: float | None = None


@dataclass(frozen=True)
class LabelEnergy:
    """``info --by LABEL``: the energy per value of one label."""

    label: str
    groups: list[LabelGroup]


#: the per-GPU table of ``powerkit info`` (``*``: energy integrated from power, no counter)
SERIES_COLUMNS = (
    Column("GPU", lambda s: f"{s.host}:{s.gpu}", key=True),
    Column("samples", "samples", ","),
    Column("step s", "interval_median_s", ".3f"),
    Column("max gap s", "max_gap_s", ".2f"),
    Column("gaps", "gaps"),
    Column("cover", "coverage", ".1f", "%", scale=100),
    Column("mean W", "mean_power_w", ".1f"),
    Column("max W", "max_power_w", ".0f"),
    Column("TDP W", "nameplate_w", ".0f"),
    Column("limit W", lambda s: _limit_range(s.power_limit_min_w, s.power_limit_max_w)),
    Column("at limit", "at_limit_share", ".1f", "%", scale=100),
    Column("cap thr", "cap_throttled_share", ".1f", "%", scale=100),
    Column("therm", "thermal_throttled_share", ".1f", "%", scale=100),
    Column(
        "energy",
        lambda s: format_energy(s.energy_j) + ("" if s.energy_source == "counter" else "*"),
    ),
)


def series_columns(series: list[SeriesInfo]) -> tuple[Column, ...]:
    """The per-GPU table for these series: the limit columns only where a limit is known, the
    throttle columns only where reasons are (a log without them keeps the table narrow)."""
    drop = set()
    if all(s.power_limit_min_w is None for s in series):
        drop |= {"limit W", "at limit"}
    if all(s.cap_throttled_share is None for s in series):
        drop |= {"cap thr", "therm"}
    return tuple(c for c in SERIES_COLUMNS if c.header not in drop)


def _limit_range(low: float | None, high: float | None) -> str:
    """``300`` or ``250-300`` (W); ``-`` when no limit is known."""
    if low is None or high is None:
        return "-"
    return f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}-{high:.0f}"


def label_columns(label: str) -> tuple[Column, ...]:
    """The table of ``info --by LABEL``, a row per value."""
    return (
        Column(label, lambda g: "(none)" if g.value is None else g.value, key=True),
        Column("energy", lambda g: format_energy(g.energy_j)),
        Column("share", "share", ".1f", "%", scale=100),
        Column("GPU-hours", "gpu_seconds", ".3f", scale=1 / 3600),
        Column("GPUs", "gpus"),
    )


@dataclass(frozen=True)
class TraceInfo(Document):
    """Summary of a whole trace, with one SeriesInfo per GPU (``powerkit info``)."""

    COMMAND: ClassVar[str] = "info"

    path: str
    source: str
    power_semantics: str
    gpus: int
    samples: int
    start: str
    end: str
    span_s: float
    interval_median_s: float | None
    max_gap_s: float
    gaps: int
    min_power_w: float
    mean_power_w: float
    max_power_w: float
    energy_j: float
    columns: list[str]
    series: list[SeriesInfo]
    #: the sum of the series' intervals (None where a series has none), and their method
    energy_low_j: float | None = None
    energy_high_j: float | None = None
    energy_method: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    fill: str = "none"
    grid_s: float = 0.5
    coverage: float | None = None  # present (or filled) cells / cells, over every series
    tz: str = "UTC"
    bad_rows: dict[str, Any] = field(default_factory=dict)
    #: GPU time in steps too long to integrate (summed over series), and its share of the
    #: series' spans: energy the trace's power does not account for
    unintegrated_s: float = 0.0
    unintegrated_share: float = 0.0
    by: LabelEnergy | None = None  # ``--by LABEL``
    sensor_check: SensorCheck | None = None  # ``--sensor-check``

    def body(self) -> dict[str, Any]:
        """The fields; ``by`` and ``sensor_check`` only where asked for."""
        plain = super().body()
        for name in ("by", "sensor_check"):
            if getattr(self, name) is None:
                del plain[name]
        return plain


def unintegrated_note(info: TraceInfo) -> str | None:
    """The line a summary owes when part of the GPU time holds no energy: its share, and the
    remedy."""
    if info.unintegrated_s <= 0:
        return None
    # (hold:D bridges a step up to D + one interval: the longest gap, rounded up, bridges all)
    hold = max(1, math.ceil(info.max_gap_s))
    return (
        f"{100 * info.unintegrated_share:.1f} % of the GPU time ({info.unintegrated_s:,.1f} s) "
        f"lies in steps longer than 5 sampling intervals and holds no energy; {option('fill')} "
        f"hold:{hold}s integrates across every gap of this trace (its longest: "
        f"{info.max_gap_s:,.1f} s)"
    )


def info_report(
    trace: Trace,
    fill: FillPolicy = NO_FILL,
    grid_s: float | None = None,
    by: str | None = None,
    engine: Engine = LOCAL,
    *,
    check_sensor: bool = False,
) -> TraceInfo:
    """``powerkit info``: :func:`trace_info` (with ``check_sensor``, its sensor check), with
    the energy per value of label ``by``."""
    if by is not None:
        label_column(trace, by)  # an unknown label fails before the long work
    info = trace_info(trace, fill, grid_s, engine=engine, check_sensor=check_sensor)
    if by is None:
        return info
    return replace(info, by=LabelEnergy(by, energy_by_label(trace, by, fill, engine=engine)))


def trace_info(
    trace: Trace,
    fill: FillPolicy = NO_FILL,
    grid_s: float | None = None,
    engine: Engine = LOCAL,
    *,
    check_sensor: bool = False,
) -> TraceInfo:
    """Return the summary of ``trace``, one series at a time (memory holds one series).

    Gaps and energy follow :mod:`powerkit.cells.steps`; ``fill`` bridges gaps in the energy
    and in the coverage, which is counted on a ``grid_s`` grid as the analyses see it (None:
    the trace's own, :func:`powerkit.cells.grid.default_grid_s`). ``check_sensor``: each
    series' sensor checked from the same scan (:mod:`powerkit.analysis.sensor_check`).
    """
    if grid_s is None:
        grid_s = default_grid_s(trace)
    check_grid(grid_s)
    grid_us = round(grid_s * 1e6)
    nominal = trace.meta.interval_s
    gpus = {(g.host, g.gpu): g for g in trace.meta.gpus}
    sensor_of_series = series_sensors(trace.meta)

    def add(
        acc: list[tuple[tuple[SeriesInfo, int, int, float], SeriesSensor | None]], s: RawSeries
    ) -> None:
        sensor = sensor_of_series(s.host, s.gpu)
        summary = _series_info(s, gpus.get((s.host, s.gpu)), nominal, fill, grid_us, sensor)
        acc.append((summary, series_sensor(s, sensor) if check_sensor else None))

    names = _columns(trace)
    columns = tuple(c for c in (LIMIT_COLUMN, REASON_COLUMN) if c in names)
    scanned = reduce(
        trace, list, add, operator.add, engine=engine, energy=_has_counter(trace), columns=columns
    )
    if not scanned:
        raise BadInputError(f"{trace.origin}: no samples (empty trace)")
    found = [f for f, _ in scanned]
    checked = [c for _, c in scanned if c is not None]
    series = [f[0] for f in found]
    cells = sum(f[1] for f in found)
    present = sum(f[2] for f in found)
    samples = sum(s.samples for s in series)
    span = max(datetime.fromisoformat(s.end) for s in series) - min(
        datetime.fromisoformat(s.start) for s in series
    )
    intervals = sorted(s.interval_median_s for s in series if s.interval_median_s)
    lows = [s.energy_low_j for s in series]
    highs = [s.energy_high_j for s in series]
    methods = sorted({s.energy_method for s in series})
    semantics = resolved_semantics(trace.meta)
    unintegrated = sum(s.unintegrated_s for s in series)
    return TraceInfo(
        path=trace.origin,
        source=trace.meta.source,
        power_semantics=semantics,
        gpus=len(series),
        samples=samples,
        start=min(s.start for s in series),
        end=max(s.end for s in series),
        span_s=span.total_seconds(),
        interval_median_s=intervals[len(intervals) // 2] if intervals else None,
        max_gap_s=max(s.max_gap_s for s in series),
        gaps=sum(s.gaps for s in series),
        min_power_w=min(s.min_power_w for s in series),
        mean_power_w=sum(f[3] for f in found) / samples,
        max_power_w=max(s.max_power_w for s in series),
        energy_j=sum(s.energy_j for s in series),
        columns=names,
        series=series,
        energy_low_j=None if None in lows else sum(x for x in lows if x is not None),
        energy_high_j=None if None in highs else sum(x for x in highs if x is not None),
        energy_method=methods[0] if len(methods) == 1 else "mixed: " + ", ".join(methods),
        metadata={
            "source": trace.meta.source,
            "power_semantics": semantics,
            "power_semantics_means": SEMANTICS.get(semantics, semantics),
            "interval_s": trace.meta.interval_s,
            "tz": trace.meta.tz,
            "gpu_names": trace.meta.gpu_names(),
            "nameplate_w": trace.meta.nameplate_w(),
            "powerkit_version": trace.meta.powerkit_version,
            **trace.meta.extra,
        },
        warnings=list(trace.warnings),
        fill=str(fill),
        grid_s=grid_s,
        coverage=present / cells if cells else None,
        tz=trace.meta.tz,
        bad_rows=trace.bad_rows_summary(),
        unintegrated_s=unintegrated,
        unintegrated_share=unintegrated / max(1e-9, sum(s.span_s for s in series)),
        sensor_check=sensor_check_of(semantics, checked) if check_sensor else None,
    )


def _series_info(
    s: RawSeries,
    gpu: GpuMeta | None,
    nominal: float | None,
    fill: FillPolicy,
    grid_us: int,
    sensor: Sensor | None = None,
) -> tuple[SeriesInfo, int, int, float]:
    """Return (the series' summary, its grid cells, present or filled cells, power sum)."""
    steps = series_steps(s, nominal, fill)
    dt, p = steps.dt_s, s.power_w
    nominal_s = steps.nominal_s
    gap = steps.gaps()
    e = counter_of(s)
    use_counter = e is not None
    if e is not None:
        energy = float(np.maximum(np.diff(e), 0).sum())  # counter resets skipped
    else:
        energy = float(np.nansum(steps.energy_j))
    bounds = energy_bounds(
        sensor,
        s.t_us / 1e6,
        p,
        ~np.isnan(steps.energy_j),
        energy,
        counter=use_counter,
        nameplate_w=gpu.nameplate_w if gpu else None,
    )
    cells, present, filled = _cell_counts(s.t_us, grid_us, fill.max_cells(grid_us / 1e6))
    both = series_limits(s, nominal_s)
    limits, throttle = both.limit, both.throttle
    info = SeriesInfo(
        host=s.host,
        gpu=s.gpu,
        name=gpu.name if gpu else None,
        nameplate_w=gpu.nameplate_w if gpu else None,
        samples=int(p.size),
        start=iso_utc(s.t_us[0] / 1e6),
        end=iso_utc(s.t_us[-1] / 1e6),
        span_s=float(s.t_us[-1] - s.t_us[0]) / 1e6,
        interval_median_s=nominal_s,
        interval_p99_s=float(np.quantile(dt, 0.99)) if dt.size else None,
        max_gap_s=float(dt.max()) if dt.size else 0.0,
        gaps=int(np.count_nonzero(gap)),
        gap_time_s=float(dt[gap].sum()),
        min_power_w=float(p.min()),
        mean_power_w=float(p.mean()),
        max_power_w=float(p.max()),
        energy_j=energy,
        energy_source="counter" if use_counter else "trapezoid",
        energy_low_j=None if math.isnan(bounds.low_j) else bounds.low_j,
        energy_high_j=None if math.isnan(bounds.high_j) else bounds.high_j,
        energy_method=bounds.method,
        coverage=(present + filled) / cells,
        filled_cells=filled,
        unintegrated_s=0.0 if use_counter else float(dt[(dt > 0) & np.isnan(steps.energy_j)].sum()),
        power_limit_min_w=limits.min_limit_w,
        power_limit_max_w=limits.max_limit_w,
        at_limit_share=limits.share,
        cap_throttled_share=throttle.share("power_cap"),
        thermal_throttled_share=throttle.share("thermal"),
        idle_share=throttle.share("idle"),
    )
    return info, cells, present + filled, float(p.sum())


def _cell_counts(t_us: np.ndarray, grid_us: int, fill_cells: int) -> tuple[int, int, int]:
    """Return (cells from first to last, cells holding a sample, missing cells --fill fills),
    counted without allocating the grid."""
    k = t_us // grid_us
    dk = np.diff(k)
    first, last = int(k[0]), int(k[-1])
    del k
    runs = dk[dk > 1] - 1  # missing cells between consecutive present cells
    filled = int(runs[runs <= fill_cells].sum()) if fill_cells else 0
    return last - first + 1, int(np.count_nonzero(dk)) + 1, filled


def _has_counter(trace: Trace) -> bool:
    """Return True when some sample carries an energy counter (else the scan skips it)."""
    if not trace.has_energy:
        return False
    con = connect()
    try:
        trace.register(con)
        row = con.execute("SELECT count(energy_j) > 0 FROM trace").fetchone()
    finally:
        con.close()
    return bool(row and row[0])


def _columns(trace: Trace) -> list[str]:
    con = connect()
    try:
        trace.register(con)
        return [r[0] for r in con.execute("DESCRIBE trace").fetchall()]
    finally:
        con.close()


@dataclass(frozen=True)
class LabelGroup:
    """The energy of the samples carrying one value of a label (``info --by``)."""

    value: str | None
    energy_j: float
    share: float
    gpu_seconds: float  # integrated time, summed over GPUs
    gpus: int  # GPU series that carried it at some point


def label_column(trace: Trace, label: str) -> str:
    """The column ``--by LABEL`` groups by: ``label_<LABEL>`` (a source's label, e.g. a
    Prometheus pod), else a string column of that name (``phase``)."""
    columns = trace.column_names()
    for name in (f"{LABEL_PREFIX}{label}", label):
        if name in columns and (name.startswith(LABEL_PREFIX) or name == "phase"):
            return name
    have = sorted(c.removeprefix(LABEL_PREFIX) for c in columns if c.startswith(LABEL_PREFIX))
    have += ["phase"] if "phase" in columns else []
    raise BadInputError(
        f"{trace.origin}: no label {label!r} to group by ("
        + (f"it has {', '.join(have)}" if have else "it carries no labels")
        + ")"
    )


def energy_by_label(
    trace: Trace, label: str, fill: FillPolicy = NO_FILL, engine: Engine = LOCAL
) -> list[LabelGroup]:
    """Energy per value of ``label``: each sampling step's energy (the counter's difference
    where the series has a counter without holes, else the trapezoid ``info`` integrates, gap
    rule and ``fill`` included) goes to the value its first sample carries. Sorted by energy."""
    column = label_column(trace, label)
    nominal = trace.meta.interval_s

    def add(acc: dict[str | None, list[Any]], s: RawSeries) -> None:
        steps = series_steps(s, nominal, fill)
        counter = counter_of(s)
        joules = steps.energy_j if counter is None else np.diff(counter)
        ok = ~np.isnan(joules)
        values = s.extra[column][:-1]
        for value in set(values.tolist()):
            pick = ok & (values == value)
            key = None if value is None else str(value)
            group = acc.setdefault(key, [0.0, 0.0, set()])
            group[0] += float(joules[pick].sum())
            group[1] += float(steps.dt_s[pick].sum())
            group[2].add((s.host, s.gpu))

    def merge(
        a: dict[str | None, list[Any]], b: dict[str | None, list[Any]]
    ) -> dict[str | None, list[Any]]:
        for key, (joules, seconds, series) in b.items():
            group = a.setdefault(key, [0.0, 0.0, set()])
            group[0] += joules
            group[1] += seconds
            group[2] |= series
        return a

    acc = reduce(trace, dict, add, merge, engine=engine, energy=True, columns=(column,))
    total = sum(g[0] for g in acc.values())
    groups = [
        LabelGroup(k, e, e / total if total else 0.0, seconds, len(series))
        for k, (e, seconds, series) in acc.items()
    ]
    return sorted(groups, key=lambda g: -g.energy_j)
