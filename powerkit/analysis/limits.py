"""Time at the power limit: how long a GPU ran against the limit in force (docs/info.md).

A step (from one sample to the next) that the gap rule integrates (``cells.steps.integrable``)
is *at the limit* when its first sample's power is at least ``1 - AT_LIMIT_TOLERANCE`` of that
sample's ``power_limit_w`` (the enforced limit a recorder or a log gives each sample). Power
capping holds the average power at the limit while the instantaneous readings scatter around
it (2-3 % sensor noise), so a step a few per cent under the limit is held by it. The share of
time at the limit is the length of those steps over the length of the integrable steps whose
first sample has a limit; a capped job shows a large share, a quiet one under the same limit
none. Steps without a limit (a log without the column, a blank cell) count in neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerkit.cells.grid import RawSeries
from powerkit.cells.steps import integrable, median_step_s

__all__ = [
    "AT_LIMIT_TOLERANCE",
    "LIMIT_COLUMN",
    "LimitTime",
    "series_limit_time",
]

#: a step within this share under the limit in force is at the limit
AT_LIMIT_TOLERANCE = 0.03
LIMIT_COLUMN = "power_limit_w"


@dataclass(frozen=True)
class LimitTime:
    """Seconds at the limit and seconds with a known limit, and the range of the limits seen
    (W; None when no sample had one)."""

    at_limit_s: float = 0.0
    known_s: float = 0.0
    min_limit_w: float | None = None
    max_limit_w: float | None = None

    @property
    def share(self) -> float | None:
        """Time at the limit / time with a known limit (None: no limit known)."""
        return self.at_limit_s / self.known_s if self.known_s > 0 else None

    def __add__(self, other: LimitTime) -> LimitTime:
        lows = [x for x in (self.min_limit_w, other.min_limit_w) if x is not None]
        highs = [x for x in (self.max_limit_w, other.max_limit_w) if x is not None]
        return LimitTime(self.at_limit_s + other.at_limit_s, self.known_s + other.known_s,
                         min(lows) if lows else None, max(highs) if highs else None)  # fmt: skip


def series_limit_time(s: RawSeries, nominal_s: float | None) -> LimitTime:
    """The time one series spent at its limit (``s.extra`` holds ``power_limit_w``; the
    nominal interval None: the series' median step)."""
    limit = s.extra.get(LIMIT_COLUMN)
    if limit is None or s.power_w.size == 0:
        return LimitTime()
    known = limit > 0  # (NaN is not: a blank cell)
    known &= limit < np.inf
    if not known.any():
        return LimitTime()
    low = float(np.min(limit, where=known, initial=np.inf))
    high = float(np.max(limit, where=known, initial=0.0))
    if nominal_s is None:
        nominal_s = median_step_s(s.steps_us * 1e-6)
    if nominal_s is None or s.power_w.size < 2:
        return LimitTime(0.0, 0.0, low, high)
    # (the gap rule on steps in µs: ``integrable`` compares lengths in any one unit)
    steps = integrable(s.steps_us, nominal_s * 1e6) & known[:-1]
    at = steps & (s.power_w[:-1] >= (1 - AT_LIMIT_TOLERANCE) * limit[:-1])
    at_us, known_us = np.sum(s.steps_us, where=at), np.sum(s.steps_us, where=steps)
    return LimitTime(float(at_us) * 1e-6, float(known_us) * 1e-6, low, high)
