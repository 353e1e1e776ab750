"""How far to trust an energy: the simulator as ground truth (docs/trust.md).

For every preset and seed, the job's true power (every 5 ms) is read through each sensor model
at the logger's interval; the energy the readings give (trapezoids, as ``info`` integrates) and
its interval (powerkit.sensors.bounds) are set against the true energy over the same span, and
the counter's too. Prints, per sensor: the share of runs whose true energy lies inside the
interval, the median and 95th percentile of the true error, and the median width. Then the
violation rates at 0.5 s, 30 s and 5 min (rolling windows on the logger's grid, as
``windows`` counts them, each against a budget at the 90th percentile of its own true window
means): the share of runs whose true rate lies in [violation_rate_low, violation_rate_high],
the median and 95th percentile error of the point rate and the median width, in points.

    python bench/sensor_truth.py [--seeds 20] [--minutes 20] [--interval 0.1]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from powerkit.cells.rolling import PrefixSums, WindowStats, rolling, rolling_error_w
from powerkit.sensors import COUNTER, SENSORS, Sensor
from powerkit.sensors.bounds import counter_bounds, power_bounds, supports_window
from powerkit.sensors.sense import TRUTH_STEP_S, Truth, read_counter, sense
from powerkit.sim.model import GrpoSim
from powerkit.sim.presets import PRESETS, Preset

WINDOWS_S = (0.5, 30.0, 300.0)
#: per sensor, the preset of each energy row (in the rows' order): for the worst preset
presets: dict[str, list[str]] = {}


def rates(
    sensor: Sensor, true_cells: np.ndarray, cells: np.ndarray, grid_s: float
) -> list[tuple[float, float, float, float]]:
    """(true, sensed, low, high) violation rate per window of :data:`WINDOWS_S`."""
    present = np.ones(cells.size, dtype=bool)
    out = []
    for w in WINDOWS_S:
        n = round(w / grid_s)
        budget = float(np.quantile(rolling(PrefixSums(true_cells, present), n, grid_s).means, 0.9))
        true, sensed = WindowStats(), WindowStats()
        true.add(rolling(PrefixSums(true_cells, present), n, grid_s), budget)
        pos = rolling(PrefixSums(cells, present), n, grid_s)
        sensed.add(pos, budget)
        below, above = rolling_error_w(sensor, cells, present, n, grid_s)
        sensed.add_bounds(pos, below, above, budget)
        low, high = (sensed.surely or 0) / sensed.positions, (sensed.maybe or 0) / sensed.positions
        if not supports_window(sensor, w):
            low, high = 0.0, 1.0
        out.append(
            (true.violations / true.positions, sensed.violations / sensed.positions, low, high)
        )
    return out


def simulated(
    preset: Preset, seed: int, minutes: float, interval_s: float
) -> tuple[Truth, np.ndarray, float]:
    """One seed of a preset's job: its true power every 5 ms, the times a logger reads it
    every ``interval_s``, and the sensor clock's offset (as ``record --sensor`` draws it)."""
    horizon = minutes * 60
    grid = np.arange(round(horizon / TRUTH_STEP_S) + 1) * TRUTH_STEP_S
    truth = Truth(0.0, TRUTH_STEP_S, GrpoSim(preset, seed=seed).sample(grid).power_w)
    phase = float(np.random.default_rng([seed, 7]).uniform(0, 0.1))
    return truth, np.arange(1, int(horizon / interval_s)) * interval_s, phase


def run(
    seeds: int, minutes: float, interval_s: float
) -> tuple[dict[str, list[tuple[float, ...]]], dict[tuple[str, float], list[tuple[float, ...]]]]:
    """(true, sensed, low, high) energy per sensor, preset, seed and GPU; and the violation
    rates per sensor and window."""
    found: dict[str, list[tuple[float, ...]]] = {}
    windows: dict[tuple[str, float], list[tuple[float, ...]]] = {}
    presets.clear()
    for name, preset in PRESETS.items():
        for seed in range(seeds):
            truth, t, phase = simulated(preset, seed, minutes, interval_s)
            true = truth.energy(t[-1:])[:, 0] - truth.energy(t[:1])[:, 0]
            true_cells = truth.mean(t, t + interval_s)  # (the cell a reading at t stands for)
            for key, sensor in SENSORS.items():
                readings = sense(sensor, truth, t, phase)
                for g, p in enumerate(readings):
                    e = float(np.sum(0.5 * (p[1:] + p[:-1]) * np.diff(t)))
                    low, high = power_bounds(sensor, t, p, np.ones(t.size - 1, bool), e)
                    found.setdefault(key, []).append((true[g], e, low, high))
                    presets.setdefault(key, []).append(name)
                    for w, row in zip(
                        WINDOWS_S, rates(sensor, true_cells[g], p, interval_s), strict=True
                    ):
                        windows.setdefault((key, w), []).append(row)
            counter = read_counter(COUNTER, truth, t)
            for g, c in enumerate(counter):
                e = float(c[-1] - c[0])
                low, high = counter_bounds(e, max(preset.tdp_w, float(truth.power[g].max())))
                found.setdefault("counter", []).append((true[g], e, low, high))
                presets.setdefault("counter", []).append(name)
        print(f"  {name}: done", file=sys.stderr)
    return found, windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--interval", type=float, default=0.1)
    args = parser.parse_args()
    if args.minutes * 60 < 2 * max(WINDOWS_S):
        parser.error(
            f"--minutes must be at least {2 * max(WINDOWS_S) / 60:g} (twice the longest window)"
        )
    began = time.perf_counter()
    found, windows = run(args.seeds, args.minutes, args.interval)
    print(
        f"{len(PRESETS)} presets x {args.seeds} seeds, {args.minutes:g} min each, read every "
        f"{args.interval:g} s ({time.perf_counter() - began:.0f} s)"
    )
    heads = ("runs", "inside", "err p50", "err p95", "width p50")
    print(f"{'sensor':25s} " + " ".join(f"{h:>9s}" for h in heads) + "  worst preset")
    for key, rows in found.items():
        true, e, low, high = np.array(rows).T
        print(_row(key, true, e, low, high, presets[key], scale=100 / true, unit="%"))
    for (key, w), rows in windows.items():
        true, rate, low, high = np.array(rows).T
        print(_row(f"{key} {w:g} s", true, rate, low, high, presets[key], scale=100, unit="p"))


def _row(
    label: str,
    true: np.ndarray,
    figure: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    names: list[str],
    *,
    scale: np.ndarray | float,
    unit: str,
) -> str:
    """One line: runs, the share inside, the error (median, p95) and width (median), in
    ``unit`` after ``scale``, and the preset with the least share inside."""
    held = (true >= low - 1e-12) & (true <= high + 1e-12)
    err = np.abs(figure - true) * scale
    width = (high - low) * scale
    by = np.array(names)
    share = {n: float(np.mean(held[by == n])) for n in dict.fromkeys(names)}
    worst = min(share, key=lambda n: share[n])
    return (
        f"{label:25s} {true.size:9d} {100 * float(np.mean(held)):8.1f}% "
        f"{np.median(err):8.3f}{unit} {np.quantile(err, 0.95):8.3f}{unit} "
        f"{np.median(width):8.3f}{unit}  {worst} {100 * share[worst]:.1f}%"
    )


if __name__ == "__main__":
    main()
