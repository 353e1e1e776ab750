"""Write a canonical trace as an nvidia-smi ``--query-gpu`` CSV (for the sample data).

The output mimics ``nvidia-smi --query-gpu=timestamp,power.draw,utilization.gpu,
memory.used --format=csv -lms 500``: no index column (GPUs interleaved in a fixed order each
frame, a few ms apart), units in the cells, host-local times, and a truncated last line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trace", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--tz", default="UTC", help="zone the log's wall-clock times are in")
    args = parser.parse_args()
    df = pl.read_parquet(args.trace)
    start = df["ts"].min()
    df = df.filter(pl.col("ts") < start + pl.duration(seconds=args.minutes * 60))
    df = df.sort("ts", "gpu").with_columns(
        (pl.col("ts") + pl.duration(milliseconds=2 * pl.col("gpu")))
        .dt.convert_time_zone(args.tz)
        .dt.strftime("%Y/%m/%d %H:%M:%S%.3f")
        .alias("timestamp"),
        (pl.col("power_w").round(2).cast(pl.String) + " W").alias("power"),
        (pl.col("gpu_util").round(0).cast(pl.Int32).cast(pl.String) + " %").alias("util"),
        (pl.lit(61000) + pl.col("gpu") * 10).cast(pl.String).alias("mem") + " MiB",
    )
    lines = ["timestamp, power.draw [W], utilization.gpu [%], memory.used [MiB]"]
    lines += [", ".join(row) for row in df.select("timestamp", "power", "util", "mem").rows()]
    args.out.write_text("\n".join(lines) + "\n" + lines[-1][:4])  # the logger was killed


if __name__ == "__main__":
    main()
