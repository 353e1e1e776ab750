"""Per-job energy at fleet scale (printed figures, no assertions).

* ``powerkit jobs`` on a fleet trace with an allocations file that keeps ~70 % of the fleet's
  GPU-time busy with jobs of 1, 2, 4 or 8 GPUs lasting 10 minutes to a day, next to what a
  user would write instead: a DuckDB range join of the samples with the allocations
  (``ts BETWEEN start AND end``) summing power x the sampling interval — whole processes,
  each with its own peak memory;
* reading 100,000 jobs of ``sacct -P`` output (with their ``.batch`` and ``.extern`` steps:
  300,000 lines) on a small trace.

Sizes (the issue's): 1,000 GPUs x 30 days at 10 s (259 M samples) and 64 GPUs x 1 day at
100 ms (55 M); ``--gpus/--days/--interval`` run others.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from inputs import OUT, cached_input, canonical_schema, run_measured  # noqa: E402

from powerkit.trace.schema import GpuMeta, TraceMeta  # noqa: E402

EPOCH_S = 1_767_225_600  # 2026-01-01T00:00:00Z

DUCKDB_JOIN = """
import sys, duckdb
trace, alloc, dt = sys.argv[1], sys.argv[2], float(sys.argv[3])
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute(f"CREATE TABLE a AS SELECT job, host, gpu, start::DOUBLE AS s, \\"end\\"::DOUBLE AS e "
            f"FROM read_csv('{alloc}', header=true)")
rows = con.execute(f'''
    SELECT a.job, sum(t.power_w) * {dt} AS joules
    FROM read_parquet('{trace}') t JOIN a
      ON t.host = a.host AND t.gpu = a.gpu
     AND epoch_us(t.ts) / 1e6 >= a.s AND epoch_us(t.ts) / 1e6 < a.e
    GROUP BY a.job''').fetchall()
print(len(rows), sum(j for _, j in rows))
"""


def make_trace(path: Path, gpus: int, days: float, interval_s: float) -> None:
    """A canonical trace: 8 GPUs a host, each GPU a busy/idle square wave with noise."""
    n = int(days * 86_400 / interval_s)
    hosts = [f"n{g // 8:04d}" for g in range(gpus)]
    meta = TraceMeta(
        source="sim",
        interval_s=interval_s,
        gpus=[GpuMeta(hosts[g], g % 8, "NVIDIA H100 80GB HBM3", 700.0) for g in range(gpus)],
    )
    index = [(hosts[g], g % 8, n) for g in range(gpus)]
    schema = canonical_schema(meta, index)
    rng = np.random.default_rng(0)
    ts = (EPOCH_S * 1_000_000 + np.arange(n, dtype=np.int64) * int(interval_s * 1e6)).astype(
        "datetime64[us]"
    )
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for g in range(gpus):
            period = rng.integers(600, 7200)
            busy = (np.arange(n) * interval_s // period) % 3 != 0
            power = np.where(busy, 550.0, 90.0) + rng.normal(0, 15, n)
            writer.write_table(
                pa.table(
                    [
                        pa.array(ts, pa.timestamp("us", tz="UTC")),
                        pa.array([hosts[g]] * n, pa.string()),
                        pa.array(np.full(n, g % 8, np.int16)),
                        pa.array(np.clip(power, 0, None).astype(np.float32)),
                    ],
                    schema=schema,
                ),
                row_group_size=1_000_000,
            )


def make_allocations(path: Path, gpus: int, days: float) -> int:
    """Jobs packed onto each host's GPUs (1, 2, 4 or 8 of them, 10 min to 24 h, ~70 % busy),
    as an allocations CSV with one row per job, host and GPU set; return the jobs."""
    rng = np.random.default_rng(1)
    end_s = EPOCH_S + days * 86_400
    lines = ["job,host,gpus,start,end,user,account"]
    job = 0
    for h in range(gpus // 8):
        free = np.full(8, float(EPOCH_S))
        while True:
            width = int(rng.choice([1, 2, 4, 8], p=[0.4, 0.3, 0.2, 0.1]))
            first = int(rng.integers(0, 8 // width)) * width
            start = float(free[first : first + width].max()) + float(rng.exponential(1800))
            length = float(rng.uniform(600, 86_400))
            if start + length > end_s:
                break
            free[first : first + width] = start + length
            lines.append(
                f"j{job},n{h:04d},{first}-{first + width - 1},{start:.3f},{start + length:.3f},"
                f"u{job % 97},a{job % 13}"
            )
            job += 1
    path.write_text("\n".join(lines) + "\n")
    return job


def per_gpu_rows(src: Path, dst: Path) -> None:
    """The allocations one row per GPU (what the DuckDB join matches on)."""
    out = ["job,host,gpu,start,end"]
    for line in src.read_text().splitlines()[1:]:
        job, host, gpus, start, end, *_ = line.split(",")
        lo, hi = (int(x) for x in gpus.split("-"))
        out += [f"{job},{host},{g},{start},{end}" for g in range(lo, hi + 1)]
    dst.write_text("\n".join(out) + "\n")


def make_sacct(path: Path, jobs: int) -> None:
    rng = np.random.default_rng(2)
    lines = ["JobID|User|Account|Partition|NodeList|AllocTRES|Start|End|State"]
    for j in range(jobs):
        start = EPOCH_S + int(rng.integers(0, 86_400))
        a = np.datetime64(start, "s").astype(str)
        b = np.datetime64(start + int(rng.integers(60, 3600)), "s").astype(str)
        node = f"n[{j % 8:04d}-{j % 8 + 1:04d}]"
        tres = "billing=16,cpu=16,gres/gpu=4,mem=128G,node=2"
        lines.append(f"{10_000 + j}|u{j % 97}|a{j % 13}|gpu|{node}|{tres}|{a}|{b}|COMPLETED")
        for step in ("batch", "extern"):
            lines.append(f"{10_000 + j}.{step}||a{j % 13}||{node}|{tres}|{a}|{b}|COMPLETED")
    path.write_text("\n".join(lines) + "\n")


def bench_fleet(gpus: int, days: float, interval_s: float) -> None:
    name = f"jobs_{gpus}x{days:g}d_{interval_s:g}s"
    trace = cached_input(f"{name}.parquet", lambda p: make_trace(p, gpus, days, interval_s))
    alloc = OUT / f"{name}_alloc.csv"
    jobs = make_allocations(alloc, gpus, days)
    per_gpu = OUT / f"{name}_alloc_per_gpu.csv"
    per_gpu_rows(alloc, per_gpu)
    samples = int(days * 86_400 / interval_s) * gpus
    exe = str(Path(sys.executable).with_name("powerkit"))
    ours = run_measured([exe, "jobs", str(trace), "--allocations", str(alloc), "--json"])
    if ours.code != 0:
        print(f"powerkit jobs failed: {ours.stderr[-500:]}")
        return
    doc = json.loads(ours.stdout)
    peer = run_measured(
        [sys.executable, "-c", DUCKDB_JOIN, str(trace), str(per_gpu), str(interval_s)]
    )
    joined = float(peer.stdout.split()[-1]) if peer.code == 0 else float("nan")
    print(
        f"jobs {gpus} GPUs x {days:g} days at {interval_s:g} s ({samples / 1e6:,.1f} M samples, "
        f"{jobs:,} jobs): powerkit {ours.wall_s:.1f} s, {ours.peak_mb:,.0f} MB; DuckDB range join "
        f"{peer.wall_s:.1f} s, {peer.peak_mb:,.0f} MB -> {ours.wall_s / peer.wall_s:.2f}x the "
        f"time; attributed {doc['attributed_j'] / 3.6e9:,.2f} MWh (join, rectangles: "
        f"{joined / 3.6e9:,.2f} MWh), attributed + unattributed - total = "
        f"{doc['attributed_j'] + doc['unattributed_j'] - doc['total_j']:.3g} J"
    )


def bench_sacct(jobs: int) -> None:
    trace = cached_input("jobs_16x1d_10s.parquet", lambda p: make_trace(p, 16, 1, 10.0))
    sacct = OUT / f"sacct_{jobs}.txt"
    make_sacct(sacct, jobs)
    exe = str(Path(sys.executable).with_name("powerkit"))
    ours = run_measured([exe, "jobs", str(trace), "--sacct", str(sacct), "--tz", "UTC", "--json"])
    kept = len(json.loads(ours.stdout)["jobs"]) if ours.code == 0 else ours.stderr[-300:]
    print(
        f"sacct {jobs:,} jobs ({3 * jobs:,} lines, {sacct.stat().st_size / 1e6:.0f} MB) on a "
        f"16-GPU day: {ours.wall_s:.1f} s, {ours.peak_mb:,.0f} MB ({kept} jobs reported)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--fleets", nargs="*", default=["1000x30x10", "64x1x0.1"], help="GPUSxDAYSxINTERVAL_S, each"
    )
    parser.add_argument("--sacct-jobs", type=int, default=100_000)
    args = parser.parse_args()
    for spec in args.fleets:
        gpus, days, interval = spec.split("x")
        bench_fleet(int(gpus), float(days), float(interval))
    bench_sacct(args.sacct_jobs)


if __name__ == "__main__":
    main()
