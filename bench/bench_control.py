"""Benchmark of controller training: 500 control periods on the simulator (target: < 2 min)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from powerkit.control.train import train_policy  # noqa: E402


def main() -> None:
    for preset, knob, budget in (
        ("a100-7b", "group_size", 314.6),
        ("a100-72b-tp4-gen", "concurrency", 156.0),
        ("a100-72b-tp4", "joint", 237.5),  # group size, concurrency and the cap (target <= 2 min)
    ):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            train_policy(preset, budget, knob, Path(tmp) / "p.npz", steps=500, seed=0)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        print(
            f"control train {preset:17s} {knob:12s}: 500 steps in {wall:5.1f} s ({cpu:.1f} s CPU)"
        )


if __name__ == "__main__":
    main()
