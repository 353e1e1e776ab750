"""Benchmark of the bloat planner: a 4-stage x 128-microbatch 1F1B pipeline with 60
frequencies per computation (the issue's target: <= 60 s on the 2-core machine), next to a
baseline measured in the same run: one LP of the same size (the work per frontier point)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from powerkit.bloat.pipeline import PIPELINE_PRESETS, PipelinePreset  # noqa: E402
from powerkit.bloat.planner import plan  # noqa: E402
from powerkit.bloat.profile import INSTRUCTIONS, Choices, Profile  # noqa: E402


def profile_60() -> Profile:
    """The a100-gpt3-pp4 model at 60 frequencies, 1410 MHz down to 525 MHz."""
    base = PIPELINE_PRESETS["a100-gpt3-pp4"]
    f = np.linspace(base.f_max_mhz, 525.0, 60)
    options = {}
    for s in range(base.stages):
        for i in INSTRUCTIONS:
            t = base.time_s(s, i, f)
            options[(s, i)] = Choices(f, t, base.power_w(f) * t)
    return Profile(base.stages, options, "bench:a100-gpt3-pp4x60")


def main() -> None:
    profile = profile_60()
    t0 = time.perf_counter()
    result = plan(profile, stages=4, microbatches=128, points=20)
    total = time.perf_counter() - t0
    t0 = time.perf_counter()
    plan(profile, stages=4, microbatches=128, points=2)
    two = time.perf_counter() - t0
    gaps = [p.gap_pct for p in result.frontier if p.gap_pct is not None]
    print("bloat plan: 4 stages x 128 microbatches x 60 frequencies, 1F1B, 20 deadlines")
    print(
        f"  method {result.method}: {total:.1f} s in all (target <= 60 s); "
        f"baseline 2 deadlines {two:.1f} s"
    )
    print(
        f"  frontier points {len(result.frontier)}, largest gap to the LP bound {max(gaps):.2f} %"
        if gaps
        else ""
    )
    print(
        f"  intrinsic bloat {result.intrinsic.saved_pct:.1f} %, extrinsic "
        + ", ".join(f"x{b.straggler:g} {b.saved_pct:.1f} %" for b in result.extrinsic)
    )
    for name, preset in PIPELINE_PRESETS.items():
        report(name, preset)


def report(name: str, preset: PipelinePreset) -> None:
    from powerkit.bloat.pipeline import sim_profile

    t0 = time.perf_counter()
    r = plan(
        sim_profile(preset),
        stages=preset.stages,
        microbatches=preset.microbatches,
        idle_power_w=preset.idle_w,
    )
    print(
        f"{name} ({preset.microbatches} microbatches, idle {preset.idle_w:g} W): "
        f"{time.perf_counter() - t0:.1f} s, intrinsic {r.intrinsic.saved_pct:.1f} %, "
        + ", ".join(f"x{b.straggler:g} {b.saved_pct:.1f} %" for b in r.extrinsic)
    )


if __name__ == "__main__":
    main()
