"""Would a violation rate's interval be narrower, and still hold the truth, if the block
model's errors were drawn jointly instead of each position taken at its worst? (design note 175)

For every preset and seed, the job's true power is read through the point and the A100
part-time sensor every 0.1 s; for 0.5 s, 30 s and 5 min rolling windows against a budget at
the 90th percentile of the true window means (as bench/sensor_truth.py), three intervals for
the true rate:

* *guaranteed*: what ``windows`` reports (powerkit.cells.rolling.rolling_error_w): a position
  surely violates when its mean less its bound exceeds the budget, may when its mean plus it does;
* *joint*: the 2.5 and 97.5 percentiles of the rate over draws of the model itself — each 2 s
  block's error uniform within its bound, every step of the block at the same fraction of
  its own bound (powerkit.sensors.bounds), the true mean the sensed one less the draw's error;
* *reflected*: the joint draws mirrored about the sensed rate (noise widens the spread of the
  sensed means, so the truth lies on the other side of the sensed rate from where the draws
  move it), widened to the sensed rate ± half the draws' spread.

Prints, per sensor and window, the share of runs whose true rate lies inside each interval
and the interval's median width in points, and the preset where the reflected one holds least.

    python bench/rate_intervals.py [--minutes 10] [--seeds 3] [--draws 200]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from sensor_truth import WINDOWS_S, simulated  # (bench/: the truth runs are sensor_truth's)

from powerkit.cells.rolling import PrefixSums, rolling, rolling_error_w
from powerkit.sensors import SENSORS
from powerkit.sensors.bounds import BLOCK_S, cell_errors
from powerkit.sensors.sense import sense
from powerkit.sim.presets import PRESETS

GRID_S = 0.1
KEYS = ("instant", "a100-power.draw")


def intervals(
    sensor_key: str, p: np.ndarray, true_cells: np.ndarray, rng: np.random.Generator, draws: int
) -> list[tuple[float, ...]]:
    """Per window: (true, sensed, guaranteed low, high, joint low, high, reflected low, high)."""
    sensor = SENSORS[sensor_key]
    present = np.ones(p.size, dtype=bool)
    b = cell_errors(sensor, p, present, GRID_S).bounds
    blocks = np.arange(p.size) // round(BLOCK_S / GRID_S)
    out = []
    for w in WINDOWS_S:
        n = round(w / GRID_S)
        truth = rolling(PrefixSums(true_cells, present), n, GRID_S).means
        budget = float(np.quantile(truth, 0.9))
        means = rolling(PrefixSums(p, present), n, GRID_S).means
        below, above = rolling_error_w(sensor, p, present, n, GRID_S)
        rates = np.empty(draws)
        for d in range(draws):
            e = rng.uniform(-1.0, 1.0, blocks[-1] + 1)[blocks] * b
            sums = np.concatenate(([0.0], np.cumsum(e)))
            rates[d] = np.mean(means - (sums[n:] - sums[:-n]) / w > budget)
        low, high = np.quantile(rates, [0.025, 0.975])
        sensed = float(np.mean(means > budget))
        half = (high - low) / 2
        out.append(
            (
                float(np.mean(truth > budget)),
                sensed,
                float(np.mean(means - below > budget)),
                float(np.mean(means + above > budget)),
                float(low),
                float(high),
                float(min(2 * sensed - high, sensed - half)),
                float(max(2 * sensed - low, sensed + half)),
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()
    if args.minutes * 60 < 2 * max(WINDOWS_S):
        parser.error(f"--minutes must be at least {2 * max(WINDOWS_S) / 60:g}")
    rows: dict[tuple[str, float], list[tuple[float, ...]]] = {}
    names: dict[tuple[str, float], list[str]] = {}
    for name, preset in PRESETS.items():
        for seed in range(args.seeds):
            truth, t, phase = simulated(preset, seed, args.minutes, GRID_S)
            true_cells = truth.mean(t, t + GRID_S)
            for key in KEYS:
                for g, p in enumerate(sense(SENSORS[key], truth, t, phase)):
                    rng = np.random.default_rng([seed, g, 99])
                    found = intervals(key, p, true_cells[g], rng, args.draws)
                    for w, row in zip(WINDOWS_S, found, strict=True):
                        rows.setdefault((key, w), []).append(row)
                        names.setdefault((key, w), []).append(name)
        print(f"  {name}: done", file=sys.stderr)
    print(
        f"{len(PRESETS)} presets x {args.seeds} seeds, {args.minutes:g} min each, read every "
        f"{GRID_S:g} s, {args.draws} draws; per interval: share inside, median width (points)"
    )
    print(f"{'sensor':24s} {'err p95':>8s} {'guaranteed':>17s} {'joint':>17s} {'reflected':>17s}")
    for (key, w), found in rows.items():
        a = np.array(found)
        true, sensed = a[:, 0], a[:, 1]
        cells = []
        for lo, hi in ((2, 3), (4, 5), (6, 7)):
            held = (true >= a[:, lo] - 1e-12) & (true <= a[:, hi] + 1e-12)
            cells.append(f"{100 * held.mean():6.1f}% {100 * np.median(a[:, hi] - a[:, lo]):8.2f}p")
        by = np.array(names[(key, w)])
        held = (true >= a[:, 6] - 1e-12) & (true <= a[:, 7] + 1e-12)
        worst = min((float(held[by == n].mean()), n) for n in dict.fromkeys(by))
        err = np.quantile(np.abs(sensed - true), 0.95) * 100
        print(
            f"{key + f' {w:g} s':24s} {err:7.2f}p "
            + " ".join(f"{c:>17s}" for c in cells)
            + f"  reflected worst: {worst[1]} {100 * worst[0]:.0f}%"
        )


if __name__ == "__main__":
    main()
