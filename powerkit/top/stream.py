"""Trailing windows fed one sample at a time: what ``powerkit windows`` computes on a trace,
kept up to date as the samples arrive (``powerkit top``).

The cells are the windows analysis's (``cells.grid.cells_of``, docs/windows.md): a sample falls
in grid cell floor(ts / grid); samples with the same timestamp count once, with their mean; a
cell's value is the mean of its samples; a missing cell is absent. Each new cell ends one
position of every window, and that position is the analysis's own: ``cells.rolling.rolling``
over the window's last n cells (complete when 90 % are present, the mean over the present
ones), pooled by ``cells.rolling.WindowStats.add`` (``exceeds`` decides a violation) — the one
implementation, given one position at a time. Only the longest run of violating positions is
kept here, since a run spans many ticks. So the numbers ``top`` shows equal what ``windows``
computes on the trace ``top --record`` wrote (the tests check it). A cell is judged once it is
over: when a sample of a later cell arrives, or at ``close()``.

Memory is bounded: a series keeps the last n cells of each window, whatever the run's length.
"""

from __future__ import annotations

import math

import numpy as np

from powerkit.cells.rolling import PrefixSums, WindowStats, rolling

__all__ = ["StreamSeries", "StreamWindow"]


class StreamWindow:
    """One window length of one series: its last ``n`` cells, and the windows analysis's own
    statistics (``cells.rolling.WindowStats``) of the positions so far, each new position
    computed by ``cells.rolling.rolling`` over those cells."""

    def __init__(self, n: int, grid_s: float, budget_w: float) -> None:
        self.n, self.grid_s, self.budget_w = n, grid_s, budget_w
        self.values = np.zeros(n)  # a missing cell holds 0, as on the analysis's grid
        self.present = np.zeros(n, dtype=bool)
        self.at = 0
        self.seen = 0  # cells seen since the series' first
        self.stats = WindowStats()
        self.run = 0  # violating positions in a row, now
        self.longest_run = 0
        self.last_mean_w: float | None = None  # the latest complete position's mean

    @property
    def positions(self) -> int:
        """Complete positions so far."""
        return self.stats.positions

    @property
    def violations(self) -> int:
        """Complete positions whose mean exceeded the budget."""
        return self.stats.violations

    @property
    def incomplete(self) -> int:
        """Positions with under 90 % of their cells present."""
        return self.stats.incomplete

    @property
    def max_mean_w(self) -> float | None:
        """The highest complete mean (None: none yet)."""
        return self.stats.max_mean_w

    @property
    def excess_energy_j(self) -> float:
        """The energy above the budget over the violating positions."""
        return self.stats.excess_energy_j

    @property
    def longest_violation_s(self) -> float:
        """The longest run of violating positions, in seconds (runs span ticks, so they are
        counted here rather than in one ``WindowStats.add``)."""
        return self.longest_run * self.grid_s

    def push(self, value: float, present: bool) -> None:
        """The next cell: judge the position it ends."""
        self.values[self.at], self.present[self.at] = (value if present else 0.0), present
        self.at = (self.at + 1) % self.n
        self.seen += 1
        if self.seen < self.n:
            return
        # the one position ending here: the ring's n cells (their order does not matter)
        position = rolling(PrefixSums(self.values, self.present), self.n, self.grid_s)
        complete = position.all_complete or bool(position.complete[0])
        violated = self.stats.add(position, self.budget_w).size > 0
        if complete:
            self.last_mean_w = float(position.means[0])
        self.run = self.run + 1 if violated else 0
        self.longest_run = max(self.longest_run, self.run)

    def absent(self, cells: int) -> None:
        """``cells`` absent cells in a row (a gap): those past a full ring only add incomplete
        positions, counted at once."""
        step = min(cells, self.n)
        for _ in range(step):
            self.push(0.0, False)
        rest = cells - step
        if rest > 0:  # the ring is all absent now: every further position is incomplete
            self.seen += rest
            self.stats.incomplete += rest
            self.run = 0

    def restart(self, budget_w: float) -> None:
        """Count from now on against ``budget_w`` (the ring, and so the means, carry on)."""
        self.budget_w = budget_w
        self.stats = WindowStats()
        self.run = self.longest_run = 0


class StreamSeries:
    """One series (a GPU, or the sum of several) on the grid, with a window per length."""

    def __init__(self, grid_s: float, cells: list[int], budget_w: float) -> None:
        self.grid_us = round(grid_s * 1e6)
        self.windows = [StreamWindow(n, grid_s, budget_w) for n in cells]
        self.cell: int | None = None  # the open cell
        self.cell_sum, self.cell_n = 0.0, 0
        self.last_t: int | None = None  # the last sample's time (a repeat of it is averaged in)
        self.dup_sum, self.dup_n = 0.0, 0
        self.cells = self.present_cells = 0  # closed cells from the first, and those present

    def add(self, t_us: int, watts: float) -> None:
        """A sample (µs since the epoch, W); NaN is no sample. Times must not go back: an
        earlier sample than the last is ignored."""
        if not math.isfinite(watts):
            return
        if self.last_t is not None:
            if t_us == self.last_t:  # the same time again: the sample's value is their mean
                before = self.dup_sum / self.dup_n
                self.dup_sum += watts
                self.dup_n += 1
                self.cell_sum += self.dup_sum / self.dup_n - before  # (its cell is still open)
                return
            if t_us < self.last_t:
                return
        self.last_t, self.dup_sum, self.dup_n = t_us, watts, 1
        self._place(t_us, watts)

    def close(self) -> None:
        """The end of the samples: the open cell is judged."""
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
