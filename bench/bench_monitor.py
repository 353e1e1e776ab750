"""powerkit.Monitor's overhead, against the plain fake NVML (8 GPUs; its calls cost what a
Python function call costs, so what is measured is powerkit's own work):

- the sampler's CPU time per second of wall time at 100 ms and at 10 ms (the main thread
  asleep: the process's CPU time is the sampler's);
- the slowdown of a NumPy loop (matrix products, a training step's stand-in) with the monitor
  on at 100 ms and a window around every iteration, against the same loop with it off,
  alternated over several rounds (the target: not measurable beyond noise, <= 1 %).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_nvml import FakeNvml  # noqa: E402

import powerkit.telemetry.nvml as nvml_module  # noqa: E402
from powerkit.monitor.session import Monitor  # noqa: E402


def sampler_cpu(interval: str, seconds: float) -> tuple[float, int]:
    """CPU seconds per wall second, and the samples taken."""
    with Monitor(interval=interval) as mon:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        time.sleep(seconds)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    result = mon.result
    return cpu / wall, 0 if result is None else result.samples


def loop(steps: int, inner: int, mon: Monitor | None, window: bool, a: np.ndarray) -> float:
    """``steps`` steps of ``inner`` matrix products, a window around each when asked."""
    t0 = time.perf_counter()
    for _ in range(steps):
        if window and mon is not None:
            mon.begin_window("step")
        for _ in range(inner):
            a = np.tanh(a @ a * 1e-3)
        if window and mon is not None:
            mon.end_window("step")
    return time.perf_counter() - t0


def slowdown(label: str, steps: int, inner: int, window: bool) -> None:
    """The loop with the monitor on at 100 ms against off, alternated over 9 rounds."""
    a = np.random.default_rng(0).random((192, 192))
    loop(steps, inner, None, False, a)  # (warm up)
    off, on = [], []
    with Monitor(interval="100ms") as mon:
        for _ in range(9):
            off.append(loop(steps, inner, None, False, a))
            on.append(loop(steps, inner, mon, window, a))
    change = statistics.median(b / c for b, c in zip(on, off, strict=True)) - 1
    noise = statistics.median(abs(off[i + 1] / off[i] - 1) for i in range(len(off) - 1))
    print(
        f"NumPy loop, {label} ({steps} steps of ~{1000 * statistics.median(off) / steps:.1f} "
        f"ms): monitor on at 100 ms {100 * change:+.2f} % (off against off, round to round: "
        f"{100 * noise:.2f} %; target <= 1 %)"
    )


def main() -> None:
    fake = FakeNvml(gpus=8, autospec=False)
    nvml_module.pynvml = fake.module  # type: ignore[assignment]
    for interval in ("100ms", "10ms"):
        share, samples = sampler_cpu(interval, 10.0)
        print(
            f"monitor sampler at {interval:>5}: {1000 * share:.1f} ms CPU per second "
            f"({100 * share:.2f} % of a core; {samples:,} samples of 8 GPUs "
            "in 10 s)"
        )
    slowdown("sampler alone", 60, 20, window=False)
    slowdown("a window a step", 12, 220, window=True)


if __name__ == "__main__":
    main()
