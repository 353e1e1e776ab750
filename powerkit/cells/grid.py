"""Put traces on the grid: each series' samples averaged into epoch-aligned cells.

DuckDB scans the trace (out of core for Parquet) and streams it in (host, gpu, ts) order as
Arrow batches; each series is then reduced in NumPy with two linear passes (average
duplicated timestamps, then average per cell). Memory holds one series at a time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import duckdb
import numpy as np
import pyarrow as pa

from powerkit.cells.fill import NO_FILL, FillPolicy, SeriesCoverage, fill_cells
from powerkit.cells.prefetch import prefetch
from powerkit.cells.sql import (
    SCAN_ORDERED,
    SCAN_ORDERED_ENERGY,
    SCAN_RAW,
    SCAN_RAW_ENERGY,
    SERIES_COUNTS,
    connect,
    scan_with,
)
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import format_duration
from powerkit.trace.model import Trace

__all__ = [
    "CLEAN_GRIDS_S",
    "DEFAULT_WINDOWS_S",
    "MAX_CELLS_PER_SAMPLE",
    "MAX_GRID_S",
    "RawSeries",
    "SeriesCells",
    "cells_of",
    "check_grid",
    "clean_grid_s",
    "default_grid_s",
    "default_windows_s",
    "reduce_raw",
    "reduce_series",
    "series_cells",
    "series_on_grid",
]

A = TypeVar("A")

#: The clean cell lengths (s) a default grid is chosen from; past the last, whole hours.
CLEAN_GRIDS_S = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    900.0,
    1800.0,
    3600.0,
)
#: The windows an analysis judges when none are given (those shorter than the grid become it).
DEFAULT_WINDOWS_S = (0.5, 30.0, 300.0)
# A logger's interval wanders a little above its setting (1.02 s for a 1 s loop): this much
# above a clean step still takes that step.
_JITTER = 0.05


def clean_grid_s(interval_s: float, floor_s: float = 0.5) -> float:
    """``interval_s`` rounded up to a clean step (:data:`CLEAN_GRIDS_S`; within 5 % above a
    step takes that step), at least ``floor_s``."""
    need = interval_s / (1 + _JITTER)
    for step in CLEAN_GRIDS_S:
        if step >= need and step >= floor_s:
            return step
    return float(3600 * -(-need // 3600))


def default_grid_s(*traces: Trace, floor_s: float = 0.5) -> float:
    """The grid an analysis uses when ``--grid`` is not given: the coarsest trace's nominal
    interval, rounded up to a clean step (:func:`clean_grid_s`), never finer than ``floor_s``
    (0.5 s: the finest the analyses judge by default; ``grid`` passes its own, to keep a fast
    recording's spectrum). A 5 s log is judged on 5 s cells, where a 0.5 s grid would leave
    nine cells in ten missing."""
    nominal = max((t.meta.interval_s for t in traces if t.meta.interval_s), default=None)
    if nominal is None or not nominal > 0:
        return max(floor_s, 0.5)
    return clean_grid_s(nominal, floor_s)


def default_windows_s(grid_s: float, given: bool = False) -> tuple[list[float], str | None]:
    """The default windows on ``grid_s`` (:data:`DEFAULT_WINDOWS_S`, each at least one cell and
    a whole number of cells), and the note owed when one had to change (``given``: the grid
    is the caller's ``--grid``, not the trace's own)."""
    out: list[float] = []
    for w in DEFAULT_WINDOWS_S:
        n = max(1, -(-round(w * 1e6) // round(grid_s * 1e6)))
        length = n * grid_s
        if length not in out:
            out.append(length)
    changed = [w for w in DEFAULT_WINDOWS_S if w not in out]
    if not changed:
        return out, None
    shown = ", ".join(format_duration(w) for w in changed)
    if given:
        return out, (
            f"the default windows are {', '.join(format_duration(w) for w in out)} on the "
            f"{option('grid')} {format_duration(grid_s)} grid: a {shown} window needs a finer one"
        )
    return out, (
        f"the default windows are {', '.join(format_duration(w) for w in out)} on the trace's "
        f"{format_duration(grid_s)} grid (its sampling interval): a {shown} window needs "
        "faster samples"
    )


_BATCH_ROWS = 1_000_000
_MEDIAN_STEPS = 10_000


@dataclass
class SeriesCells:
    """One GPU series on the grid: dense cells from ``first_cell`` to the last present one."""

    host: str
    gpu: int
    first_cell: int  # absolute cell index floor(ts / grid)
    values: np.ndarray  # float64 cell means in W; 0 where a cell is missing
    present: np.ndarray  # bool: the cell holds at least one sample
    median_step_s: float | None  # median time between distinct samples
    filled: int = 0  # missing cells given a value by --fill (counted in present)
    #: what ``reduce_series(summarize=...)`` made of the series' samples (None: not asked)
    summary: Any = None

    def coverage(self, member: str | None = None) -> SeriesCoverage:
        """Return this series' coverage: present (or filled) cells over its cells."""
        cells = int(self.present.size)
        present = int(np.count_nonzero(self.present))
        return SeriesCoverage(
            self.host,
            self.gpu,
            cells,
            present,
            self.filled,
            present / cells if cells else 0.0,
            member,
        )


class _NotSorted(Exception):
    """The scan was not in (host, gpu, ts) order; the caller retries with ORDER BY."""


def cells_of(
    t_us: np.ndarray, power_w: np.ndarray, grid_us: int, steps: np.ndarray | None = None
) -> tuple[int, np.ndarray, np.ndarray, float | None]:
    """Return (first cell, cell means, present mask, median step s) of one sorted series.

    ``steps`` may pass ``np.diff(t_us)`` when the caller has it already.
    """
    t, p = t_us, power_w
    steps = np.diff(t) if steps is None else steps
    # The median step only needs a sample of the steps (it decides whether the grid fits).
    median = float(np.median(steps[:_MEDIAN_STEPS])) / 1e6 if steps.size else None
    if steps.size and (steps == grid_us).all():
        # A logger exactly on the grid's interval: one sample per cell, no gap, told from the
        # steps at hand (the cells' own indices cost a division of every time).
        return int(t[0] // grid_us), p, np.ones(t.size, dtype=bool), median
    k = t // grid_us
    dk = np.diff(k)
    if (dk == 1).all():
        # The common case: one sample per cell, no gap (a logger on the grid's interval).
        return int(k[0]), p, np.ones(k.size, dtype=bool), median
    if steps.size and not (steps > 0).all():
        # Duplicated timestamps count once, with their mean.
        starts = np.flatnonzero(np.r_[True, steps != 0])
        counts = np.diff(np.r_[starts, t.size])
        p = np.add.reduceat(p, starts) / counts
        t = t[starts]
    k = t // grid_us
    starts = np.flatnonzero(np.r_[True, np.diff(k) != 0])
    counts = np.diff(np.r_[starts, k.size])
    means = np.add.reduceat(p, starts) / counts
    cells = k[starts]
    first = int(cells[0])
    length = int(cells[-1]) - first + 1
    values = np.zeros(length)
    present = np.zeros(length, dtype=bool)
    values[cells - first] = means
    present[cells - first] = True
    return first, values, present, median


def reduce_raw(
    trace: Trace,
    start: Callable[[], A],
    add: Callable[[A, RawSeries], None],
    *,
    energy: bool = False,
    columns: tuple[str, ...] = (),
) -> A:
    """Return ``start()`` after ``add(acc, series)`` for every series' samples, in order.

    Series come in (host, gpu) order, one at a time (memory holds one series). The scan reads
    only gpu, ts and power (energy_j with ``energy``; energy_j and ``columns``, into
    ``RawSeries.extra``, with ``columns``): series boundaries come from row
    counts, either the index a canonical file carries or one aggregate query, and are checked
    against the gpu column, time order and (for counted runs) each series' first and last time.
    When the stored order does not hold, the reduction starts again from a fresh accumulator
    over a sorted scan (DuckDB sorts out of core). Raises BadInputError for NaN, infinite or
    negative power, naming the series.
    """
    raw, ordered = (SCAN_RAW_ENERGY, SCAN_ORDERED_ENERGY) if energy else (SCAN_RAW, SCAN_ORDERED)
    if columns:  # the trace must have them (the caller checks)
        raw, ordered = scan_with(columns, ordered=False), scan_with(columns, ordered=True)
    con = connect()
    trace.register(con)
    try:
        index = trace.series_runs()
        runs: list[_Run] | str
        if index is not None:
            runs = [_Run(h, g, n) for h, g, n in index]
        elif trace.one_host is not None and trace.table_ is None:
            runs = trace.one_host  # each series ends where the GPU changes (no counting pass)
        else:
            runs = _counted_runs(con)
        try:
            return _reduce(con, raw, ordered, runs, start, add, columns)
        except _SeriesError as exc:  # (a series' own problem: named with its file)
            raise BadInputError(f"{trace.origin}: {exc}") from None
    finally:
        con.close()


def _reduce(
    con: Any,
    raw: str,
    ordered: str,
    runs: list[_Run] | str,
    start: Callable[[], A],
    add: Callable[[A, RawSeries], None],
    columns: tuple[str, ...],
) -> A:
    """:func:`reduce_raw`'s scan: in the stored order, else (not sorted) again, sorted."""
    acc = start()
    try:
        if isinstance(runs, list) and len({(r.host, r.gpu) for r in runs}) != len(runs):
            raise _NotSorted  # a series stored in pieces (e.g. one file per day)
        for series in _scan(con, raw, runs, verify=True, columns=columns):
            add(acc, series)
    except _NotSorted:
        acc = start()
        for series in _scan(con, ordered, _counted_runs(con), verify=False, columns=columns):
            add(acc, series)
    return acc


def reduce_series(
    trace: Trace,
    grid_s: float,
    start: Callable[[], A],
    add: Callable[[A, SeriesCells], None],
    fill: FillPolicy = NO_FILL,
    *,
    columns: tuple[str, ...] = (),
    summarize: Callable[[RawSeries], Any] | None = None,
) -> A:
    """Return ``start()`` after ``add(acc, series)`` for every series on the grid, in order.

    Each series' samples (see :func:`reduce_raw`; with ``columns``, those columns too) go on
    a grid of ``grid_s`` seconds (a time a series holds twice is refused); ``fill`` is applied to
    the cells before ``add`` sees them; ``summarize(samples)``, when given, is kept in the
    cells' ``summary`` (what the cells cannot tell, from the same scan).
    """
    check_grid(grid_s)
    grid_us = round(grid_s * 1e6)

    def on_grid(acc: A, s: RawSeries) -> None:
        cells = series_on_grid(s, grid_us, fill)
        if summarize is not None:
            cells.summary = summarize(s)
        add(acc, cells)

    return reduce_raw(trace, start, on_grid, columns=columns)


def series_on_grid(s: RawSeries, grid_us: int, fill: FillPolicy = NO_FILL) -> SeriesCells:
    """Return one series' samples on the grid (cell means, present cells), after ``fill``."""
    _check_cells(s, grid_us)
    first, values, present, median = cells_of(s.t_us, s.power_w, grid_us, s.steps_us)
    values, present, filled = fill_cells(values, present, fill, grid_us / 1e6)
    return SeriesCells(s.host, s.gpu, first, values, present, median, filled)


#: the coarsest grid a trace is put on: a day's cell (a coarser one holds a day's samples in
#: one number, and its cells' times overflow beyond about 10^12 s)
MAX_GRID_S = 86_400.0


def check_grid(grid_s: float) -> None:
    """Refuse a grid that is not a positive, finite length of at most :data:`MAX_GRID_S`."""
    if not (math.isfinite(grid_s) and 0 < grid_s <= MAX_GRID_S):
        shown = format_duration(grid_s) if math.isfinite(grid_s) and grid_s > 0 else f"{grid_s}"
        raise BadInputError(
            f"{option('grid')} {shown}: a cell of at most {format_duration(MAX_GRID_S)}"
        )


# A grid finer than this many cells per sample is refused before it is allocated: nearly all
# of its cells would be missing, and a microsecond grid over a long trace does not fit memory.
MAX_CELLS_PER_SAMPLE = 20


def _check_cells(s: RawSeries, grid_us: int) -> None:
    cells = (int(s.t_us[-1]) - int(s.t_us[0])) // grid_us + 1
    if cells > max(1_000_000, MAX_CELLS_PER_SAMPLE * s.t_us.size):
        step = float(np.median(s.steps_us[:10_000])) / 1e6 if s.steps_us.size else 0.0
        raise BadInputError(
            f"host={s.host} gpu={s.gpu}: a {format_duration(grid_us / 1e6)} grid would make "
            f"{cells:,} cells for {s.t_us.size:,} samples (one every {step:.3g} s); use a "
            f"coarser {option('grid')}"
        )


def series_cells(trace: Trace, grid_s: float, fill: FillPolicy = NO_FILL) -> list[SeriesCells]:
    """Return every series of ``trace`` on the grid (in memory: for fleets of members)."""
    return reduce_series(trace, grid_s, list, list.append, fill)


class _SeriesError(BadInputError):
    """A series' samples that no analysis may use (the trace's name is added by the scan)."""


@dataclass
class RawSeries:
    """One GPU series' samples in time order: times (µs), power (W), energy counter (J)."""

    host: str
    gpu: int
    t_us: np.ndarray  # int64
    power_w: np.ndarray  # float64
    energy_j: np.ndarray | None  # float64, NaN where absent; None when not scanned
    steps_us: np.ndarray  # np.diff(t_us)
    #: the other columns asked for (``reduce_raw(columns=...)``), by name
    extra: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class _Run:
    """A run of consecutive rows of one series; first/last times when known (us)."""

    host: str
    gpu: int
    rows: int
    first_us: int | None = None
    last_us: int | None = None


def _counted_runs(con: duckdb.DuckDBPyConnection) -> list[_Run]:
    rows = con.execute(SERIES_COUNTS).fetchall()
    return [_Run(str(h), int(g), int(n), int(a), int(b)) for h, g, n, a, b in rows]


def _scan(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    runs: list[_Run] | str,
    *,
    verify: bool,
    columns: tuple[str, ...] = (),
) -> Iterator[RawSeries]:
    """The series of a scan, cut by ``runs``' row counts, or (``runs`` the one host's name)
    where the GPU changes."""
    reader = prefetch(con.sql(sql).to_arrow_reader(_BATCH_ROWS))
    try:
        if isinstance(runs, str):
            yield from _split_by_gpu(reader, runs, columns=columns)
        else:
            yield from _split(reader, runs, verify=verify, columns=columns)
    finally:
        reader.close()  # stops the scan thread and frees the connection (e.g. for a rescan)


def _finish(
    run: _Run, parts: list[list[np.ndarray]], *, verify: bool, columns: tuple[str, ...]
) -> RawSeries:
    """One series from its pieces, checked (its GPU, bounds and time order where ``verify``;
    its power always)."""
    # Join column by column, dropping each column's pieces as soon as it is whole (the
    # pieces and the joined copy of one column, not of all, are in memory at once).
    g, t, p = (_take(parts, i) for i in range(3))
    p = p.astype(np.float64)
    e = _take(parts, 3).astype(np.float64) if len(parts[0]) > 3 else None
    extra = {name: _take(parts, 4 + k) for k, name in enumerate(columns)}
    if e is not None and np.isnan(e).all():
        e = None  # no counter in this series
    if verify and (np.any(g != run.gpu) or _bounds_differ(run, t)):
        raise _NotSorted
    if not (p.min() >= 0 and p.max() < np.inf):  # min propagates NaN
        bad = int(np.count_nonzero(~np.isfinite(p) | (p < 0)))
        raise _SeriesError(
            f"{bad} sample(s) with NaN, infinite or negative power in host={run.host} gpu={run.gpu}"
        )
    steps = np.diff(t)
    least = steps.min() if steps.size else 1
    if verify and least < 0:
        raise _NotSorted
    if least == 0:  # (a file from elsewhere: powerkit's own never hold one)
        first = int(t[1:][steps == 0][0])
        when = np.datetime64(first, "us").astype(str)
        raise _SeriesError(
            f"{int(np.count_nonzero(steps == 0))} sample(s) repeat a time their GPU already has "
            f"(host={run.host} gpu={run.gpu}, first at {when}Z): rows of one GPU at one time "
            f"are never merged or counted twice; if the device is in another column, import "
            f"the file with {option('map')}"
        )
    return RawSeries(run.host, run.gpu, t, p, e, steps, extra)


def _arrays(batch: pa.RecordBatch) -> list[np.ndarray]:
    return [batch.column(i).to_numpy(zero_copy_only=False) for i in range(batch.num_columns)]


def _split(
    reader: Iterator[pa.RecordBatch],
    runs: list[_Run],
    *,
    verify: bool,
    columns: tuple[str, ...] = (),
) -> Iterator[RawSeries]:
    """Yield one RawSeries per run, cutting the stream of batches by the runs' row counts."""
    pending = iter(runs)
    run = next(pending, None)
    left = run.rows if run is not None else 0
    parts: list[list[np.ndarray]] = []
    for batch in reader:
        arrays = _arrays(batch)
        at = 0
        while at < batch.num_rows:
            if run is None:
                raise _NotSorted  # more rows than the runs say
            take = min(left, batch.num_rows - at)
            parts.append([c[at : at + take] for c in arrays])
            at += take
            left -= take
            if left == 0:
                yield _finish(run, parts, verify=verify, columns=columns)
                parts = []
                run = next(pending, None)
                left = run.rows if run is not None else 0
    if run is not None:
        raise _NotSorted  # fewer rows than the runs say


def _split_by_gpu(
    reader: Iterator[pa.RecordBatch], host: str, *, columns: tuple[str, ...] = ()
) -> Iterator[RawSeries]:
    """Yield one RawSeries per run of rows of one GPU (all of one host): a series ends where
    the GPU changes. A GPU seen again later is a series stored in pieces: _NotSorted."""
    run: _Run | None = None
    seen: set[int] = set()
    parts: list[list[np.ndarray]] = []
    for batch in reader:
        arrays = _arrays(batch)
        gpu = arrays[0]
        bounds = [0, *(np.flatnonzero(gpu[1:] != gpu[:-1]) + 1).tolist(), batch.num_rows]
        for lo, hi in itertools.pairwise(bounds):
            if hi == lo:
                continue
            g = int(gpu[lo])
            if run is not None and run.gpu != g:
                yield _finish(run, parts, verify=True, columns=columns)
                parts, run = [], None
            if run is None:
                if g in seen:
                    raise _NotSorted
                seen.add(g)
                run = _Run(host, g, 0)
            parts.append([c[lo:hi] for c in arrays])
            run.rows += hi - lo
    if run is not None:
        yield _finish(run, parts, verify=True, columns=columns)


def _take(parts: list[list[np.ndarray]], column: int) -> np.ndarray:
    """Return one column of a series' pieces joined, releasing the pieces of that column."""
    pieces = [x[column] for x in parts]
    for x in parts:
        x[column] = _EMPTY
    return _join(pieces)


_EMPTY = np.empty(0)


def _join(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _bounds_differ(run: _Run, t: np.ndarray) -> bool:
    if run.first_us is None or run.last_us is None:
        return False
    return bool(t[0] != run.first_us or t[-1] != run.last_us)
