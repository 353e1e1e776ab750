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
  ``rolling_mean_by(...).over("gpu")`` script;
* first, the peers the issues quote (``../shared/peers``, when it is there): their inputs and
  scripts, alternated, medians (:func:`bench_peers`).
"""

from __future__ import annotations

import argparse
import subprocess
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


PEERS = ROOT.parent / "shared" / "peers"


def _median_pair(a: list[str], b: list[str], runs: int) -> tuple[float, float, float, float]:
    """(median wall s, peak MB) of ``a`` and of ``b``, their runs alternated."""
    ta, tb, ma, mb = [], [], 0.0, 0.0
    for _ in range(runs):
        for args, times in ((a, ta), (b, tb)):
            m = run_measured(args)
            if m.code != 0:
                raise SystemExit(f"{args[:3]} failed: {m.stderr.strip()[-300:]}")
            times.append(m.wall_s)
            if times is ta:
                ma = max(ma, m.peak_mb)
            else:
                mb = max(mb, m.peak_mb)
    return sorted(ta)[len(ta) // 2], ma, sorted(tb)[len(tb) // 2], mb


def bench_peers(runs: int) -> None:
    """The peers the issues quote (../shared/peers: its gen.py inputs and scripts), alternated
    in this run, medians: import of the 2 M-row nvidia-smi CSV against the polars script
    (target <= 1.0x), windows on the 20.16 M-sample trace against the bare DuckDB scan
    (target <= 2x) and the polars rolling script; and the cost of inferring a CSV's columns
    (import with inference against the same file with --map: target within 5 %)."""
    if not (PEERS / "gen.py").exists():
        print(f"peers: {PEERS} is absent; skipped")
        return
    data = OUT / "peers"
    data.mkdir(parents=True, exist_ok=True)
    if not (data / "smi.csv").exists() or not (data / "big.parquet").exists():
        subprocess.run([sys.executable, str(PEERS / "gen.py"), str(data)], check=True)
    exe = str(Path(sys.executable).with_name("powerkit"))
    py = sys.executable
    smi, big = str(data / "smi.csv"), str(data / "big.parquet")
    ours, our_mb, peer, peer_mb = _median_pair(
        [exe, "import", smi, "--out", str(data / "pk.parquet"), "--force", "--json"],
        [py, str(PEERS / "polars_import.py"), smi, str(data / "pl.parquet")],
        runs,
    )
    print(
        f"peers: import 2 M-row nvidia-smi CSV: powerkit {ours:.3f} s, {our_mb:,.0f} MB; polars "
        f"script {peer:.3f} s, {peer_mb:,.0f} MB -> {ours / peer:.2f}x (target <= 1.0x)"
    )
    windows = [exe, "windows", big, "--budget", "300W", "--windows", "0.5s,30s,5m", "--json"]
    ours, our_mb, floor, _ = _median_pair(windows, [py, str(PEERS / "duckdb_floor.py"), big], runs)
    _, _, rolling, rolling_mb = _median_pair(
        windows, [py, str(PEERS / "polars_windows.py"), big, "300"], 1
    )
    print(
        f"peers: windows 20.16 M samples: powerkit {ours:.3f} s, {our_mb:,.0f} MB; bare DuckDB "
        f"scan {floor:.3f} s -> {ours / floor:.2f}x (target <= 2x); polars rolling "
        f"{rolling:.3f} s, {rolling_mb:,.0f} MB -> {ours / rolling:.2f}x"
    )
    named = data / "named.csv"
    if not named.exists():  # the same samples as a logger names them: t_s,gpu_index,power_w
        import polars as pl

        pl.read_parquet(data / "pl.parquet").select(
            (pl.col("ts").dt.epoch("us") / 1e6).alias("t_s"),
            pl.col("gpu").alias("gpu_index"),
            pl.col("power_w"),
        ).write_csv(named)
    inferred, _, mapped, _ = _median_pair(
        [exe, "import", str(named), "--out", str(data / "inf.parquet"), "--force", "--json"],
        [
            exe,
            "import",
            str(named),
            "--map",
            "ts=t_s,gpu=gpu_index,power_w=power_w",
            "--out",
            str(data / "map.parquet"),
            "--force",
            "--json",
        ],
        runs,
    )
    print(
        f"peers: import with inferred columns {inferred:.3f} s, with --map {mapped:.3f} s -> "
        f"{100 * (inferred / mapped - 1):+.1f} % (target within 5 %)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--peer-runs",
        type=int,
        default=9,
        help="alternated runs of each peer pair (their ratios move by 0.1 between medians of 3)",
    )
    parser.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 10_000_000])
    args = parser.parse_args()
    bench_peers(max(3, args.peer_runs))
    for rows in args.rows:
        bench_import(rows, args.runs)
    bench_windows(args.runs)


if __name__ == "__main__":
    main()
