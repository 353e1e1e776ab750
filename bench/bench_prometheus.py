"""Reading a fleet's history from a real Prometheus server: a 1-day, 64-GPU history at 1 s
(5.5 M samples of DCGM power) backfilled with promtool, then read back by powerkit.

Figures, each in its own process so that its peak memory (RSS) is its own:

* ``powerkit import prometheus ... --out x.parquet``: the streamed import (target: peak RSS
  at most 400 MB, whatever the range's length);
* the in-memory read (``read_prometheus``, what the import did before it streamed, and what an
  analysis of ``prometheus+http://`` still does over its hours);
* baseline: the same range fetched as raw JSON from the same server (HTTP and json.loads only,
  one request per chunk of 10,000 points per series), so the figure next to it is powerkit's
  own cost (labels, columns, sorting, checks, writing) on top of the transfer.
"""

from __future__ import annotations

import itertools
import json
import shutil
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.inputs import OUT, cached_input, run_measured  # noqa: E402
from powerkit.trace.readers.prometheus import MAX_POINTS  # noqa: E402
from tests.promserver import backfill, prometheus  # noqa: E402

GPUS, SECONDS = 64, 86_400
START = 1_793_491_200  # 2026-11-01T00:00:00Z


def make_history(path: Path) -> None:
    """OpenMetrics of DCGM power: 8 hosts x 8 GPUs, 1 s for a day (training-like swings)."""
    rng = np.random.default_rng(0)
    t = START + np.arange(SECONDS)
    with path.open("w") as out:
        out.write("# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n")
        for g in range(GPUS):
            host, gpu = f"node-{g // 8}", g % 8
            phase = (np.arange(SECONDS) + 7 * g) % 60
            power = np.where(phase < 45, 620.0, 180.0) + rng.normal(0, 15, SECONDS)
            labels = f'{{Hostname="{host}",gpu="{gpu}",modelName="NVIDIA H100 80GB HBM3"}}'
            out.writelines(
                f"DCGM_FI_DEV_POWER_USAGE{labels} {p:.2f} {s}\n"
                for s, p in zip(t.tolist(), power.tolist(), strict=True)
            )
        out.write("# EOF\n")


def raw_fetch(url: str, start: float, end: float) -> int:
    """The baseline: the same chunked range-vector queries, JSON only."""
    samples = 0
    edges = np.append(np.arange(start - 0.001, end, MAX_POINTS * 1.0), end)
    for a, b in itertools.pairwise(edges):
        expr = f"DCGM_FI_DEV_POWER_USAGE[{round((b - a) * 1000)}ms]"
        query = urllib.parse.urlencode({"query": expr, "time": b})
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=600) as r:
            data = json.loads(r.read())["data"]["result"]
        samples += sum(len(s["values"]) for s in data)
    return samples


def _run(args: list[str]) -> tuple[float, float, int]:
    """(wall s, its own peak RSS MB, exit code) of a command."""
    m = run_measured(args)
    if m.code != 0:
        print("  failed:", *m.stderr.strip().splitlines()[-1:])
    return m.wall_s, m.peak_mb, m.code


_IN_MEMORY = """
import sys
from powerkit.trace.readers.prometheus import PromQuery, read_prometheus
trace = read_prometheus(sys.argv[1], PromQuery(float(sys.argv[2]), float(sys.argv[3])))
print(trace.table().num_rows)
"""


def main() -> None:
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        print("prometheus: skipped (Debian package prometheus is not installed)")
        return
    history = cached_input("prometheus_64gpu_1day.om", make_history)
    blocks = OUT / "prometheus_64gpu_1day.tsdb"
    if not blocks.exists():
        t0 = time.perf_counter()
        backfill(history, blocks)
        print(f"(backfilled with promtool in {time.perf_counter() - t0:.1f} s)")
    work = OUT / "prometheus_run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    storage = work / "data"
    shutil.copytree(blocks, storage)
    exe = str(Path(sys.executable).with_name("powerkit"))
    out = work / "fleet.parquet"
    with prometheus(work, storage=storage) as url:
        end = START + SECONDS - 1
        t0 = time.perf_counter()
        fetched = raw_fetch(url, START, end)
        baseline = time.perf_counter() - t0
        took, rss, code = _run(
            [
                exe,
                "import",
                "prometheus",
                "--url",
                url,
                "--from",
                str(START),
                "--to",
                str(end + 1),
                "--out",
                str(out),
            ]
        )
        mem_took, mem_rss, _ = _run([sys.executable, "-c", _IN_MEMORY, url, str(START), str(end)])
    rows = pq.ParquetFile(out).metadata.num_rows if code == 0 else 0
    print(f"prometheus read: {GPUS} GPUs x 1 day at 1 s = {rows:,} samples")
    print(
        f"  powerkit import prometheus (streamed): {took:.1f} s, {rows / took:,.0f} rows/s, "
        f"peak RSS {rss:,.0f} MB (target <= 400 MB)"
    )
    print(f"  in-memory read (read_prometheus): {mem_took:.1f} s, peak RSS {mem_rss:,.0f} MB")
    print(
        f"  baseline raw JSON fetch ({fetched:,} samples): {baseline:.1f} s, "
        f"{fetched / baseline:,.0f} rows/s"
    )


if __name__ == "__main__":
    main()
