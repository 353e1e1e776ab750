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

Everything works on one series at a time (:func:`powerkit.analysis.grid.reduce_raw`), so memory
holds one series, not the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerkit.analysis.fill import NO_FILL, FillPolicy
from powerkit.analysis.grid import RawSeries

__all__ = ["GAP_FACTOR", "MAX_INTEGRATION_GAP", "Steps", "series_steps"]

GAP_FACTOR = 1.5  # a step longer than 1.5 nominal intervals is a gap
MAX_INTEGRATION_GAP = 5.0  # energy is not integrated across steps longer than 5 intervals


@dataclass
class Steps:
    """One series' steps: lengths (s), the energy of each (J; NaN when not integrated), and the
    nominal interval they were judged against."""

    t_s: np.ndarray  # sample times, epoch s
    dt_s: np.ndarray
    energy_j: np.ndarray
    nominal_s: float | None


def series_steps(s: RawSeries, nominal_s: float | None, fill: FillPolicy = NO_FILL) -> Steps:
    """Return the steps of one series and the energy each holds (see the module docstring)."""
    t = s.t_us.astype(np.float64) / 1e6
    dt = s.steps_us.astype(np.float64) / 1e6
    if nominal_s is None:
        positive = dt[dt > 0]
        nominal_s = float(np.median(positive)) if positive.size else None
    energy = np.full(dt.size, np.nan)
    if nominal_s is not None and dt.size:
        p, p_prev = s.power_w[1:], s.power_w[:-1]
        trapezoid = (p + p_prev) / 2 * dt
        short = dt <= MAX_INTEGRATION_GAP * nominal_s
        energy[short] = trapezoid[short]
        if fill.kind != "none":
            bridged = ~short & (dt <= fill.max_gap_s + nominal_s)
            energy[bridged] = (p_prev * dt if fill.kind == "hold" else trapezoid)[bridged]
    return Steps(t, dt, energy, nominal_s)
