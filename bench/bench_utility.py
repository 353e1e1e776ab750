"""`powerkit utility` on a 24 h, 8-GPU trace at 20 ms (34.6 M samples): the fleet's ramps, ranges
and spectrum, in a fresh process (target: within 60 s on the 2-core machine).

Baseline in the same run: reading the same trace's power column whole (DuckDB), the floor a
command that looks at every sample cannot beat.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from inputs import cached_input  # noqa: E402


def record(path: Path) -> None:
    exe = Path(sys.executable).with_name("powerkit")
    subprocess.run(
        [
            str(exe),
            "record",
            "--backend",
            "sim",
            "--preset",
            "h200-dense-pretrain",
            "--duration",
            "24h",
            "--interval",
            "20ms",
            "--out",
            str(path),
            "--quiet",
        ],
        check=True,
    )


def main() -> None:
    trace = cached_input("grid_8gpu_24h_20ms.parquet", record)
    rows = duckdb.sql(f"SELECT count(*) FROM read_parquet('{trace}')").fetchall()[0][0]
    t0 = time.perf_counter()
    duckdb.sql(f"SELECT sum(power_w) FROM read_parquet('{trace}')").fetchall()
    floor = time.perf_counter() - t0
    exe = Path(sys.executable).with_name("powerkit")
    t0 = time.perf_counter()
    subprocess.run(
        [str(exe), "utility", str(trace), "--site-mw", "100", "--json"],
        check=True,
        capture_output=True,
    )
    took = time.perf_counter() - t0
    t0 = time.perf_counter()
    remedies = ["--spec", "swings-pct", "--mitigate", "storage:auto"]
    subprocess.run(
        [str(exe), "utility", str(trace), "--site-mw", "100", *remedies, "--json"],
        check=True,
        capture_output=True,
    )
    with_storage = time.perf_counter() - t0
    print(
        f"grid: {rows:,} samples (8 GPUs x 24 h at 20 ms): {took:.1f} s whole command "
        f"(target <= 60 s), {rows / took / 1e6:.1f} M samples/s; with --spec and "
        f"--mitigate storage:auto {with_storage:.1f} s; baseline scan of the power column "
        f"{floor:.2f} s"
    )


if __name__ == "__main__":
    main()
