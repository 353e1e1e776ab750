"""Benchmarks of `windows` and `oversub` at fleet scale (printed figures, no assertions).

A 100-million-sample canonical Parquet trace (1,000 GPUs x 14 h at 0.5 s) is generated once
into bench_out/ from simulated GRPO series (each GPU a circularly shifted copy of one of 16
simulated GPUs, with timestamp jitter). Then, in one run: a bare DuckDB scan of the same
columns (the floor no window code can beat), `windows` with three rolling windows, its peak
memory, and `oversub` on all 1,000 GPUs as members with 200 random draws. A second copy of the
trace with logger stalls (about 1 % of each series missing, in runs of 1-20 cells) measures
`windows --fill hold:10s` against `windows` without a fill on the same data.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inputs import cached_input, canonical_schema, run_measured  # noqa: E402

from powerkit.sim import GrpoSim, get_preset  # noqa: E402
from powerkit.trace.schema import GpuMeta, TraceMeta  # noqa: E402

EPOCH_US = 1_767_225_600_000_000


def _stalls(rng: np.random.Generator, n: int) -> np.ndarray:
    """Return a keep-mask of n samples with about 1 % lost in runs of 1-20 (logger stalls)."""
    keep = np.ones(n, dtype=bool)
    runs = n // 1000
    starts = rng.integers(1, n - 21, runs)
    lengths = rng.integers(1, 21, runs)
    for a, k in zip(starts.tolist(), lengths.tolist(), strict=True):
        keep[a : a + k] = False
    return keep


def generate(path: Path, gpus: int, hours: float, stalls: bool = False) -> None:
    """Write the canonical trace (sorted by host, gpu, ts; with its series index)."""
    n = int(hours * 3600 / 0.5)
    t = np.arange(n) * 0.5
    base = []
    for preset, seed in (
        ("a100-72b-tp4", 1),
        ("a100-14b", 2),
        ("a100-7b", 3),
        ("a100-7b", 4),
        ("a100-72b-tp4", 5),
        ("a100-14b", 6),
    ):
        base.extend(GrpoSim(get_preset(preset), seed=seed).sample(t).power_w.astype(np.float32))
    base = base[:16]
    hosts = [f"node{g // 8:04d}" for g in range(gpus)]
    meta = TraceMeta(
        source="sim",
        interval_s=0.5,
        gpus=[GpuMeta(hosts[g], g % 8, "NVIDIA A100-SXM4-80GB", 400.0) for g in range(gpus)],
    )
    rng = np.random.default_rng(0)
    masks = [_stalls(rng, n) if stalls else None for _ in range(gpus)]
    index = [(hosts[g], g % 8, int(m.sum()) if m is not None else n) for g, m in enumerate(masks)]
    schema = canonical_schema(meta, index)
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema, compression="zstd", use_dictionary=["host", "gpu"]) as w:
        for g0 in range(0, gpus, 40):
            tables = []
            for g in range(g0, min(gpus, g0 + 40)):
                shift = int(rng.integers(n))
                power = np.roll(base[g % len(base)], shift)
                ts = EPOCH_US + np.arange(n, dtype=np.int64) * 500_000 + rng.integers(0, 20_000, n)
                if masks[g] is not None:
                    ts, power = ts[masks[g]], power[masks[g]]
                rows = ts.size
                host = pa.DictionaryArray.from_arrays(
                    pa.array(np.zeros(rows, dtype=np.int32)), pa.array([hosts[g]])
                ).cast(pa.string())
                tables.append(
                    pa.table(
                        [
                            pa.array(ts, pa.timestamp("us", tz="UTC")),
                            host,
                            pa.array(np.full(rows, g % 8, np.int16)),
                            pa.array(power),
                        ],
                        schema=schema,
                    )
                )
            w.write_table(pa.concat_tables(tables), row_group_size=1_000_000)
    tmp.rename(path)


def child(code: str) -> tuple[float, float, str]:
    """Run Python code in a fresh process; return (wall s, its own peak RSS MB, its stdout)."""
    m = run_measured([sys.executable, "-c", code])
    if m.code != 0:
        raise RuntimeError(m.stderr.strip())
    return m.wall_s, m.peak_mb, m.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=14.0)
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()
    path = cached_input(
        f"fleet_{args.gpus}x{args.hours:g}h.parquet", lambda p: generate(p, args.gpus, args.hours)
    )
    out = path.parent
    samples = pq.ParquetFile(path).metadata.num_rows
    con = duckdb.connect()
    floor = []
    for _ in range(3):
        t0 = time.perf_counter()
        con.execute(f"SELECT sum(power_w), max(ts) FROM read_parquet('{path}')").fetchall()
        floor.append(time.perf_counter() - t0)
    code = (
        "import time; from powerkit.trace import read_trace; "
        "from powerkit.analysis.windows import windowed_violations; "
        "from powerkit.core.units import parse_power; t0 = time.perf_counter(); "
        f"r = windowed_violations(read_trace('{path}'), parse_power('300W'), [0.5, 30, 300]); "
        "print(time.perf_counter() - t0, [round(w.violation_rate, 5) for w in r.windows])"
    )
    runs = [child(code) for _ in range(3)]
    inner = [float(r[2].split()[0]) for r in runs]
    best_floor, best = min(floor), min(inner)
    print(
        f"samples            : {samples:,} ({args.gpus} GPUs x {args.hours:g} h at 0.5 s, "
        f"{path.stat().st_size / 1e6:.0f} MB on disk)"
    )
    print(
        f"floor scan         : {', '.join(f'{x:.2f}' for x in floor)} s "
        "(SELECT sum(power_w), max(ts) FROM trace)"
    )
    print(
        f"windows 0.5s,30s,5m: {', '.join(f'{x:.2f}' for x in inner)} s -> "
        f"{best / best_floor:.1f}x the floor, {samples / best / 1e6:.0f} M samples/s; "
        f"peak memory {max(r[1] for r in runs):.0f} MB "
        f"(rates {runs[0][2].split(' ', 1)[1]})"
    )
    code = (
        "import time; from powerkit.trace import read_trace; "
        "from powerkit.analysis.fleet import compose_fleet; t0 = time.perf_counter(); "
        f"r, _ = compose_fleet([(read_trace('{path}'), 1)], [0.5, 30, 300], compose='random', "
        f"draws={args.draws}, seed=0); "
        "print(time.perf_counter() - t0, [round(w.peak_fraction, 4) for w in r.windows])"
    )
    _, peak, text = child(code)
    print(
        f"oversub            : {args.gpus} members x {args.draws} random draws in "
        f"{float(text.split()[0]):.1f} s, peak memory {peak:.0f} MB "
        f"(p95 peak fractions {text.split(' ', 1)[1]})"
    )
    gapped = out / f"fleet_{args.gpus}x{args.hours:g}h_stalls.parquet"
    if not gapped.exists():
        generate(gapped, args.gpus, args.hours, stalls=True)
    for trace, label in ((path, "no gaps"), (gapped, "stalls")):
        timings = {}
        for fill in ("none", "hold:10s"):
            code = (
                "import time; from powerkit.trace import read_trace; "
                "from powerkit.analysis.windows import windowed_violations; "
                "from powerkit.cells.fill import parse_fill; "
                "from powerkit.core.units import parse_power; t0 = time.perf_counter(); "
                f"r = windowed_violations(read_trace('{trace}'), parse_power('300W'), "
                f"[0.5, 30, 300], fill=parse_fill('{fill}')); "
                "print(time.perf_counter() - t0, round(r.coverage, 4))"
            )
            runs = [child(code) for _ in range(3)]
            timings[fill] = (
                min(float(r[2].split()[0]) for r in runs),
                max(r[1] for r in runs),
                runs[0][2].split()[1],
            )
        (t_none, m_none, c_none), (t_fill, m_fill, c_fill) = timings["none"], timings["hold:10s"]
        print(
            f"fill ({label:7s})  : none {t_none:.2f} s ({m_none:.0f} MB, coverage {c_none}), "
            f"hold:10s {t_fill:.2f} s ({m_fill:.0f} MB, coverage {c_fill}) -> "
            f"{t_fill / t_none:.2f}x"
        )


if __name__ == "__main__":
    main()
