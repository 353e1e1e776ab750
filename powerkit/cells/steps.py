"""The steps between a series' samples: which are gaps, and the energy each one holds.

One implementation for ``info`` (energy and gaps per series) and ``carbon`` (energy per clock
hour). Per series, with dt the steps between consecutive samples (in time order):

* the **nominal interval** is the trace's own (``interval_s`` in its metadata) or, when it has
  none, the series' median positive step;
* a **gap** is a step longer than ``GAP_FACTOR`` (1.5) nominal intervals and longer than
  ``SENSOR_FLOOR_S`` (0.1 s): no step a GPU's power sensor cannot resolve is a gap (NVML's
  power on A100 and H100 updates every 100 ms: Yang, Adamek and Armour, arXiv 2312.02741), so
  a fast logger's jitter (a 3 ms log's 45 ms step, a 1 kHz log's 2 ms one) is not a gap while
  a logger's stall (3 s in a 100 ms log) stays one;
* a step's **energy** is the trapezoid (p_prev + p) / 2 × dt when dt is at most
  ``MAX_INTEGRATION_GAP`` (5) nominal intervals or ``SENSOR_FLOOR_S``; with ``--fill hold:D``
  or ``linear:D`` a longer step of at most D + one nominal interval is bridged too (``hold``:
  p_prev × dt; ``linear``: the trapezoid); any longer step holds no energy (its time is
  ``unintegrated``);
* an **on-change** series — a logger that writes a line only when the reading changes: at
  least ``ON_CHANGE_MIN_STEPS`` steps, no two consecutive lines with the same power, steps
  irregular (the 90th percentile at least 4 × the 10th) — holds each value until the next
  line: a step's energy is p_prev × dt, and only a step longer than ``ON_CHANGE_MAX_HOLD_S``
  (5 s) is a gap (and holds no energy).

Everything works on one series at a time (:func:`powerkit.cells.grid.reduce_raw`), so memory
holds one series, not the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.cells.grid import RawSeries
from powerkit.trace.schema import counter_rises_possible

__all__ = [
    "GAP_FACTOR",
    "MAX_INTEGRATION_GAP",
    "ON_CHANGE_MAX_HOLD_S",
    "SENSOR_FLOOR_S",
    "Steps",
    "counter_of",
    "integrable",
    "is_on_change",
    "median_step_s",
    "series_steps",
]

GAP_FACTOR = 1.5  # a step longer than 1.5 nominal intervals is a gap
MAX_INTEGRATION_GAP = 5.0  # energy is not integrated across steps longer than 5 intervals
SENSOR_FLOOR_S = 0.1  # no step a power sensor cannot resolve is a gap (NVML: 100 ms updates)
ON_CHANGE_MAX_HOLD_S = 5.0  # an on-change log's value holds this long at the most
ON_CHANGE_MIN_STEPS = 50  # fewer steps cannot show a logger writes on change


@dataclass
class Steps:
    """One series' steps: lengths (s), the energy of each (J; NaN when not integrated), and the
    nominal interval they were judged against."""

    dt_s: np.ndarray
    energy_j: np.ndarray
    nominal_s: float | None
    on_change: bool = False

    def gaps(self) -> np.ndarray:
        """Which steps are gaps (see the module docstring)."""
        if self.on_change:
            return self.dt_s > ON_CHANGE_MAX_HOLD_S
        if self.nominal_s is None:
            return np.zeros(self.dt_s.size, dtype=bool)
        return self.dt_s > max(GAP_FACTOR * self.nominal_s, SENSOR_FLOOR_S)


def series_steps(s: RawSeries, nominal_s: float | None, fill: FillPolicy = NO_FILL) -> Steps:
    """Return the steps of one series and the energy each holds (see the module docstring).

    Arrays are built in place: a series of 12.6 M samples costs two float64 arrays here.
    """
    dt = s.steps_us * 1e-6
    if nominal_s is None:
        nominal_s = median_step_s(dt)
    energy = s.power_w[1:] + s.power_w[:-1]
    energy *= 0.5
    energy *= dt  # the trapezoid of every step
    if nominal_s is None:
        energy[:] = np.nan
        return Steps(dt, energy, None)
    if is_on_change(s):
        held = s.power_w[:-1] * dt  # each value holds until the next line
        held[dt > ON_CHANGE_MAX_HOLD_S] = np.nan
        return Steps(dt, held, nominal_s, on_change=True)
    keep = integrable(dt, nominal_s)
    if fill.kind != "none":
        bridged = np.flatnonzero(~keep & (dt <= fill.max_gap_s + nominal_s))
        if fill.kind == "hold":
            energy[bridged] = s.power_w[bridged] * dt[bridged]  # the earlier sample's power
        keep[bridged] = True
    energy[~keep] = np.nan
    return Steps(dt, energy, nominal_s)


def median_step_s(dt_s: np.ndarray) -> float | None:
    """A series' nominal interval when the trace names none: its median positive step (s)."""
    positive = dt_s[dt_s > 0]
    return float(np.median(positive)) if positive.size else None


def integrable(dt_s: np.ndarray | float, nominal_s: float) -> np.ndarray:
    """Which steps (s) hold energy without a fill: those of at most ``MAX_INTEGRATION_GAP``
    nominal intervals or ``SENSOR_FLOOR_S`` (the rule of every energy powerkit integrates)."""
    return np.asarray(dt_s) <= max(MAX_INTEGRATION_GAP * nominal_s, SENSOR_FLOOR_S)


def is_on_change(s: RawSeries) -> bool:
    """Whether the series was logged on change (a line only when the reading changed): at
    least ``ON_CHANGE_MIN_STEPS`` steps, no two consecutive lines of the same power, steps
    irregular (90th percentile at least 4 × the 10th)."""
    p, dt = s.power_w, s.steps_us
    if dt.size < ON_CHANGE_MIN_STEPS or (p[1:] == p[:-1]).any():
        return False
    low, high = np.quantile(dt, [0.1, 0.9])
    return bool(low > 0 and high >= 4 * low)


def counter_of(s: RawSeries) -> np.ndarray | None:
    """The series' energy counter (J) when it has one with no hole over two or more samples,
    and it is plausible: it never falls, and never rises faster than a GPU can draw
    (``trace.schema.counter_rises_possible``). Then its differences, not the trapezoid, are
    the series' energy; a counter that falls (reset, wrapped) or leaps is not trusted, and
    the power is integrated instead."""
    e = s.energy_j
    if e is None or e.size < 2 or np.isnan(e).any():
        return None
    if not counter_rises_possible(np.diff(e), s.steps_us / 1e6).all():
        return None
    return e
