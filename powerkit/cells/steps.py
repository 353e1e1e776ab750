"""The steps between a series' samples: which are gaps, and the energy each one holds.

One implementation for ``info`` (energy and gaps per series) and ``carbon`` (energy per clock
hour). Per series, with dt the steps between consecutive samples (in time order):

* the **nominal interval** is the trace's own (``interval_s`` in its metadata) or, when it has
  none, the series' median positive step;
* a **gap** is a step longer than ``GAP_FACTOR`` (1.5) nominal intervals;
* a step's **energy** is the trapezoid (p_prev + p) / 2 × dt when dt is at most
  ``MAX_INTEGRATION_GAP`` (5) nominal intervals; with ``--fill hold:D`` or ``linear:D`` a longer
  step of at most D + one nominal interval is bridged too (``hold``: p_prev × dt; ``linear``:
  the trapezoid); any longer step holds no energy (its time is ``unintegrated``).

Everything works on one series at a time (:func:`powerkit.cells.grid.reduce_raw`), so memory
holds one series, not the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.cells.grid import RawSeries

__all__ = [
    "GAP_FACTOR",
    "MAX_INTEGRATION_GAP",
    "Steps",
    "counter_of",
    "integrable",
    "median_step_s",
    "series_steps",
]

GAP_FACTOR = 1.5  # a step longer than 1.5 nominal intervals is a gap
MAX_INTEGRATION_GAP = 5.0  # energy is not integrated across steps longer than 5 intervals


@dataclass
class Steps:
    """One series' steps: lengths (s), the energy of each (J; NaN when not integrated), and the
    nominal interval they were judged against."""

    dt_s: np.ndarray
    energy_j: np.ndarray
    nominal_s: float | None


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
    """Which steps hold energy without a fill: those of at most ``MAX_INTEGRATION_GAP``
    nominal intervals (the rule of every energy powerkit integrates)."""
    return np.asarray(dt_s) <= MAX_INTEGRATION_GAP * nominal_s


def counter_of(s: RawSeries) -> np.ndarray | None:
    """The series' energy counter (J) when it has one with no hole over two or more samples:
    then its differences, not the trapezoid, are the series' energy."""
    e = s.energy_j
    if e is None or e.size < 2 or np.isnan(e).any():
        return None
    return e
