"""Window arithmetic on dense grid cells: rolling and tumbling means, and violation stats.

Rolling windows use prefix sums: with S the cumulative sum of cell values and C that of
present cells, the window ending at cell i has sum S[i+1] - S[i+1-n] and coverage
C[i+1] - C[i+1-n], so every position costs O(1) whatever the window length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from powerkit.sensors.models import Sensor

__all__ = [
    "COVERAGE",
    "Positions",
    "WindowStats",
    "exceeds",
    "longest_consecutive",
    "needed_cells",
    "prefix_sums",
    "rolling",
    "rolling_error_w",
    "tumbling",
    "window_ends",
    "window_sums",
]

_ALL = np.ones(0, dtype=bool)  # placeholder mask of positions that are all complete
COVERAGE = 0.9  # a window is complete when at least 90 % of its cells are present
# Window means come from floating-point sums; a mean within this relative distance of the
# budget counts as equal to it (not a violation).
_REL_TOL = 1e-9


def exceeds(means: np.ndarray, budget_w: float) -> np.ndarray:
    """Return the mask of window means above ``budget_w`` (a sample at the budget never is).

    Power is stored as float32, so a sample logged exactly at the budget reads back as the
    float32 nearest the budget, which may lie above the budget's float64 value (287.98 W is
    stored as 287.980011 W). The threshold is therefore the larger of the budget and its
    float32 rounding, plus a relative tolerance for the rounding of floating-point sums.
    """
    stored = float(np.float32(budget_w)) if np.isfinite(budget_w) else budget_w
    limit = max(budget_w, stored)
    return means > limit + _REL_TOL * max(1.0, abs(limit))


def needed_cells(n: int) -> int:
    """Return the present cells a window of ``n`` cells needs to be complete: ceil(0.9 n)."""
    return math.ceil(COVERAGE * n - 1e-9)


@dataclass
class Positions:
    """Window positions of one series: means over present cells, completeness, duration."""

    means: np.ndarray  # W; NaN where no cell of the window is present
    complete: np.ndarray  # bool (unused when all_complete)
    step_s: float  # the time one position stands for (grid for rolling, window for tumbling)
    all_complete: bool = False


def prefix_sums(x: np.ndarray) -> np.ndarray:
    """S with S[0] = 0 and S[i] = x[0] + … + x[i−1]: the sum over cells i … i+n−1 is
    S[i+n] − S[i], whatever n."""
    sums = np.empty(x.size + 1)
    sums[0] = 0.0
    np.cumsum(x, out=sums[1:])
    return sums


class PrefixSums:
    """Cumulative sums of one series' cells, shared by all its rolling windows."""

    def __init__(self, values: np.ndarray, present: np.ndarray) -> None:
        self.values = values
        self.sums = prefix_sums(values)
        # Without missing cells every window is complete and its coverage is n: skip counts.
        self.dense = bool(present.all())
        self.counts = None if self.dense else np.concatenate(([0], np.cumsum(present)))
        self.present = present
        self.cells = values.size


def rolling(prefix: PrefixSums, n: int, grid_s: float) -> Positions:
    """Return trailing-window positions at every cell from the first + n - 1 to the last."""
    if prefix.cells < n:
        return Positions(np.empty(0), np.empty(0, dtype=bool), grid_s)
    if n == 1:
        if prefix.dense:
            return Positions(prefix.values, _ALL, grid_s, all_complete=True)
        means = np.where(prefix.present, prefix.values, np.nan)
        return Positions(means, prefix.present, grid_s)
    sums = prefix.sums[n:] - prefix.sums[:-n]
    if prefix.counts is None:
        return Positions(sums / n, _ALL, grid_s, all_complete=True)
    counts = prefix.counts[n:] - prefix.counts[:-n]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    return Positions(means, counts >= needed_cells(n), grid_s)


def tumbling(
    values: np.ndarray, present: np.ndarray, first_cell: int, n: int, grid_s: float
) -> Positions:
    """Return epoch-aligned window positions floor(k / n) covering the series' cells."""
    front = first_cell % n
    back = (-(front + values.size)) % n
    v = np.concatenate((np.zeros(front), values, np.zeros(back))).reshape(-1, n).sum(axis=1)
    c = (
        np.concatenate(
            (np.zeros(front, dtype=np.int64), present.astype(np.int64), np.zeros(back, np.int64))
        )
        .reshape(-1, n)
        .sum(axis=1)
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        means = v / c
    return Positions(means, c >= needed_cells(n), n * grid_s)


def window_sums(x: np.ndarray, n: int, mode: str, first_cell: int = 0) -> np.ndarray:
    """Per window position, the sum of ``x`` (one value per cell) over the window's cells, in
    the order :func:`rolling` (``mode`` "rolling") or :func:`tumbling` gives positions."""
    if mode == "rolling":
        if x.size < n:
            return np.empty(0)
        sums = prefix_sums(x)
        return sums[n:] - sums[:-n]
    front = first_cell % n
    back = (-(front + x.size)) % n
    return np.concatenate((np.zeros(front), x, np.zeros(back))).reshape(-1, n).sum(axis=1)


def window_ends(
    cells: int, n: int, mode: str, first_cell: int = 0
) -> tuple[np.ndarray | slice, np.ndarray | slice]:
    """Per window position (in :func:`rolling`'s or :func:`tumbling`'s order), its first and
    last cell of the series, to index the series' cells with (a tumbling window at the
    series' ends holds only the cells the series has; rolling positions are two slices)."""
    if mode == "rolling":
        positions = max(cells - n + 1, 0)
        return slice(0, positions), slice(n - 1, n - 1 + positions)
    front = first_cell % n
    start = np.arange(0, front + cells, n) - front
    return np.clip(start, 0, cells - 1), np.clip(start + n - 1, 0, cells - 1)


def rolling_error_w(
    sensor: Sensor, values: np.ndarray, present: np.ndarray, n: int, grid_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """How far below and above each rolling position's mean of ``n`` cells (in
    :func:`rolling`'s order) the true mean can lie, for one series' cells read by ``sensor``
    (powerkit.sensors.bounds.window_error_w; ``windows`` shares the cells' errors among a
    series' windows instead)."""
    from powerkit.sensors.bounds import cell_errors, window_error_w

    errors = cell_errors(sensor, values, present, grid_s)
    squares = window_sums(errors.squares, n, "rolling")
    sums = window_sums(errors.bounds, n, "rolling")
    return window_error_w(errors, n, squares, sums, window_ends(values.size, n, "rolling"))


def longest_consecutive(indices: np.ndarray) -> int:
    """Return the length of the longest run of consecutive integers in sorted ``indices``."""
    if indices.size == 0:
        return 0
    breaks = np.flatnonzero(np.diff(indices) != 1)
    bounds = np.concatenate(([-1], breaks, [indices.size - 1]))
    return int(np.diff(bounds).max())


@dataclass
class WindowStats:
    """Violation statistics of one window length, pooled over series."""

    positions: int = 0  # complete positions
    violations: int = 0
    incomplete: int = 0
    max_mean_w: float | None = None
    excess_energy_j: float = 0.0
    longest_violation_s: float = 0.0
    #: positions that violate for certain, and that may violate, given the sensor (None: no
    #: bound; powerkit.sensors.bounds.window_error_w)
    surely: int | None = None
    maybe: int | None = None

    def add(self, pos: Positions, budget_w: float) -> np.ndarray:
        """Pool one series' positions; return the indices of violating positions."""
        if pos.all_complete:
            n_complete = total = pos.means.size
            means = pos.means
        else:
            n_complete = int(np.count_nonzero(pos.complete))
            total = pos.complete.size
            means = np.where(pos.complete, pos.means, -np.inf)
        self.positions += n_complete
        self.incomplete += total - n_complete
        if n_complete == 0:
            return np.empty(0, dtype=np.int64)
        top = float(means.max())
        self.max_mean_w = top if self.max_mean_w is None else max(self.max_mean_w, top)
        # Work in proportion to the violations: their indices, not masks over every position.
        at = np.flatnonzero(exceeds(means, budget_w))
        if at.size:
            self.violations += at.size
            self.excess_energy_j += (float(means[at].sum()) - budget_w * at.size) * pos.step_s
            run = longest_consecutive(at) * pos.step_s
            self.longest_violation_s = max(self.longest_violation_s, run)
        return at

    def merge(self, other: WindowStats) -> None:
        """Pool another set of series' statistics into these."""
        self.positions += other.positions
        self.violations += other.violations
        self.incomplete += other.incomplete
        if other.max_mean_w is not None:
            top = other.max_mean_w
            self.max_mean_w = top if self.max_mean_w is None else max(self.max_mean_w, top)
        self.excess_energy_j += other.excess_energy_j
        self.longest_violation_s = max(self.longest_violation_s, other.longest_violation_s)
        if other.surely is not None:
            self.surely = (self.surely or 0) + other.surely
            self.maybe = (self.maybe or 0) + (other.maybe or 0)

    def add_bounds(
        self, pos: Positions, below: np.ndarray, above: np.ndarray, budget_w: float
    ) -> None:
        """Count one series' positions whose true mean, between mean − ``below`` and mean +
        ``above``, surely exceeds the budget, and those that may."""
        means = pos.means if pos.all_complete else np.where(pos.complete, pos.means, -np.inf)
        self.surely = (self.surely or 0) + int(np.count_nonzero(exceeds(means - below, budget_w)))
        self.maybe = (self.maybe or 0) + int(np.count_nonzero(exceeds(means + above, budget_w)))

    @property
    def violation_rate(self) -> float | None:
        """Return violations / complete positions (None when no position is complete)."""
        return self.violations / self.positions if self.positions else None
