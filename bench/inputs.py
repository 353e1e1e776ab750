"""Large benchmark inputs, generated once into bench_out/ and reused by later runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench_out"


def cached_input(name: str, make: Callable[[Path], None]) -> Path:
    """Return bench_out/``name``, made by ``make(path)`` (and timed) when it is not there yet."""
    OUT.mkdir(exist_ok=True)
    path = OUT / name
    if not path.exists():
        t0 = time.perf_counter()
        make(path)
        print(f"(generated {name}: {path.stat().st_size / 1e6:.0f} MB in "
              f"{time.perf_counter() - t0:.1f} s)")  # fmt: skip
    return path
