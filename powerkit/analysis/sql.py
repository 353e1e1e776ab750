"""The SQL at the heart of the analyses, in one place. Parameters are DuckDB ``$name``s.

The views they read (``trace``) are registered by :meth:`powerkit.trace.Trace.register`:
canonical Parquet is scanned from disk (out of core), other formats from the reader's Arrow
data.
"""

from __future__ import annotations

import duckdb

__all__ = [
    "HOURLY_ENERGY",
    "INFO_SERIES",
    "SCAN_ORDERED",
    "SCAN_RAW",
    "SERIES_COUNTS",
    "connect",
]


def connect() -> duckdb.DuckDBPyConnection:
    """Return an in-memory DuckDB connection that prints nothing (no progress bar on stdout)."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


# Per-series statistics for `powerkit info`: time steps, then per-series aggregates. Energy
# integrates power with the trapezoid rule except across long gaps; a counter, where every
# sample has one, wins (resets skipped). Parameters shared by INFO_SERIES and HOURLY_ENERGY:
#   $nominal  the file's nominal interval (s), or NULL to use each series' own median step
#   $maxgap   steps up to this many nominal intervals are integrated as they are
#   $fill_s   --fill: steps up to $fill_s + one nominal interval are bridged too (0: none)
#   $hold     --fill hold (the earlier sample's power over the step) rather than linear
#   $grid     grid cell (s) for coverage;  $fill_cells  the longest run of cells --fill fills
_STEPS = """
WITH s AS (
    SELECT host, gpu, epoch_us(ts) / 1e6 AS t, power_w::DOUBLE AS p, energy_j AS e
    FROM trace
), d AS (
    SELECT *,
           t - lag(t) OVER w AS dt,
           lag(p) OVER w AS p_prev,
           e - lag(e) OVER w AS de,
           floor(t / $grid) - floor(lag(t) OVER w / $grid) AS dc
    FROM s
    WINDOW w AS (PARTITION BY host, gpu ORDER BY t)
), m AS (
    SELECT host, gpu,
           coalesce(CAST($nominal AS DOUBLE), median(dt) FILTER (WHERE dt > 0)) AS nominal
    FROM d GROUP BY host, gpu
), j AS (
    SELECT d.*, m.nominal,
           CASE WHEN dt <= $maxgap * m.nominal THEN (p + p_prev) / 2 * dt
                WHEN dt <= $fill_s + m.nominal AND $hold THEN p_prev * dt
                WHEN dt <= $fill_s + m.nominal THEN (p + p_prev) / 2 * dt
           END AS step_j
    FROM d JOIN m USING (host, gpu)
)
"""
INFO_SERIES = (
    _STEPS
    + """SELECT host, gpu,
       count(*) AS samples,
       min(t) AS t0, max(t) AS t1,
       any_value(nominal) AS interval_median_s,
       quantile_cont(dt, 0.99) AS interval_p99_s,
       coalesce(max(dt), 0) AS max_gap_s,
       count(*) FILTER (WHERE dt > $gap * nominal) AS gaps,
       coalesce(sum(dt) FILTER (WHERE dt > $gap * nominal), 0) AS gap_time_s,
       coalesce(sum(dt) FILTER (WHERE dt > 0 AND step_j IS NULL), 0) AS unintegrated_s,
       min(p) AS min_power_w, avg(p) AS mean_power_w, max(p) AS max_power_w,
       coalesce(sum(step_j), 0) AS energy_trapezoid_j,
       count(e) AS counter_samples,
       sum(greatest(de, 0)) AS energy_counter_j,
       count(*) FILTER (WHERE p IS NULL OR NOT isfinite(p) OR p < 0) AS bad_power,
       max(floor(t / $grid)) - min(floor(t / $grid)) + 1 AS cells,
       count(*) FILTER (WHERE dc IS NULL OR dc > 0) AS present_cells,
       coalesce(sum(dc - 1) FILTER (WHERE dc > 1 AND dc - 1 <= $fill_cells), 0) AS filled_cells
FROM j
GROUP BY host, gpu
ORDER BY host, gpu
"""
)

# Energy per clock hour (UTC) for `powerkit carbon`: the steps INFO_SERIES integrates, each
# counted in the hour of its midpoint (a step is one sampling interval, so at most one step per
# series and hour boundary lands in the neighbouring hour). Same parameters as INFO_SERIES.
HOURLY_ENERGY = (
    _STEPS
    + """SELECT floor((t - dt / 2) / 3600) * 3600 AS hour_s,
       sum(step_j) AS energy_j
FROM j
WHERE dt > 0 AND step_j IS NOT NULL
GROUP BY hour_s
ORDER BY hour_s
"""
)

# Windows and fleets stream each series' samples in (host, gpu, ts) order and put them on the
# grid in NumPy (powerkit/analysis/grid.py). Only gpu, time and power are read: series
# boundaries come from row counts (a canonical file's index, or SERIES_COUNTS), which spares
# the scan the host strings. A canonical trace is stored in that order, so SCAN_RAW needs no
# sort; SCAN_ORDERED is the fallback for traces that are not.
SCAN_RAW = """
SELECT gpu, epoch_us(ts) AS t_us, power_w AS p
FROM trace
"""
SCAN_ORDERED = SCAN_RAW + "ORDER BY host, gpu, ts\n"

# Rows per series with their first and last time, in the order SCAN_ORDERED returns them.
SERIES_COUNTS = """
SELECT host, gpu, count(*) AS n, epoch_us(min(ts)) AS first_us, epoch_us(max(ts)) AS last_us
FROM trace
GROUP BY host, gpu
ORDER BY host, gpu
"""
