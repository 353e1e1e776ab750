"""Is there anything in the response lengths for a controller to time its allowance by?

A measurement behind docs/control.md ("Why there is nothing to learn from the lengths"), not a
timing: 300 GRPO steps of each drifting job held at the rung above static safe (seed 1000);
per step, its mean response length against its share of 0.5 s samples over the budget and its
tokens/s, and the last step's length (what the policy observes) against the next step's share.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from powerkit.sim import DRIFTS, GrpoSim, Knobs, get_preset


def per_step(preset: str, budget_w: float, knobs: Knobs, steps: int = 300) -> np.ndarray:
    """Rows of (mean response length, share of samples over budget, tokens/s, seconds)."""
    sim = GrpoSim(get_preset(preset), knobs, seed=1000, drift=DRIFTS["grpo"])
    rows, t = [], 0.0
    for k in range(steps):
        start, end = sim.schedule_step(t)
        s = sim.sample(np.arange(start, end - 0.3, 0.5))
        mean, _ = sim.step_lengths(k) or (float("nan"), 0.0)
        made = float(s.tokens[-1] - s.tokens[0])
        rows.append((mean, float((s.power_w > budget_w).mean()), made / (end - start), end - start))
        t = end
    return np.array(rows)


def main() -> None:
    for preset, budget_w, knobs in (
        ("a100-7b", 314.6, Knobs(8, 8)),
        ("a100-72b-tp4-gen", 156.0, Knobs(8, 4)),
    ):
        a = per_step(preset, budget_w, knobs)
        same = np.corrcoef(a[:, 0], a[:, 1])[0, 1]
        rate = np.corrcoef(a[:, 0], a[:, 2])[0, 1]
        last = np.corrcoef(a[:-1, 0], a[1:, 1])[0, 1]
        print(
            f"{preset} group {knobs.group_size} concurrency {knobs.concurrency}: share over "
            f"budget {100 * a[:, 1].mean():.1f} % (sd {100 * a[:, 1].std():.1f}); corr(length, "
            f"share) {same:+.2f}, corr(last step's length, share) {last:+.2f}, corr(length, "
            f"tokens/s) {rate:+.2f}; steps of {a[:, 3].mean():.0f} s"
        )


if __name__ == "__main__":
    main()
