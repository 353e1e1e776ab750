"""The SQL at the heart of the analyses, in one place. Parameters are DuckDB ``$name``s.

The views they read (``trace``) are registered by :meth:`powerkit.trace.Trace.register`:
canonical Parquet is scanned from disk (out of core), other formats from the reader's Arrow
data.
"""

from __future__ import annotations

from powerkit.core.db import connect

__all__ = [
    "SCAN_ORDERED",
    "SCAN_ORDERED_ENERGY",
    "SCAN_RAW",
    "SCAN_RAW_ENERGY",
    "SERIES_COUNTS",
    "connect",
    "scan_with",
]


# Windows and fleets stream each series' samples in (host, gpu, ts) order and put them on the
# grid in NumPy (powerkit/cells/grid.py). Only gpu, time and power are read: series
# boundaries come from row counts (a canonical file's index, or SERIES_COUNTS), which spares
# the scan the host strings. A canonical trace is stored in that order, so SCAN_RAW needs no
# sort; SCAN_ORDERED is the fallback for traces that are not.
SCAN_RAW = """
SELECT gpu, epoch_us(ts) AS t_us, power_w AS p
FROM trace
"""
SCAN_ORDERED = SCAN_RAW + "ORDER BY host, gpu, ts\n"
# The same with the energy counter (info, carbon).
SCAN_RAW_ENERGY = """
SELECT gpu, epoch_us(ts) AS t_us, power_w AS p, energy_j::DOUBLE AS e
FROM trace
"""
SCAN_ORDERED_ENERGY = SCAN_RAW_ENERGY + "ORDER BY host, gpu, ts\n"


def scan_with(columns: tuple[str, ...], *, ordered: bool) -> str:
    """SCAN_RAW_ENERGY (or its ordered form) with more columns after the energy counter
    (energy: gpu_util; info --by: a label column), each under its own name."""
    extra = "".join(f', "{c}"' for c in columns)
    sql = SCAN_RAW_ENERGY.replace("AS e\n", f"AS e{extra}\n")
    return sql + "ORDER BY host, gpu, ts\n" if ordered else sql


# Rows per series with their first and last time, in the order SCAN_ORDERED returns them.
SERIES_COUNTS = """
SELECT host, gpu, count(*) AS n, epoch_us(min(ts)) AS first_us, epoch_us(max(ts)) AS last_us
FROM trace
GROUP BY host, gpu
ORDER BY host, gpu
"""
