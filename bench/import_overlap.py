"""Would loading modules while Polars parses hide the loading? (docs/benchmarks.md)

A process that parses the peers' 2 M-row nvidia-smi log with Polars (the columns ``import``
reads) and loads NumPy, Arrow's Parquet module, Typer and Rich — one after the other, or the
loading in the main thread while the parse runs in another — whole processes, alternated,
medians. On two cores both take the same time: the parse already uses both.

    python bench/import_overlap.py [--runs 11]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path.home() / ".cache" / "powerkit-peers"

CHILD = """
import sys, threading
import polars as pl
q = pl.scan_csv(sys.argv[1], has_header=False, skip_rows=1, infer_schema=False, quote_char=None)
q = q.select(
    pl.col("column_0").str.strptime(pl.Datetime("us"), "%Y/%m/%d %H:%M:%S%.f"),
    pl.col("column_1").str.strip_chars().cast(pl.Int16),
    pl.col("column_2").str.strip_chars().str.strip_suffix(" W").cast(pl.Float32),
)
def load():
    import numpy, pyarrow, pyarrow.parquet, typer, rich.console, rich.table
if sys.argv[2] == "sequential":
    load()
    q.collect()
else:
    parse = threading.Thread(target=q.collect)
    parse.start()
    load()
    parse.join()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    log = DATA / "smi.csv"
    if not log.exists():
        raise SystemExit(f"{log}: absent (make it with ../shared/peers/gen.py {DATA})")
    times: dict[str, list[float]] = {"sequential": [], "overlapped": []}
    for _ in range(args.runs):
        for mode, found in times.items():
            began = time.perf_counter()
            subprocess.run([sys.executable, "-c", CHILD, str(log), mode], check=True)
            found.append(time.perf_counter() - began)
    shown = ", ".join(f"{m} {statistics.median(t):.3f} s" for m, t in times.items())
    print(f"parse the 2 M-row log and load the modules (medians of {args.runs}): {shown}")


if __name__ == "__main__":
    main()
