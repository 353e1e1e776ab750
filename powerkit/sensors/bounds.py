"""How far an energy or a windowed mean computed from a log can be from the truth, given the
sensor that produced it (docs/trust.md has each formula, its assumptions and its check).

Energy from power (the trapezoids ``info`` integrates), per integrated step i of Δ_i seconds
between readings r_i and r_i+1:

- *what the readings do not see*: b_i = u · max(Δ_i, P) · R_i / 2, where R_i is the range of
  the four readings around the step (r_i-1 … r_i+2), P the sensor's update period and u the
  share of the step its readings leave unmeasured (1 for a point reading; 1 − W/P for a
  part-time sensor; for an average over A, 1 − min(1, A/Δ_i), times 1 − W/P where the average
  is of part-time windows). Assumption: between readings the power stays within the range of
  the readings around it, and changes at most once (a step anywhere in the interval moves the
  trapezoid by at most half the step);
- *the averaging's reach at the ends* (A > 0): the first reading covers A seconds before the
  trace begins and the last misses the A seconds before it ends, so the truth differs from the
  sum by A/2 · (r_last − r_first) ± A/2 · (R_first + R_last), R an end's range of the readings
  within one reach of it (assumption: over each end's A seconds the power stays within the
  end's reading ± that range).

The steps' errors are summed with one sign within blocks of 2 s (a workload periodic in step
with the sampling errs the same way again and again) and the blocks taken as independent, each
block's error uniform within its bound: H = 2 · sqrt(Σ_blocks (Σ_i b_i)² / 3), and never more
than Σ_i b_i, every step's error at its bound with one sign (the most the assumption allows;
two standard deviations of a single block would pass it by 2/√3);
low = E + shift − edge − H, high = E + shift + edge + H.

Energy from the counter: each reading holds the energy at its last update (every U seconds, in
counts of ``resolution_j``), so each end lags the truth by 0 … U·P_max plus a count:
low = E − U·P_max − resolution, high = E + U·P_max + resolution, P_max the larger of the
nameplate and the highest reading (assumption: power never exceeds it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from powerkit.sensors.models import COUNTER, EnergyCounter, Sensor

__all__ = [
    "CellErrors",
    "EnergyBounds",
    "cell_errors",
    "combined_half_width",
    "counter_bounds",
    "energy_bounds",
    "interval_bounds",
    "local_range",
    "power_bounds",
    "reach_range",
    "step_error_w_s",
    "supports_window",
    "unseen_share",
    "window_error_w",
]


@dataclass(frozen=True)
class EnergyBounds:
    """An energy and how far the truth can be from it (J), with the method named."""

    energy_j: float
    low_j: float
    high_j: float
    method: str


def _sliding_range(p: np.ndarray, before: int, after: int) -> np.ndarray:
    """Per reading i, the range of readings i-before … i+after (the ends held)."""
    size = before + after + 1
    if size > 8:  # (a long reach: scipy's running filters)
        from scipy.ndimage import maximum_filter1d, minimum_filter1d

        origin = before - size // 2  # (scipy's window starts size // 2 + origin before i)
        high = maximum_filter1d(p, size, mode="nearest", origin=origin)
        low = minimum_filter1d(p, size, mode="nearest", origin=origin)
        return high - low
    padded = np.concatenate((np.repeat(p[:1], before), p, np.repeat(p[-1:], after)))
    if size == 1:
        return np.zeros(p.size)
    high = np.maximum(padded[: p.size], padded[1 : 1 + p.size])
    low = np.minimum(padded[: p.size], padded[1 : 1 + p.size])
    for k in range(2, size):
        np.maximum(high, padded[k : k + p.size], out=high)
        np.minimum(low, padded[k : k + p.size], out=low)
    high -= low
    return high


def local_range(p: np.ndarray, reach: int = 1) -> np.ndarray:
    """R_i for each step i between readings i and i+1: the range of readings
    i-reach … i+1+reach."""
    p = np.asarray(p, dtype=float)
    if p.size < 2:
        return np.zeros(0)
    return _sliding_range(p, reach, reach + 1)[:-1]


def _point_unseen(sensor: Sensor) -> float:
    """u of a sensor that does not average: 1 for a point, 1 − W/P for a part-time one."""
    return 1.0 - sensor.seen_share if sensor.part_time else 1.0


def unseen_share(sensor: Sensor, dt_s: np.ndarray) -> np.ndarray:
    """u per step: the share of a step of ``dt_s`` seconds its readings leave unmeasured."""
    dt = np.asarray(dt_s, dtype=float)
    part = 1.0 - sensor.seen_share
    if sensor.averaging_s <= 0:
        return np.full(dt.shape, _point_unseen(sensor))
    covered = np.minimum(1.0, sensor.averaging_s / np.maximum(dt, 1e-12))
    uncovered = 1.0 - covered
    return uncovered + covered * part if sensor.part_time else uncovered


def step_error_w_s(sensor: Sensor, dt_s: np.ndarray, p: np.ndarray) -> np.ndarray:
    """b_i (J) for each step between consecutive readings ``p`` ``dt_s`` apart (one number:
    every step as long, as a series' cells are)."""
    dt = np.asarray(dt_s, dtype=float)
    span = np.maximum(dt, sensor.period_s) if sensor.period_s > 0 else dt
    if sensor.averaging_s <= 0:  # (u is one number: no array of it, no reach to find)
        b = local_range(p, 1)
        b *= span
        b *= _point_unseen(sensor) / 2.0
        return b
    u = unseen_share(sensor, dt)
    if not u.any():  # (an average that covers every step leaves nothing unseen)
        return np.zeros(max(p.size - 1, 0))
    # (an average hides the swing it averages: the range is taken over its reach)
    return u * span * local_range(p, _reach(sensor, dt)) / 2.0


def power_bounds(
    sensor: Sensor, t_s: np.ndarray, p: np.ndarray, integrated: np.ndarray, energy_j: float
) -> tuple[float, float]:
    """(low, high) of an energy ``energy_j`` integrated from readings ``p`` at times ``t_s``
    over the steps where ``integrated`` (the gap rule's)."""
    t = np.asarray(t_s, dtype=float)
    b = np.where(np.asarray(integrated, dtype=bool), step_error_w_s(sensor, np.diff(t), p), 0.0)
    half = combined_half_width(t[:-1] - t[0], b) if b.size else 0.0
    if sensor.averaging_s <= 0 or not p.size:
        return energy_j - half, energy_j + half
    spread = reach_range(p, _reach(sensor, np.diff(t)))
    shift, edge = _edges(sensor.averaging_s, p[0], p[-1], spread[0], spread[-1])
    return float(energy_j + shift - edge - half), float(energy_j + shift + edge + half)


def _reach(sensor: Sensor, dt_s: np.ndarray) -> int:
    """How many readings an average over A reaches back (at least one)."""
    typical = float(np.median(dt_s)) if dt_s.size else 1.0
    return max(1, int(np.ceil(sensor.averaging_s / max(typical, 1e-9))))


def reach_range(p: np.ndarray, reach: int) -> np.ndarray:
    """Per reading, the range of the readings within ``reach`` of it on either side."""
    p = np.asarray(p, dtype=float)
    return _sliding_range(p, reach, reach) if p.size else np.zeros(0)


def _edges(
    averaging_s: float,
    first: np.ndarray | float,
    last: np.ndarray | float,
    first_range: np.ndarray | float,
    last_range: np.ndarray | float,
) -> tuple[np.ndarray | float, np.ndarray | float]:
    """(shift, half-width) of what an average over A leaves out at the ends of a stretch: the
    first reading reaches A before it, the last misses A of it; with the power over each end's
    A within the end's reading ± the range of the readings around it, the truth minus the
    sum lies in A/2 · (last − first) ± A/2 · (range at the first + range at the last)."""
    half_a = averaging_s / 2
    return half_a * (last - first), half_a * (first_range + last_range)


#: errors of the steps within one block of this many seconds are taken to add up with one sign
#: (a periodic workload sampled in step with its period errs the same way again and again);
#: blocks are taken as independent of one another
BLOCK_S = 2.0
#: the half-width in standard deviations of the summed block errors (each uniform within its
#: bound: variance bound² / 3)
Z = 2.0


def combined_half_width(offset_s: np.ndarray, b: np.ndarray) -> float:
    """Z standard deviations of the sum of the steps' errors ``b`` (J) at ``offset_s`` seconds
    from the start: linear within each :data:`BLOCK_S` block, in quadrature across blocks."""
    block = np.floor(np.asarray(offset_s) / BLOCK_S).astype(np.int64)
    return _blocks_half_width(np.bincount(block - block.min(), weights=b))


def _blocks_half_width(block_sums: np.ndarray) -> float:
    """Z standard deviations of a sum of independent block errors, each uniform within its
    bound (the block's summed step bounds): variance bound² / 3; never more than the bounds'
    sum, every step's error at its bound with one sign (which Z standard deviations of one
    block, 2/√3 of its bound, would pass)."""
    return float(min(Z * np.sqrt(np.sum(block_sums**2) / 3.0), np.sum(block_sums)))


def counter_bounds(
    energy_j: float, p_max_w: float, counter: EnergyCounter = COUNTER
) -> tuple[float, float]:
    """(low, high) of an energy read as a counter's difference."""
    lag = counter.update_s * p_max_w + counter.resolution_j
    return energy_j - lag, energy_j + lag


def _p_max_w(p: np.ndarray, nameplate_w: float | None) -> float:
    """The power a counter's lag is bounded by: the larger of the nameplate and the highest
    reading (power is taken never to exceed it)."""
    return max(nameplate_w or 0.0, float(np.max(p)) if p.size else 0.0)


def energy_bounds(
    sensor: Sensor | None,
    t_s: np.ndarray,
    p: np.ndarray,
    integrated: np.ndarray,
    energy_j: float,
    *,
    counter: bool,
    nameplate_w: float | None,
) -> EnergyBounds:
    """One series' energy with its interval: from the counter (``counter``), else from the
    readings ``p`` of ``sensor`` at ``t_s`` (None: a sensor not known, no interval)."""
    if counter:
        low, high = counter_bounds(energy_j, _p_max_w(p, nameplate_w))
        return EnergyBounds(energy_j, low, high, "counter")
    if sensor is None:
        return EnergyBounds(energy_j, float("nan"), float("nan"), "power, sensor unknown")
    low, high = power_bounds(sensor, t_s, p, integrated, energy_j)
    return EnergyBounds(energy_j, low, high, f"power ({sensor.name})")


def interval_bounds(
    sensor: Sensor | None,
    t_s: np.ndarray,
    p: np.ndarray,
    integrated: np.ndarray,
    a_s: np.ndarray,
    b_s: np.ndarray,
    *,
    counter: bool,
    nameplate_w: float | None,
) -> tuple[np.ndarray, np.ndarray]:
    """How far below and above the energy of each interval [a, b] (E(b) − E(a), E linear
    between readings, as ``energy`` accounts it) the truth can be, in J (NaN: the sensor is
    not known). The steps' errors count in proportion to their time inside the interval."""
    a_s, b_s = np.asarray(a_s, dtype=float), np.asarray(b_s, dtype=float)
    t = np.asarray(t_s, dtype=float)
    if counter:
        _, lag = counter_bounds(0.0, _p_max_w(p, nameplate_w))
        return np.full(a_s.shape, lag), np.full(a_s.shape, lag)
    if sensor is None or t.size < 2:
        nan = np.full(a_s.shape, np.nan)
        return nan, nan
    b = np.where(np.asarray(integrated, dtype=bool), step_error_w_s(sensor, np.diff(t), p), 0.0)
    cum = np.concatenate(([0.0], np.cumsum(b)))
    spread = reach_range(p, _reach(sensor, np.diff(t))) if sensor.averaging_s > 0 else p
    below, above = np.empty(a_s.shape), np.empty(a_s.shape)
    for k, (a, z) in enumerate(zip(a_s, b_s, strict=True)):
        lo, hi = max(a, t[0]), min(z, t[-1])
        if hi <= lo:
            below[k] = above[k] = 0.0
            continue
        edges = np.concatenate(
            ([lo], np.arange(np.ceil(lo / BLOCK_S), np.ceil(hi / BLOCK_S)) * BLOCK_S, [hi])
        )
        edges = np.unique(np.clip(edges, lo, hi))
        half = _blocks_half_width(np.diff(np.interp(edges, t, cum)))
        if sensor.averaging_s <= 0:
            below[k] = above[k] = half
            continue
        shift, edge = _edges(
            sensor.averaging_s,
            float(np.interp(lo, t, p)),
            float(np.interp(hi, t, p)),
            float(np.interp(lo, t, spread)),
            float(np.interp(hi, t, spread)),
        )
        below[k], above[k] = half + edge - shift, half + edge + shift
    return below, above


def supports_window(sensor: Sensor, window_s: float) -> bool:
    """Whether a window of ``window_s`` is long enough for ``sensor`` to say anything of its
    mean: not shorter than the sensor's averaging (a shorter stretch's mean is not in the
    readings), nor than the stretch a part-time sensor never measures."""
    return window_s >= sensor.averaging_s - 1e-9 and window_s >= sensor.blind_s - 1e-9


@dataclass(frozen=True)
class CellErrors:
    """What the window bounds of one series' cells rest on (:func:`cell_errors`): each cell's
    step bound (J; absent cells none), and for an average its values and the range of the
    values within its reach."""

    sensor: Sensor
    grid_s: float
    bounds: np.ndarray
    values: np.ndarray
    ranges: np.ndarray | None

    @functools.cached_property
    def squares(self) -> np.ndarray:
        """Each cell's step bound squared (J²)."""
        return self.bounds * self.bounds


def cell_errors(
    sensor: Sensor, values: np.ndarray, present: np.ndarray, grid_s: float
) -> CellErrors:
    """One series' cells read as readings every ``grid_s``: their step bounds b (the
    energy's), once for all its windows."""
    b = np.zeros(values.size)
    step = np.array(grid_s)  # (every cell a grid step from the next: u and the span once)
    if values.size > 1:
        b[:-1] = step_error_w_s(sensor, step, values)
        b[~present] = 0.0
    ranges = reach_range(values, _reach(sensor, step)) if sensor.averaging_s > 0 else None
    return CellErrors(sensor, grid_s, b, values, ranges)


def window_error_w(
    errors: CellErrors,
    n: int,
    squares: np.ndarray,
    sums: np.ndarray,
    ends: tuple[np.ndarray | slice, np.ndarray | slice] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """How far below and above each window position's mean (W) the true mean can lie, given
    each position's Σ b² over its cells (``squares``), Σ b (``sums``) and, for an average, its
    first and last cell (``ends``, powerkit.cells.rolling.window_ends): the steps' bounds b
    combined as the energy's are — for a window of n cells and blocks of k = BLOCK_S / grid
    cells, Z · sqrt(min(n, k) · Σ b² / 3) (exact where b is the same in every cell), and never
    more than Σ b, every step's error at its bound with one sign — over the window's w
    seconds, and for an average over A the ends' reach, as
    the energy's, over A and the cell a reading stands for: the true mean less the window's
    lies in ((A + grid)/2 · (last − first) ± (A + grid)/2 · (R_first + R_last)) / w."""
    grid_s, values = errors.grid_s, errors.values
    k = max(1, round(BLOCK_S / grid_s))
    width = n * grid_s
    if errors.bounds.any():
        spread = np.sqrt(squares)
        spread *= Z * np.sqrt(min(n, k) / 3.0)
        np.minimum(spread, sums, out=spread)
        spread /= width
    else:  # (an average over every step: the ends alone)
        spread = np.zeros(squares.shape)
    if errors.ranges is None:
        return spread, spread
    ranges = errors.ranges
    assert ends is not None, "an average's window bounds need the windows' ends"
    first, last = ends
    # (a reading taken at a cell's start stands for the cell after it: its reach is the
    # average's and the cell's, A + grid)
    shift, edge = _edges(
        errors.sensor.averaging_s + grid_s,
        values[first],
        values[last],
        ranges[first],
        ranges[last],
    )
    # (true mean − sensed mean lies in (shift ± edge) / w)
    edge += spread * width
    return (edge - shift) / width, (edge + shift) / width
