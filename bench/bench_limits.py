"""Benchmark of the time at the power limit and throttled in `windows` (printed figures, no
assertions).

Three 10-million-sample traces (100 GPUs x 14 h at 0.5 s), the same power: one without extra
columns, one with a `power_limit_w` column, one with it and `clock_event_reasons`, are written
to a temporary folder; `windows` with three rolling windows runs three times on each in this
process. The trace without either is the baseline: what the time at the limit (and throttled)
adds to the same scan.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from powerkit.analysis.windows import windowed_violations  # noqa: E402
from powerkit.core.units import PowerSpec  # noqa: E402
from powerkit.trace import read_trace  # noqa: E402
from powerkit.trace.schema import INDEX_KEY, METADATA_KEY, GpuMeta, TraceMeta  # noqa: E402

EPOCH_US = 1_767_225_600_000_000
GPUS, SAMPLES = 100, 14 * 7200


def write(path: Path, limit: bool, reasons: bool = False) -> None:
    """The trace: uniform power in 200-700 W per sample, a 650 W limit where ``limit``, the
    power-cap reason (0x4) on the samples at 630 W and over where ``reasons``."""
    hosts = [f"h{g // 8}" for g in range(GPUS)]
    gpus = [GpuMeta(hosts[g], g % 8, nameplate_w=700.0) for g in range(GPUS)]
    meta = TraceMeta(source="bench", power_semantics="sim_instant", interval_s=0.5, gpus=gpus)
    index = [(hosts[g], g % 8, SAMPLES) for g in range(GPUS)]
    fields = [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("host", pa.string()),
        ("gpu", pa.int16()),
        ("power_w", pa.float32()),
    ]
    if limit:
        fields.append(("power_limit_w", pa.float32()))
    if reasons:
        fields.append(("clock_event_reasons", pa.int64()))
    schema = pa.schema(fields).with_metadata(
        {METADATA_KEY: meta.to_json().encode(), INDEX_KEY: json.dumps(index).encode()}
    )
    rng = np.random.default_rng(0)
    ts = EPOCH_US + np.arange(SAMPLES, dtype=np.int64) * 500_000
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for g in range(GPUS):
            columns = [
                pa.array(ts, pa.timestamp("us", tz="UTC")),
                pa.array([hosts[g]] * SAMPLES),
                pa.array(np.full(SAMPLES, g % 8, np.int16)),
                pa.array(rng.uniform(200, 700, SAMPLES).astype(np.float32)),
            ]
            if limit:
                columns.append(pa.array(np.full(SAMPLES, 650.0, np.float32)))
            if reasons:
                watts = columns[3].to_numpy()
                columns.append(pa.array(np.where(watts >= 630, 4, 0).astype(np.int64)))
            writer.write_table(pa.table(columns, schema=schema))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for limit, reasons in ((False, False), (True, False), (True, True)):
            path = Path(tmp) / f"trace{int(limit)}{int(reasons)}.parquet"
            write(path, limit, reasons)
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                report = windowed_violations(
                    read_trace(path), PowerSpec(watts=600.0), [0.5, 30.0, 300.0]
                )
                runs.append(time.perf_counter() - t0)
            what = (
                "limit and reasons"
                if reasons
                else "with a limit column"
                if limit
                else "without (baseline)"
            )
            share = report.at_limit_share
            capped = (report.throttled_share or {}).get("power_cap")
            print(
                f"windows 0.5s,30s,5m {what:20s}: {', '.join(f'{x:.2f}' for x in runs)} s "
                f"({GPUS * SAMPLES / min(runs) / 1e6:.0f} M samples/s; at the limit "
                f"{'-' if share is None else f'{share:.4f}'}; capped "
                f"{'-' if capped is None else f'{capped:.4f}'})"
            )


if __name__ == "__main__":
    main()
