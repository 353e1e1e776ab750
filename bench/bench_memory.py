"""Peak memory (and time) of the commands that read a whole trace, on a trace with long series.

A canonical Parquet trace of 8 GPUs x 12.6 M samples (100.8 M samples: 8 GPUs at 0.5 s for
about 73 days) is generated once into bench_out/ (chunk by chunk, from one simulated hour per
GPU tiled with jitter), then `info`, `carbon`, `report --trace`, `import` (Parquet to Parquet)
and `windows` run on it, each in a fresh process, and print their wall time and peak resident
memory (ru_maxrss of that process). `windows` is the baseline: it streamed one series at a time
before this benchmark existed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inputs import cached_input, canonical_schema, run_measured  # noqa: E402

from powerkit.sim import GrpoSim, get_preset  # noqa: E402
from powerkit.trace.schema import GpuMeta, TraceMeta  # noqa: E402

EPOCH_US = 1_767_225_600_000_000
_CHUNK = 1_000_000


def generate(path: Path, gpus: int, per_gpu: int) -> None:
    """Write the trace sorted by (host, gpu, ts) with its series index, in bounded memory."""
    hour = np.arange(7200) * 0.5
    base = GrpoSim(get_preset("a100-72b-tp4"), seed=1).sample(hour).power_w[0].astype(np.float32)
    meta = TraceMeta(
        source="sim",
        interval_s=0.5,
        gpus=[GpuMeta("node0", g, "NVIDIA A100-SXM4-80GB", 400.0) for g in range(gpus)],
    )
    index = [("node0", g, per_gpu) for g in range(gpus)]
    schema = canonical_schema(meta, index)
    rng = np.random.default_rng(0)
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema, compression="zstd", use_dictionary=["host", "gpu"]) as w:
        for g in range(gpus):
            shift = int(rng.integers(base.size))
            for a in range(0, per_gpu, _CHUNK):
                k = np.arange(a, min(per_gpu, a + _CHUNK), dtype=np.int64)
                power = base[(k + shift) % base.size] * rng.uniform(0.97, 1.03, k.size).astype(
                    np.float32
                )
                ts = EPOCH_US + k * 500_000 + rng.integers(0, 20_000, k.size)
                host = pa.DictionaryArray.from_arrays(
                    pa.array(np.zeros(k.size, dtype=np.int32)), pa.array(["node0"])
                ).cast(pa.string())
                w.write_table(
                    pa.table(
                        [
                            pa.array(ts, pa.timestamp("us", tz="UTC")),
                            host,
                            pa.array(np.full(k.size, g, np.int16)),
                            pa.array(power),
                        ],
                        schema=schema,
                    )
                )
    tmp.rename(path)


def measure(argv: list[str]) -> tuple[float, float, int]:
    """Run ``powerkit argv`` in a fresh process; return (wall s, its peak RSS MB, exit code)."""
    m = run_measured([sys.executable, "-m", "powerkit", *argv])
    if m.code != 0:
        print(m.stderr.strip().splitlines()[-2:], file=sys.stderr)
    return m.wall_s, m.peak_mb, m.code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--per-gpu", type=int, default=12_600_000)
    args = parser.parse_args()
    path = cached_input(
        f"long_{args.gpus}x{args.per_gpu}.parquet", lambda p: generate(p, args.gpus, args.per_gpu)
    )
    out = path.parent
    samples = pq.ParquetFile(path).metadata.num_rows
    print(f"samples            : {samples:,} ({args.gpus} GPUs x {args.per_gpu:,} at 0.5 s)")
    scratch = out / "memory_scratch"
    scratch.mkdir(exist_ok=True)
    commands = {
        "windows (baseline)": ["windows", str(path), "--budget", "300W", "--json"],
        "info": ["info", str(path), "--json"],
        "carbon": ["carbon", "--trace", str(path), "--intensity", "300g/kWh", "--json"],
        "report --trace": [
            "report",
            "--trace",
            str(path),
            "--out",
            str(scratch / "r.html"),
            "--force",
        ],
        "record (72 h, 8 GPUs at 0.1 s)": [
            "record",
            "--backend",
            "sim",
            "--preset",
            "h200-70b-tp8",
            "--duration",
            "72h",
            "--interval",
            "0.1s",
            "--out",
            str(scratch / "rec.parquet"),
            "--force",
            "--quiet",
        ],
        "import": [
            "import",
            str(path),
            "--out",
            str(scratch / "copy.parquet"),
            "--force",
            "--json",
        ],
    }
    for name, argv in commands.items():
        wall, peak, code = measure(argv)
        status = "" if code == 0 else f" (exit {code})"
        print(f"{name:31s}: {wall:6.1f} s, peak memory {peak:6.0f} MB{status}")


if __name__ == "__main__":
    main()
