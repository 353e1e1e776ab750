"""Benchmarks of the foundation: simulator speed, import throughput, recorder CPU per sample.

Run with ``make bench``. Prints figures; asserts nothing (targets are judged by people).
Scratch files go to ``bench_out/`` (ignored by git).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inputs import cached_input  # noqa: E402

from powerkit.sim import get_preset  # noqa: E402
from powerkit.telemetry.recorder import RecordConfig, record  # noqa: E402
from powerkit.telemetry.sim import SimSource  # noqa: E402
from powerkit.trace import read_trace, write_trace  # noqa: E402


def bench_sim() -> None:
    """Simulated samples per second: raw model, and the full record path to Parquet."""
    source = SimSource(get_preset("h200-70b-tp8"), seed=0)
    times = np.arange(0, 3600, 0.1)
    t0 = time.perf_counter()
    source.read_block(times)
    raw = time.perf_counter() - t0
    samples = 8 * times.size
    print(
        f"sim model          : {samples / raw / 1e6:6.2f} M samples/s "
        f"({samples:,} samples, 1 h of 8 GPUs at 0.1 s, {3600 / raw:,.0f}x real time)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sim.parquet"
        t0 = time.perf_counter()
        result = record(
            SimSource(get_preset("a100-72b-tp4")),
            RecordConfig(out=out, interval_s=0.5, duration_s=6 * 3600),
        )
        wall = time.perf_counter() - t0
    print(
        f"record --backend sim: {result.samples / wall / 1e6:6.2f} M samples/s to Parquet "
        f"({result.samples:,} samples, 6 h of 4 GPUs at 0.5 s, {6 * 3600 / wall:,.0f}x real time)"
    )


def make_smi_csv(path: Path, rows: int, gpus: int = 8) -> None:
    """Write an nvidia-smi style CSV (units in cells, no index column, GPUs interleaved)."""
    frames = rows // gpus
    rng = np.random.default_rng(0)
    base = np.datetime64("2025-07-27T00:47:09.120", "ms")
    t = base + (np.arange(frames) * 100)[:, None] + np.arange(gpus)[None, :] * 2
    stamps = pl.Series(t.ravel()).dt.strftime("%Y/%m/%d %H:%M:%S%.3f")
    power = pl.Series(np.round(rng.uniform(60, 700, frames * gpus), 2)).cast(pl.String) + " W"
    util = pl.Series(rng.integers(0, 101, frames * gpus)).cast(pl.String) + " %"
    mem = pl.Series(rng.integers(0, 80000, frames * gpus)).cast(pl.String) + " MiB"
    df = pl.DataFrame(
        {
            "timestamp": stamps,
            " power.draw [W]": " " + power,
            " utilization.gpu [%]": " " + util,
            " memory.used [MiB]": " " + mem,
        }
    )
    df.write_csv(path, quote_style="never")


def bench_import(rows: int) -> None:
    """Rows per second of reading a large nvidia-smi CSV and writing canonical Parquet."""
    csv = cached_input(f"smi_{rows}.csv", lambda path: make_smi_csv(path, rows))
    parse_times, total_times = [], []
    for _ in range(3):  # a cold first run reads the file from disk; report every run
        t0 = time.perf_counter()
        trace = read_trace(csv)
        parse_times.append(time.perf_counter() - t0)
        write_trace(trace.table(), trace.meta, csv.parent / "imported.parquet")
        total_times.append(time.perf_counter() - t0)
    n = trace.table().num_rows
    parsed = ", ".join(f"{n / t / 1e6:.2f}" for t in parse_times)
    total = ", ".join(f"{n / t / 1e6:.2f}" for t in total_times)
    print(
        f"import nvidia-smi  : {parsed} M rows/s parsed to a canonical table (3 runs); "
        f"{total} M rows/s including the Parquet write "
        f"({n:,} rows, {len(trace.meta.gpus)} GPUs inferred)"
    )


def bench_recorder(seconds: float) -> None:
    """Recorder CPU time per sample against the fake NVML (8 GPUs, 10 ms interval)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_nvml import FakeNvml

    import powerkit.telemetry.nvml as nvml_module

    for label, autospec in (("plain fake", False), ("autospec mock", True)):
        fake = FakeNvml(gpus=8, autospec=autospec)
        nvml_module.pynvml = fake.module  # type: ignore[assignment]
        with tempfile.TemporaryDirectory() as tmp:
            cpu0 = time.process_time()
            result = record(
                nvml_module.NvmlSource(),
                RecordConfig(
                    out=Path(tmp) / "r.parquet", interval_s=0.01, duration_s=seconds, flush_s=1.0
                ),
            )
            cpu = time.process_time() - cpu0
        late = result.lateness_ms
        print(
            f"recorder ({label:13s}): {cpu / result.samples * 1e6:6.1f} us CPU per sample "
            f"({result.samples:,} samples, 8 GPUs at 10 ms, {result.missed_ticks} missed "
            f"ticks, lateness p50/p99 {late.get('p50', 0):.2f}/{late.get('p99', 0):.2f} ms)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the import CSV")
    parser.add_argument("--record-seconds", type=float, default=5.0)
    args = parser.parse_args()
    bench_sim()
    bench_import(args.rows)
    bench_recorder(args.record_seconds)


if __name__ == "__main__":
    main()
