"""Reading logs as fast as a hand-written script (printed figures, no assertions).

Each figure is a whole process (start-up included), measured through bench/inputs.py's
launcher so that its peak memory is its own, next to the script a user would write instead,
in the same run:

* ``powerkit import`` of an nvidia-smi CSV (8 GPUs interleaved, units in cells, no index
  column) at 2 M and 10 M rows, against a 10-line Polars script that parses the same columns
  and writes the same sorted Parquet (targets: at most 1.3x the script's time; peak memory
  independent of the log's length, at most 400 MB at 10 M rows);
* ``powerkit windows`` (rolling 0.5 s, 30 s, 5 min) on a 20 M-sample canonical Parquet trace,
  against a bare DuckDB scan of the same columns (target: at most 2x) and a Polars
  ``rolling_mean_by(...).over("gpu")`` script.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from bench_foundation import make_smi_csv  # noqa: E402
from bench_windows import generate  # noqa: E402
from inputs import OUT, cached_input, run_measured  # noqa: E402

POLARS_IMPORT = """
import sys, polars as pl
src, out = sys.argv[1], sys.argv[2]
df = pl.read_csv(src, new_columns=["timestamp", "power", "util", "mem"])
df.select(
    pl.col("timestamp").str.strptime(pl.Datetime("us"), "%Y/%m/%d %H:%M:%S%.3f")
    .dt.replace_time_zone("UTC").alias("ts"),
    pl.lit("node").alias("host"),
    (pl.int_range(pl.len()) % 8).cast(pl.Int16).alias("gpu"),
    pl.col("power").str.strip_chars().str.strip_suffix(" W").cast(pl.Float32).alias("power_w"),
    pl.col("util").str.strip_chars().str.strip_suffix(" %").cast(pl.Float32).alias("gpu_util"),
).sort("host", "gpu", "ts").write_parquet(out, compression="zstd")
"""

DUCKDB_SCAN = """
import sys, duckdb
print(duckdb.sql(f"SELECT sum(power_w), max(ts), count(DISTINCT gpu) FROM "
                 f"read_parquet('{sys.argv[1]}')").fetchall())
"""

POLARS_WINDOWS = """
import sys, polars as pl
df = pl.scan_parquet(sys.argv[1]).select("ts", "host", "gpu", "power_w").collect()
for w in ("500ms", "30s", "5m"):
    m = df.select(pl.col("power_w").rolling_mean_by("ts", window_size=w).over("host", "gpu"))
    print(w, (m["power_w"] > 300).mean())
"""


def best(args: list[str], runs: int = 3) -> tuple[float, float]:
    """(best wall s, largest peak RSS MB) of ``runs`` runs of a command."""
    measured = [run_measured(args) for _ in range(runs)]
    for m in measured:
        if m.code != 0:
            raise SystemExit(f"{args[:3]} failed: {m.stderr.strip()[-300:]}")
    return min(m.wall_s for m in measured), max(m.peak_mb for m in measured)


def bench_import(rows: int, runs: int) -> None:
    from powerkit.trace.importer import STREAM_BYTES

    log = cached_input(f"smi_{rows}.csv", lambda path: make_smi_csv(path, rows))
    exe = str(Path(sys.executable).with_name("powerkit"))
    ours = best(
        [exe, "import", str(log), "--tz", "UTC", "--out", str(OUT / "imp_pk.parquet"), "--force"],
        runs,
    )
    script = best(
        [sys.executable, "-c", POLARS_IMPORT, str(log), str(OUT / "imp_pl.parquet")], runs
    )
    streamed = log.stat().st_size >= STREAM_BYTES
    print(
        f"import {rows / 1e6:g} M rows ({log.stat().st_size / 2**20:,.0f} MiB, "
        f"{'streamed' if streamed else 'read whole'}): powerkit {ours[0]:.2f} s, "
        f"{ours[1]:,.0f} MB; Polars script {script[0]:.2f} s, {script[1]:,.0f} MB -> "
        f"{ours[0] / script[0]:.2f}x the time (target <= 1.3x; memory target <= 400 MB at "
        "10 M rows)"
    )
    if not streamed:
        forced = best(
            [
                exe,
                "import",
                str(log),
                "--tz",
                "UTC",
                "--stream",
                "--out",
                str(OUT / "imp_pk.parquet"),
                "--force",
            ],
            runs,
        )
        print(
            f"import {rows / 1e6:g} M rows --stream: {forced[0]:.2f} s, {forced[1]:,.0f} MB "
            f"-> {forced[0] / script[0]:.2f}x the script's time"
        )


def bench_windows(runs: int) -> None:
    trace = cached_input("fleet_200x14h.parquet", lambda path: generate(path, 200, 14.0))
    exe = str(Path(sys.executable).with_name("powerkit"))
    ours = best(
        [exe, "windows", str(trace), "--budget", "300W", "--windows", "0.5s,30s,5m", "--json"], runs
    )
    scan = best([sys.executable, "-c", DUCKDB_SCAN, str(trace)], runs)
    script = best([sys.executable, "-c", POLARS_WINDOWS, str(trace)], 1)
    print(
        f"windows 20.2 M samples: powerkit {ours[0]:.2f} s, {ours[1]:,.0f} MB; bare DuckDB "
        f"scan {scan[0]:.2f} s, {scan[1]:,.0f} MB -> {ours[0] / scan[0]:.2f}x (target <= 2x); "
        f"Polars rolling script {script[0]:.2f} s, {script[1]:,.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 10_000_000])
    args = parser.parse_args()
    for rows in args.rows:
        bench_import(rows, args.runs)
    bench_windows(args.runs)


if __name__ == "__main__":
    main()
