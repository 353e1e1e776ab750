"""Benchmark of the PFI path: simulated cap sweeps, and allocation at the published scale."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from powerkit.pfi.allocate import AllocJob, allocate, jobs_from_curves  # noqa: E402
from powerkit.pfi.curves import from_sweep  # noqa: E402
from powerkit.pfi.index import compute_pfi  # noqa: E402
from powerkit.sim import get_preset  # noqa: E402
from powerkit.sweep.backends import SimBackend  # noqa: E402
from powerkit.sweep.runner import SweepConfig, run_sweep  # noqa: E402

PRESETS = ("h200-dense-pretrain", "h200-moe-pretrain", "h200-moe-finetune")
CAPS = [200.0, 300.0, 400.0, 500.0, 600.0, 700.0]


def random_jobs(n: int, rng: np.random.Generator) -> list[AllocJob]:
    """``n`` concave curves of 8 points: a harder allocation than the simulator's few jobs."""
    jobs = []
    for i in range(n):
        power = np.sort(rng.uniform(1000, 6000, 8))
        slopes = np.sort(rng.uniform(0.5, 20, 7))[::-1]
        tokens = 1000 + np.concatenate([[0.0], np.cumsum(slopes * np.diff(power))])
        pfi = float(rng.uniform(1.0, 2.7))
        jobs.append(AllocJob(f"j{i}", power, tokens, power[-1], tokens[-1], pfi, pfi * 1.1))
    return jobs


def main() -> None:
    curves, results = [], []
    t0 = time.perf_counter()
    for preset in PRESETS:
        config = SweepConfig(axes={"power_cap_w": CAPS}, warmup_s=60, point_s=600, repeats=3)
        data = run_sweep(SimBackend(get_preset(preset), seed=1, common_seed=True), config)
        data.job = preset
        (curve,) = from_sweep(data, "top10", Path(preset))
        curves.append(curve)
        results.append(compute_pfi(curve))
    wall = time.perf_counter() - t0
    print(
        f"pfi sweep (sim)    : {len(PRESETS)} jobs x 6 caps x 3 repeats of 10 min in {wall:.1f} s"
    )
    jobs = jobs_from_curves(curves, results)
    cuts = [0.0, 0.1, 0.2, 0.3, 0.4]
    policies = ["equal", "pfi", "oracle"]
    for label, pool, workloads in (
        ("sim curves        ", jobs, 500),
        ("25 random curves  ", random_jobs(25, np.random.default_rng(0)), 500),
        ("25 random curves  ", random_jobs(25, np.random.default_rng(0)), 5000),
    ):
        t0 = time.perf_counter()
        allocate(
            pool,
            cuts,
            [*policies, "predicted-pfi"] if label.startswith("25") else policies,
            workloads=workloads,
            jobs_per_workload=100,
            seed=0,
        )
        wall = time.perf_counter() - t0
        print(f"pfi allocate {label}: {workloads} workloads x 100 jobs x 5 cuts in {wall:.2f} s")


if __name__ == "__main__":
    main()
