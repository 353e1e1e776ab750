"""Write a canonical trace as a user's own logger writes it (for the sample data): a CSV in no
layout a tool fixes, ``timestamp,device,power_watts,power_cap_watts``, the device as ``cardN``
(as rocm-smi names GPUs) and ISO times in UTC: the file ``powerkit`` reads by its columns'
names (docs/import.md, "How powerkit reads a file")."""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trace", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--cap", type=float, default=400.0, help="the power cap column, W")
    args = parser.parse_args()
    df = pl.read_parquet(args.trace)
    start = df["ts"].min()
    df = df.filter(pl.col("ts") < start + pl.duration(seconds=args.minutes * 60)).sort("ts", "gpu")
    out = df.select(
        pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").alias("timestamp"),
        ("card" + pl.col("gpu").cast(pl.String)).alias("device"),
        pl.col("power_w").round(2).alias("power_watts"),
        pl.lit(args.cap).alias("power_cap_watts"),
    )
    out.write_csv(args.out)


if __name__ == "__main__":
    main()
