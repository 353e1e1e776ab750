"""Trailing windows fed one sample at a time: what ``powerkit windows`` computes on a trace,
kept up to date as the samples arrive (``powerkit top``).

The definitions are the windows analysis's, applied in the same order (docs/windows.md): a
sample falls in grid cell floor(ts / grid); samples with the same timestamp count once, with
their mean; a cell's value is the mean of its samples; a missing cell is absent. A rolling
window of n cells has a position at every cell from the series' first + n - 1 on; it is complete
when at least ceil(0.9 n) of its cells are present (``cells.rolling.needed_cells``), its mean is
over the present cells, and it violates the budget when ``cells.rolling.exceeds`` says so.
Positions, violations, incomplete positions, the highest mean, the excess energy and the
longest run of violating positions are counted as ``WindowStats`` counts them, so the numbers
``top`` shows equal what ``windows`` computes on the trace ``top --record`` wrote (the tests
check it). A cell is judged once it is over: when a sample of a later cell arrives, or at
``close()``.

Memory is bounded: a series keeps the last n cells of each window, whatever the run's length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from powerkit.cells.rolling import exceeds, needed_cells

__all__ = ["StreamSeries", "StreamWindow"]

_RESUM = 4096  # re-add a ring from scratch this often, against drift in the running sum


@dataclass
class StreamWindow:
    """One window length of one series: its last ``n`` cells and its counts so far."""

    n: int
    grid_s: float
    budget_w: float
    values: np.ndarray = field(init=False)
    present: np.ndarray = field(init=False)
    at: int = 0
    total: float = 0.0
    count: int = 0
    seen: int = 0  # cells seen since the series' first
    positions: int = 0
    violations: int = 0
    incomplete: int = 0
    max_mean_w: float | None = None
    excess_energy_j: float = 0.0
    run: int = 0  # violating positions in a row, now
    longest_run: int = 0
    last_mean_w: float | None = None  # the latest complete position's mean (None: none yet)
    _since_resum: int = 0

    def __post_init__(self) -> None:
        self.values = np.zeros(self.n)
        self.present = np.zeros(self.n, dtype=bool)
        self.need = needed_cells(self.n)

    @property
    def longest_violation_s(self) -> float:
        """The longest run of violating positions, in seconds."""
        return self.longest_run * self.grid_s

    @property
    def violation_rate(self) -> float | None:
        """Violations / complete positions (None: no complete position yet)."""
        return self.violations / self.positions if self.positions else None

    def push(self, value: float, present: bool) -> None:
        """The next cell: judge the position it ends."""
        old_v, old_p = self.values[self.at], bool(self.present[self.at])
        self.values[self.at], self.present[self.at] = value, present
        self.at = (self.at + 1) % self.n
        self.total += (value if present else 0.0) - (old_v if old_p else 0.0)
        self.count += int(present) - int(old_p)
        self._since_resum += 1
        if self._since_resum >= _RESUM:
            self.total = float(self.values[self.present].sum())
            self._since_resum = 0
        self.seen += 1
        if self.seen < self.n:
            return
        if self.count < self.need:
            self.incomplete += 1
            self.run = 0
            return
        mean = self.total / self.count
        self.positions += 1
        self.last_mean_w = mean
        self.max_mean_w = mean if self.max_mean_w is None else max(self.max_mean_w, mean)
        if bool(exceeds(np.array([mean]), self.budget_w)[0]):
            self.violations += 1
            self.excess_energy_j += (mean - self.budget_w) * self.grid_s
            self.run += 1
            self.longest_run = max(self.longest_run, self.run)
        else:
            self.run = 0

    def absent(self, cells: int) -> None:
        """``cells`` absent cells in a row (a gap): those past a full ring only add incomplete
        positions, counted at once."""
        step = min(cells, self.n)
        for _ in range(step):
            self.push(0.0, False)
        rest = cells - step
        if rest > 0:  # the ring is all absent now: every further position is incomplete
            self.seen += rest
            self.incomplete += rest
            self.run = 0

    def restart(self, budget_w: float) -> None:
        """Count from now on against ``budget_w`` (the ring, and so the means, carry on)."""
        self.budget_w = budget_w
        self.positions = self.violations = self.incomplete = self.run = self.longest_run = 0
        self.max_mean_w, self.excess_energy_j = None, 0.0


class StreamSeries:
    """One series (a GPU, or the sum of several) on the grid, with a window per length."""

    def __init__(self, grid_s: float, cells: list[int], budget_w: float) -> None:
        self.grid_us = round(grid_s * 1e6)
        self.windows = [StreamWindow(n, grid_s, budget_w) for n in cells]
        self.cell: int | None = None  # the open cell
        self.cell_sum, self.cell_n = 0.0, 0
        self.last_t: int | None = None  # the pending sample's time (its duplicates averaged)
        self.dup_sum, self.dup_n = 0.0, 0
        self.cells = self.present_cells = 0  # closed cells from the first, and those present

    def add(self, t_us: int, watts: float) -> None:
        """A sample (µs since the epoch, W); NaN is no sample. Times must not go back: an
        earlier sample than the last is ignored."""
        if not math.isfinite(watts):
            return
        if self.last_t is not None:
            if t_us == self.last_t:
                self.dup_sum += watts
                self.dup_n += 1
                return
            if t_us < self.last_t:
                return
            self._place(self.last_t, self.dup_sum / self.dup_n)
        self.last_t, self.dup_sum, self.dup_n = t_us, watts, 1

    def close(self) -> None:
        """The end of the samples: the pending sample and the open cell are judged."""
        if self.last_t is not None:
            self._place(self.last_t, self.dup_sum / self.dup_n)
            self.last_t = None
        if self.cell is not None and self.cell_n:
            self._commit(self.cell_sum / self.cell_n, True)
            self.cell_sum, self.cell_n = 0.0, 0

    def _place(self, t_us: int, watts: float) -> None:
        k = t_us // self.grid_us
        if self.cell is None or k == self.cell:
            if self.cell is None:
                self.cell = k
            self.cell_sum += watts
            self.cell_n += 1
            return
        if self.cell_n:
            self._commit(self.cell_sum / self.cell_n, True)
        gap = k - self.cell - 1
        if gap > 0:
            self.cells += gap
            for w in self.windows:
                w.absent(gap)
        self.cell, self.cell_sum, self.cell_n = k, watts, 1

    def _commit(self, value: float, present: bool) -> None:
        self.cells += 1
        self.present_cells += int(present)
        for w in self.windows:
            w.push(value, present)

    def restart(self, budget_w: float) -> None:
        """Count every window's positions from now on against ``budget_w``."""
        for w in self.windows:
            w.restart(budget_w)
