"""Windowed transient violations: how often power exceeds a budget at 0.5 s, 30 s, 5 min...

Definitions (docs/windows.md): power goes on an epoch-aligned grid of cells (mean of a
series' samples per cell); a window of w seconds spans n = round(w / grid) cells; rolling
windows end at every cell, tumbling windows are epoch-aligned blocks; a position is complete
with at least ceil(0.9 n) present cells, and violates when its mean exceeds the budget.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from powerkit.analysis.limits import (
    LIMIT_COLUMN,
    REASON_COLUMN,
    THROTTLE_KINDS,
    Limits,
    series_limits,
)
from powerkit.cells.fill import NO_FILL, FillPolicy, SeriesCoverage, coverage_warning
from powerkit.cells.grid import (
    MAX_CELLS_PER_SAMPLE,
    SeriesCells,
    check_grid,
    clean_grid_s,
    default_grid_s,
    default_windows_s,
)
from powerkit.cells.rolling import (
    PrefixSums,
    WindowStats,
    prefix_sums,
    rolling,
    tumbling,
    window_ends,
    window_sums,
)
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.tables import Column
from powerkit.core.units import PowerSpec, format_duration
from powerkit.engine import LOCAL, Engine, reduce
from powerkit.sensors import Sensor, sensor_of
from powerkit.sensors.bounds import cell_errors, supports_window, window_error_w
from powerkit.trace.model import Trace
from powerkit.trace.semantics import SEMANTICS, averaging_warning, resolved_semantics

__all__ = [
    "WINDOW_COLUMNS",
    "WindowResult",
    "WindowsReport",
    "coarse_error",
    "coarse_step",
    "window_cells",
    "windowed_violations",
]

MODES = ("rolling", "tumbling")
SCOPES = ("gpu", "sum")
# A series whose median step exceeds the grid by more than this is too coarse for it.
_COARSE = 1.1


@dataclass(frozen=True)
class WindowResult:
    """Violation statistics at one window length."""

    window: str
    window_s: float
    cells: int
    positions: int
    violations: int
    violation_rate: float | None
    max_mean_w: float | None
    incomplete: int
    excess_energy_j: float
    longest_violation_s: float
    coverage: float | None = None  # complete positions / positions (None: no position)
    #: where the true violation rate lies given the sensor (docs/trust.md; None: the sensor is
    #: not known); ``supported`` False: the window is too short for the sensor to say anything
    #: (then 0 and 1)
    violation_rate_low: float | None = None
    violation_rate_high: float | None = None
    supported: bool | None = None


#: the table of ``powerkit windows``, a row per window length (short headers keep it whole in
#: an 80-column terminal; docs/windows.md spells them out: viol. = violations, incompl. =
#: incomplete positions)
WINDOW_COLUMNS = (
    Column("window", "window", key=True),
    Column("positions", "positions", ","),
    Column("viol.", "violations", ","),
    Column("rate", "violation_rate", ".2f", "%", scale=100),
    Column("true rate", lambda r: _range_text(r), text=True),
    Column("max W", "max_mean_w", ".1f"),
    Column("incompl.", "incomplete", ","),
    Column("cover", "coverage", ".1%"),
    Column("excess kJ", "excess_energy_j", ".2f", scale=1e-3),
    Column("longest s", "longest_violation_s", ".1f"),
)


@dataclass(frozen=True)
class WindowsReport(Document):
    """What ``powerkit windows`` reports."""

    COMMAND: ClassVar[str] = "windows"

    budget_w: float
    mode: str
    scope: str
    grid_s: float
    series: int
    windows: list[WindowResult] = field(default_factory=list)
    fill: str = "none"
    power_semantics: str = "unknown"
    trace: str = ""  # the trace judged (its path)
    #: present (or filled) cells / cells over every series judged (the summed one for "sum")
    coverage: float | None = None
    series_coverage: list[SeriesCoverage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the share of time at the enforced power limit, over the time with a known limit (s),
    #: every series pooled (powerkit.analysis.limits; None: the trace gives no limit)
    at_limit_share: float | None = None
    limit_known_s: float | None = None
    #: shares of the time with known clock-event reasons (s) throttled by each kind (power_cap,
    #: thermal, hw_slowdown, idle), every series pooled (None: the trace gives no reasons)
    throttled_share: dict[str, float] | None = None
    reasons_known_s: float | None = None


def _range_text(r: WindowResult) -> str | None:
    """Where the true rate lies, in per cent (None: no sensor known)."""
    if r.supported is None or r.violation_rate_low is None or r.violation_rate_high is None:
        return None
    if not r.supported:
        return "any"
    return f"{100 * r.violation_rate_low:.2f}-{100 * r.violation_rate_high:.2f}%"


def window_cells(windows_s: list[float], grid_s: float) -> list[int]:
    """Return n = w / grid for each window: a window shorter than a cell, or one that is not a
    whole number of cells (0.7 s on a 0.5 s grid would be computed as some other length), is
    an error naming the nearest windows that are."""
    cells = [round(w / grid_s) for w in windows_s]
    for w, n in zip(windows_s, cells, strict=True):
        if n < 1:
            raise BadInputError(
                f"{option('windows')} {format_duration(w)} is shorter than the "
                f"{format_duration(grid_s)} grid: give {option('grid')} {format_duration(w)} "
                "(the trace's samples must be that close), or a longer window"
            )
        if abs(w / grid_s - n) > 1e-6 * max(1.0, w / grid_s):
            low = max(1, int(w // grid_s))
            near = sorted({low, low + 1})
            choices = " or ".join(format_duration(k * grid_s) for k in near)
            raise BadInputError(
                f"{option('windows')} {format_duration(w)} is not a whole number of "
                f"{format_duration(grid_s)} grid cells: use {choices} (or a {option('grid')} "
                "that divides it)"
            )
    return cells


def coarse_step(series: SeriesCells, grid_s: float) -> float | None:
    """The series' median step when it is sampled more coarsely than the grid (its windows
    would be empty), else None."""
    step = series.median_step_s
    return step if step is not None and step > _COARSE * grid_s else None


def coarse_error(coarse: list[tuple[str, int, float]], grid_s: float) -> BadInputError:
    """One refusal for every series too coarse for the grid, naming the grid they all need."""
    coarse = sorted(coarse, key=lambda c: -c[2])
    shown = ", ".join(f"host={h} gpu={g} every {step:.3g} s" for h, g, step in coarse[:4])
    more = f" and {len(coarse) - 4} more" if len(coarse) > 4 else ""
    need = clean_grid_s(coarse[0][2] / _COARSE, floor_s=0.0)
    return BadInputError(
        f"{len(coarse)} series {'is' if len(coarse) == 1 else 'are'} sampled more coarsely "
        f"than the {format_duration(grid_s)} "
        f"grid ({shown}{more}); use {option('grid')} {format_duration(need)} or more"
    )


class _Accumulator:
    def __init__(
        self,
        cells: list[int],
        mode: str,
        grid_s: float,
        budget_w: float | None,
        span: tuple[int, int] | None,
        sensor: Sensor | None = None,
    ) -> None:
        self.cells, self.mode, self.grid_s = cells, mode, grid_s
        self.sensor = sensor
        self.budget_w = budget_w
        self.stats = [WindowStats() for _ in cells]
        self.series: list[tuple[str, int]] = []
        self.coarse: list[tuple[str, int, float]] = []
        self.coverage: list[SeriesCoverage] = []
        self.sum_cells = (0, 0)  # (present, cells) of the summed series
        self.limits: Limits | None = None  # time at the power limit and throttled
        self.total: np.ndarray | None = None
        self.count: np.ndarray | None = None
        self.first = 0
        if span is not None:  # scope "sum": GPUs' cells add up on one global grid
            self.first, last = span
            self.total = np.zeros(last - self.first + 1)
            self.count = np.zeros(last - self.first + 1, dtype=np.int32)

    def add(self, s: SeriesCells) -> None:
        step = coarse_step(s, self.grid_s)
        if step is not None:  # refused once every series is seen, naming them all
            self.coarse.append((s.host, s.gpu, step))
            return
        self.series.append((s.host, s.gpu))
        self.coverage.append(s.coverage())
        if isinstance(s.summary, Limits):
            self.limits = s.summary if self.limits is None else self.limits + s.summary
        if self.total is not None and self.count is not None:
            at = s.first_cell - self.first
            self.total[at : at + s.values.size] += s.values
            self.count[at : at + s.values.size] += s.present
            return
        assert self.budget_w is not None
        self.positions_of(s.values, s.present, s.first_cell)

    def merge(self, other: _Accumulator) -> _Accumulator:
        """Pool another part of the trace (series that follow these) into this one."""
        for mine, theirs in zip(self.stats, other.stats, strict=True):
            mine.merge(theirs)
        self.series += other.series
        self.coarse += other.coarse
        self.coverage += other.coverage
        if other.limits is not None:
            self.limits = other.limits if self.limits is None else self.limits + other.limits
        if self.total is not None and self.count is not None:
            assert other.total is not None and other.count is not None
            self.total = self.total + other.total  # a Ray result's arrays are read-only
            self.count = self.count + other.count
        return self

    def positions_of(self, values: np.ndarray, present: np.ndarray, first_cell: int) -> None:
        assert self.budget_w is not None
        prefix = PrefixSums(values, present) if self.mode == "rolling" else None
        errors, running = None, None
        if self.sensor is not None:
            errors = cell_errors(self.sensor, values, present, self.grid_s)
            if prefix is not None:  # (rolling: the running sums of b² and b, once a series)
                running = prefix_sums(errors.squares), prefix_sums(errors.bounds)
        for stats, n in zip(self.stats, self.cells, strict=True):
            if prefix is not None:
                pos = rolling(prefix, n, self.grid_s)
            else:
                pos = tumbling(values, present, first_cell, n, self.grid_s)
            stats.add(pos, self.budget_w)
            if errors is not None and pos.means.size:
                if running is not None:
                    total, sums = (r[n:] - r[:-n] for r in running)
                else:
                    total = window_sums(errors.squares, n, self.mode, first_cell)
                    sums = window_sums(errors.bounds, n, self.mode, first_cell)
                ends = (  # (only an average's ends count)
                    window_ends(values.size, n, self.mode, first_cell)
                    if errors.ranges is not None
                    else None
                )
                below, above = window_error_w(errors, n, total, sums, ends)
                stats.add_bounds(pos, below, above, self.budget_w)

    def finish_sum(self, budget_w: float) -> None:
        assert self.total is not None and self.count is not None
        self.budget_w = budget_w
        present = self.count == len(self.series)
        cells = np.flatnonzero(present)
        if cells.size == 0:
            return  # no cell where every GPU has a sample: the sum has no cells at all
        # The summed series runs from its first to its last present cell, like any series.
        lo, hi = int(cells[0]), int(cells[-1]) + 1
        self.sum_cells = (int(cells.size), hi - lo)
        values = np.where(present, self.total, 0.0)[lo:hi]
        self.positions_of(values, present[lo:hi], self.first + lo)


def windowed_violations(
    trace: Trace,
    budget: PowerSpec,
    windows_s: list[float] | None = None,
    *,
    mode: str = "rolling",
    scope: str = "gpu",
    grid_s: float | None = None,
    fill: FillPolicy = NO_FILL,
    engine: Engine = LOCAL,
) -> WindowsReport:
    """Return violation statistics of ``trace`` against ``budget`` at each window length.

    ``scope="gpu"`` pools the positions of every GPU series; ``scope="sum"`` adds the GPUs'
    cells first (a cell is present only where every GPU has it) and judges the sum, against a
    budget for the whole (a percentage is then of the summed nameplates). ``fill`` fills gaps
    per series on the grid first; the report carries the coverage its figures rest on.
    ``grid_s`` None: the trace's own (:func:`powerkit.cells.grid.default_grid_s`);
    ``windows_s`` None: the default windows on that grid.
    """
    given = grid_s is not None
    if grid_s is None:
        grid_s = default_grid_s(trace)
    notes: list[str] = []
    if windows_s is None:
        windows_s, note = default_windows_s(grid_s, given)
        notes += [note] if note else []
    if mode not in MODES:
        raise BadInputError(f"{option('mode')} {mode!r}: one of {', '.join(MODES)}")
    if scope not in SCOPES:
        raise BadInputError(f"{option('scope')} {scope!r}: one of {', '.join(SCOPES)}")
    check_grid(grid_s)
    cells = window_cells(windows_s, grid_s)
    nameplate = trace.meta.nameplate_w()
    span = None
    budget_w: float | None = None
    if scope == "gpu":
        budget_w = budget.resolve(nameplate)
    else:
        span = _cell_span(trace, grid_s)
    # The time at the power limit and throttled comes from the same scan, where the trace has a
    # limit or reasons.
    present_columns = trace.column_names()
    extra = tuple(c for c in (LIMIT_COLUMN, REASON_COLUMN) if c in present_columns)
    limited = bool(extra)
    sensor = _one_sensor(trace)
    acc = reduce(
        trace,
        functools.partial(_Accumulator, cells, mode, grid_s, budget_w, span, sensor),
        _Accumulator.add,
        _Accumulator.merge,
        engine=engine,
        grid_s=grid_s,
        fill=fill,
        columns=extra,
        summarize=functools.partial(series_limits, nominal_s=trace.meta.interval_s)
        if limited
        else None,
    )
    if acc.coarse:
        raise coarse_error(acc.coarse, grid_s)
    if not acc.series:
        raise BadInputError(f"{trace.origin}: no samples (empty trace)")
    if scope == "sum":
        budget_w = budget.resolve(None if nameplate is None else nameplate * len(acc.series))
        acc.finish_sum(budget_w)
    assert budget_w is not None
    results = []
    for w, n, st in zip(windows_s, cells, acc.stats, strict=True):
        low, high, supported = _rate_bounds(sensor, w, st)
        results.append(
            WindowResult(
                window=format_duration(w),
                window_s=w,
                cells=n,
                positions=st.positions,
                violations=st.violations,
                violation_rate=st.violation_rate,
                max_mean_w=st.max_mean_w,
                incomplete=st.incomplete,
                excess_energy_j=st.excess_energy_j,
                longest_violation_s=st.longest_violation_s,
                coverage=st.positions / (st.positions + st.incomplete)
                if st.positions + st.incomplete
                else None,
                violation_rate_low=low,
                violation_rate_high=high,
                supported=supported,
            )
        )
    if scope == "sum":
        present, total = acc.sum_cells
    else:
        present = sum(c.present for c in acc.coverage)
        total = sum(c.cells for c in acc.coverage)
    limits = acc.limits if limited else None
    report = WindowsReport(
        budget_w,
        mode,
        scope,
        grid_s,
        len(acc.series),
        results,
        fill=str(fill),
        trace=trace.origin,
        power_semantics=resolved_semantics(trace.meta),
        coverage=present / total if total else None,
        series_coverage=acc.coverage,
        at_limit_share=None if limits is None else limits.limit.share,
        limit_known_s=None if limits is None or LIMIT_COLUMN not in extra else limits.limit.known_s,
        throttled_share=None
        if limits is None or limits.throttle.known_s <= 0
        else {k: limits.throttle.share(k) or 0.0 for k in THROTTLE_KINDS},
        reasons_known_s=None
        if limits is None or REASON_COLUMN not in extra
        else limits.throttle.known_s,
    )
    empty = [r.window for r in results if r.positions == 0]
    longest = max((c.cells for c in acc.coverage), default=0)
    too_long = [r.window for r, n in zip(results, cells, strict=True) if n > longest]
    for line in (
        *notes,
        _short_warning(report, results, sensor, windows_s),
        coverage_warning(acc.coverage, report.coverage, empty, fill, too_long),
    ):
        if line:
            report.warnings.append(line)
    return report


def _short_warning(
    report: WindowsReport,
    results: list[WindowResult],
    sensor: Sensor | None,
    windows_s: list[float],
) -> str | None:
    """One line for windows shorter than the power's averaging, or too short for its sensor
    to say anything of (their interval is 0 to 1)."""
    line = averaging_warning(report.power_semantics, windows_s, report.trace)
    short = [r.window for r in results if r.supported is False]
    if not short or sensor is None:
        return line
    anything = "their true violation rate could be anything from 0 to 100 % (docs/trust.md)"
    if line is not None:
        return f"{line}; {anything}"
    return (
        f"{report.trace}: windows {', '.join(short)} are too short for the {sensor.name} "
        f"sensor ({SEMANTICS.get(sensor.name, sensor.description)}): {anything}"
    )


def _one_sensor(trace: Trace) -> Sensor | None:
    """The sensor behind every series' power (None: not known, or not the same for all)."""
    semantics = resolved_semantics(trace.meta)
    names: list[str | None] = list(trace.meta.gpu_names()) or [None]
    found = {sensor_of(semantics, name) for name in names}
    return found.pop() if len(found) == 1 else None


def _rate_bounds(
    sensor: Sensor | None, window_s: float, st: WindowStats
) -> tuple[float | None, float | None, bool | None]:
    """(``violation_rate_low``, ``violation_rate_high``, ``supported``) of one window."""
    if sensor is None or not st.positions or st.surely is None:
        return None, None, None
    if not supports_window(sensor, window_s):
        return 0.0, 1.0, False
    return st.surely / st.positions, (st.maybe or 0) / st.positions, True


def _cell_span(trace: Trace, grid_s: float) -> tuple[int, int]:
    """Return the first and last cell of the whole trace (for the summed series), refusing a
    grid whose cells would far outnumber the samples before allocating it."""
    first_us, last_us, samples = trace.extent()
    grid_us = round(grid_s * 1e6)
    first, last = first_us // grid_us, last_us // grid_us
    if last - first + 1 > max(1_000_000, MAX_CELLS_PER_SAMPLE * samples):
        raise BadInputError(
            f"{trace.origin}: a {format_duration(grid_s)} grid would make {last - first + 1:,} "
            f"cells for {samples:,} samples; use a coarser {option('grid')}"
        )
    return first, last
