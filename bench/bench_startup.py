"""Start-up: whole-process wall time of `powerkit --help`, `--version` and `info` on a small
trace (1,200 samples), best of five, and the ten slowest imports of `info` (python -X importtime).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "sample_data" / "a100-7b.parquet"
RUN = "import sys; from powerkit._entry import main; sys.argv = ['powerkit', *sys.argv[1:]]; main()"


def best_of(argv: list[str], runs: int = 5) -> float:
    """Return the best wall time (s) of a fresh ``powerkit argv`` process."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", RUN, *argv], capture_output=True, check=False, cwd=ROOT
        )
        times.append(time.perf_counter() - t0)
    return min(times)


def slowest_imports(argv: list[str], top: int = 10) -> list[tuple[float, str]]:
    """Return the ``top`` imports with the largest cumulative time (ms) for ``argv``."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", RUN, *argv],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    rows = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        rows.append((int(cumulative) / 1000, name))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    for label, argv in (
        ("--help", ["--help"]),
        ("--version", ["--version"]),
        ("info (1,200 samples)", ["info", str(SMALL)]),
    ):
        print(f"{label:22s}: {best_of(argv):.2f} s (best of 5, whole process)")
    print("slowest imports of `powerkit info` (cumulative ms):")
    for ms, name in slowest_imports(["info", str(SMALL)]):
        print(f"  {ms:7.1f}  {name}")


if __name__ == "__main__":
    main()
