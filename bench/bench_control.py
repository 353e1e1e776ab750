"""Benchmark of controller training: 500 control periods on the simulator (target: < 2 min).

Baseline, measured in the same run: the same 500 periods of the environment alone (a random
policy, no learning), so the share of the time spent learning is visible."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from powerkit.control.env import SimEnv  # noqa: E402
from powerkit.control.train import train_policy  # noqa: E402
from powerkit.sim import get_preset  # noqa: E402


def environment_alone(
    preset: str, budget: float, knob: str, steps: int, drift: str, period_s: float | None
) -> float:
    """Seconds to run ``steps`` periods of the environment with random actions."""
    env = SimEnv(get_preset(preset), budget, knob, drift=drift, period_s=period_s)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    env.reset(seed=0)
    for k in range(steps):
        _, _, done, _ = env.step(int(rng.integers(3)))
        if done:
            env.reset(seed=k + 1)
    return time.perf_counter() - t0


def main() -> None:
    for preset, knob, budget, drift, period_s in (
        ("a100-7b", "group_size", 314.6, "none", None),
        ("a100-7b", "group_size", 314.6, "grpo", None),  # drifting lengths
        ("a100-72b-tp4-gen", "concurrency", 156.0, "none", None),
        # concurrency changed within the rollout: a 30 s period re-admits the running step
        ("a100-72b-tp4-gen", "concurrency", 156.0, "grpo", 30.0),
        # group size, concurrency and the cap (target <= 2 min)
        ("a100-72b-tp4", "joint", 237.5, "none", None),
        ("a100-72b-tp4", "joint", 237.5, "grpo", None),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            train_policy(
                preset,
                budget,
                knob,
                Path(tmp) / "p.npz",
                steps=500,
                seed=0,
                drift=drift,
                period_s=period_s,
            )
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        alone = environment_alone(preset, budget, knob, 500, drift, period_s)
        period = "a step" if period_s is None else f"{period_s:g} s"
        print(
            f"control train {preset:17s} {knob:12s} drift {drift:4s} period {period:6s}: 500 "
            f"steps in {wall:5.1f} s ({cpu:.1f} s CPU); baseline, the environment alone: "
            f"{alone:5.1f} s"
        )


if __name__ == "__main__":
    main()
