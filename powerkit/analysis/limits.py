"""What held a GPU back: time at the power limit in force, and time throttled by each kind of
clock-event reason (docs/info.md).

A step (from one sample to the next) that the gap rule integrates (``cells.steps.integrable``)
is *at the limit* when its first sample's power is at least ``1 - AT_LIMIT_TOLERANCE`` of that
sample's ``power_limit_w`` (the enforced limit a recorder or a log gives each sample). Power
capping holds the average power at the limit while the instantaneous readings scatter around
it (2-3 % sensor noise), so a step a few per cent under the limit is held by it. The share of
time at the limit is the length of those steps over the length of the integrable steps whose
first sample has a limit; a capped job shows a large share, a quiet one under the same limit
none. Steps without a limit (a log without the column, a blank cell) count in neither.

Time throttled reads the sample's ``clock_event_reasons``, NVML's clocks-event (throttle)
reasons bit field (``nvmlDeviceGetCurrentClocksEventReasons``; nvidia-smi's
``clocks_event_reasons.active``; DCGM's ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``). A step counts for
a kind when its first sample has any of the kind's bits set (:data:`THROTTLE_KINDS`): the power
cap (``SwPowerCap`` 0x4, ``HwPowerBrakeSlowdown`` 0x80), thermal (``SwThermalSlowdown`` 0x20,
``HwThermalSlowdown`` 0x40), the hardware slowdown line (``HwSlowdown`` 0x8: temperature or
power brake, the driver does not say which), and idle (``GpuIdle`` 0x1). Shares are over the
integrable steps whose first sample has reasons; a step may count for several kinds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerkit.cells.grid import RawSeries
from powerkit.cells.steps import integrable, median_step_s

__all__ = [
    "AT_LIMIT_TOLERANCE",
    "LIMIT_COLUMN",
    "REASON_BITS",
    "REASON_COLUMN",
    "THROTTLE_KINDS",
    "LimitTime",
    "Limits",
    "ThrottleTime",
    "reason_names",
    "series_limits",
    "step_reasons",
]

#: a step within this share under the limit in force is at the limit
AT_LIMIT_TOLERANCE = 0.03
LIMIT_COLUMN = "power_limit_w"
REASON_COLUMN = "clock_event_reasons"
#: NVML's clocks-event reason bits (nvml.h ``nvmlClocksEventReason*``), by name
REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
#: the kinds of throttling reported, each the mask of its bits
THROTTLE_KINDS: dict[str, int] = {
    "power_cap": 0x4 | 0x80,
    "thermal": 0x20 | 0x40,
    "hw_slowdown": 0x8,
    "idle": 0x1,
}


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
        return LimitTime(
            self.at_limit_s + other.at_limit_s,
            self.known_s + other.known_s,
            min(lows) if lows else None,
            max(highs) if highs else None,
        )


def _integrable(s: RawSeries, nominal_s: float | None) -> np.ndarray | None:
    """The series' steps the gap rule integrates (the nominal interval None: the series'
    median step); None where there is no step or no interval to judge by."""
    if nominal_s is None:
        nominal_s = median_step_s(s.steps_us * 1e-6)
    if nominal_s is None or s.power_w.size < 2:
        return None
    # (the gap rule on steps in µs: ``integrable`` compares lengths in any one unit)
    return integrable(s.steps_us * 1e-6, nominal_s)


def series_limit_time(s: RawSeries, nominal_s: float | None) -> LimitTime:
    """The time one series spent at its limit (``s.extra`` holds ``power_limit_w``; the
    nominal interval None: the series' median step)."""
    return _limit_time(s, _integrable(s, nominal_s))


def _limit_time(s: RawSeries, steps: np.ndarray | None) -> LimitTime:
    limit = s.extra.get(LIMIT_COLUMN)
    if limit is None or s.power_w.size == 0:
        return LimitTime()
    known = limit > 0  # (NaN is not: a blank cell)
    known &= limit < np.inf
    if not known.any():
        return LimitTime()
    low = float(np.min(limit, where=known, initial=np.inf))
    high = float(np.max(limit, where=known, initial=0.0))
    if steps is None:
        return LimitTime(0.0, 0.0, low, high)
    steps = steps & known[:-1]
    at = steps & (s.power_w[:-1] >= (1 - AT_LIMIT_TOLERANCE) * limit[:-1])
    at_us, known_us = np.sum(s.steps_us, where=at), np.sum(s.steps_us, where=steps)
    return LimitTime(float(at_us) * 1e-6, float(known_us) * 1e-6, low, high)


def reason_names(bits: int) -> list[str]:
    """The named reasons of a bit field (``0x5`` -> gpu_idle, sw_power_cap); a bit NVML does
    not name is ``bit N``."""
    names = [name for name, bit in REASON_BITS.items() if bits & bit]
    known = sum(REASON_BITS.values())
    names += [f"bit {k}" for k in range(63) if bits & ~known & (1 << k)]
    return names


@dataclass(frozen=True)
class ThrottleTime:
    """Seconds with known clock-event reasons, and seconds throttled per kind
    (:data:`THROTTLE_KINDS` order)."""

    known_s: float = 0.0
    kind_s: tuple[float, ...] = (0.0,) * len(THROTTLE_KINDS)

    def share(self, kind: str) -> float | None:
        """Time throttled by ``kind`` / time with known reasons (None: none known)."""
        if self.known_s <= 0:
            return None
        return self.kind_s[list(THROTTLE_KINDS).index(kind)] / self.known_s

    def __add__(self, other: ThrottleTime) -> ThrottleTime:
        kinds = tuple(a + b for a, b in zip(self.kind_s, other.kind_s, strict=True))
        return ThrottleTime(self.known_s + other.known_s, kinds)


@dataclass(frozen=True)
class Limits:
    """What one series (or several, added) spent at its power limit and throttled."""

    limit: LimitTime = LimitTime()
    throttle: ThrottleTime = ThrottleTime()

    def __add__(self, other: Limits) -> Limits:
        return Limits(self.limit + other.limit, self.throttle + other.throttle)


def step_reasons(s: RawSeries, nominal_s: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per step of the series: whether it counts (integrable, and its first sample has
    reasons), and the first sample's reason bits (0 where it does not count); both empty of
    True without the column."""
    return _step_reasons(s, _integrable(s, nominal_s))


def _step_reasons(s: RawSeries, steps: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    reasons = s.extra.get(REASON_COLUMN)
    n = max(s.power_w.size - 1, 0)
    if reasons is None or steps is None:
        return np.zeros(n, bool), np.zeros(n, np.int64)
    first = reasons[:-1]
    known = steps & np.isfinite(first)
    return known, np.where(known, first, 0).astype(np.int64)


def series_limits(s: RawSeries, nominal_s: float | None) -> Limits:
    """The time one series spent at its power limit and throttled by each kind (the gap
    rule's steps found once for both)."""
    steps = _integrable(s, nominal_s)
    limit = _limit_time(s, steps)
    if REASON_COLUMN not in s.extra:
        return Limits(limit)
    known, bits = _step_reasons(s, steps)
    kinds = tuple(
        float(np.sum(s.steps_us, where=bits & mask != 0)) * 1e-6 for mask in THROTTLE_KINDS.values()
    )
    return Limits(limit, ThrottleTime(float(np.sum(s.steps_us, where=known)) * 1e-6, kinds))
