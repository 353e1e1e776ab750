"""What is in a trace: series, span, sampling intervals, gaps, power and energy per GPU."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from powerkit.analysis.fill import NO_FILL, FillPolicy
from powerkit.analysis.sql import INFO_SERIES, connect
from powerkit.errors import BadInputError
from powerkit.trace.model import Trace
from powerkit.trace.semantics import SEMANTICS, resolved_semantics

__all__ = [
    "GAP_FACTOR",
    "MAX_INTEGRATION_GAP",
    "SeriesInfo",
    "TraceInfo",
    "step_params",
    "trace_info",
]

GAP_FACTOR = 1.5  # a step longer than 1.5x the series' median interval counts as a gap
MAX_INTEGRATION_GAP = 5.0  # energy is not integrated across steps longer than 5 intervals


@dataclass
class SeriesInfo:
    """One GPU series of a trace; times in s, power in W, energy in J."""

    host: str
    gpu: int
    name: str | None
    nameplate_w: float | None
    samples: int
    start: str
    end: str
    span_s: float
    interval_median_s: float | None
    interval_p99_s: float | None
    max_gap_s: float
    gaps: int
    gap_time_s: float
    min_power_w: float
    mean_power_w: float
    max_power_w: float
    energy_j: float
    energy_source: str  # "counter" or "trapezoid"
    coverage: float = 1.0  # present (or filled) grid cells / cells from first to last
    filled_cells: int = 0  # cells --fill bridged
    unintegrated_s: float = 0.0  # time in steps too long to integrate (after --fill)


@dataclass
class TraceInfo:
    """Summary of a whole trace, with one SeriesInfo per GPU."""

    path: str
    source: str
    power_semantics: str
    gpus: int
    samples: int
    start: str
    end: str
    span_s: float
    interval_median_s: float | None
    max_gap_s: float
    gaps: int
    min_power_w: float
    mean_power_w: float
    max_power_w: float
    energy_j: float
    columns: list[str]
    series: list[SeriesInfo]
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    fill: str = "none"
    grid_s: float = 0.5
    coverage: float | None = None  # present (or filled) cells / cells, over every series
    tz: str = "UTC"
    bad_rows: dict[str, Any] = field(default_factory=dict)


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat().replace("+00:00", "Z")


def step_params(trace: Trace, fill: FillPolicy, grid_s: float) -> dict[str, Any]:
    """Return the parameters of the integration steps (sql._STEPS) for ``trace``.

    Gaps are judged against the trace's nominal interval when it records one (a short series'
    own median step would make its gaps look normal), else against each series' median.
    """
    if not grid_s > 0:
        raise BadInputError("--grid must be positive")
    return {
        "nominal": trace.meta.interval_s,
        "maxgap": MAX_INTEGRATION_GAP,
        "fill_s": fill.max_gap_s if fill.kind != "none" else 0.0,
        "hold": fill.kind == "hold",
        "grid": grid_s,
    }


def bad_rows_summary(trace: Trace, shown: int = 50) -> dict[str, Any]:
    """Return the reader's dropped rows as {count, lines, problems} (first ``shown`` lines)."""
    rows = trace.bad_rows
    return {
        "count": len(rows),
        "lines": [n for n, _ in rows[:shown]],
        "problems": [f"line {n}: {p}" for n, p in rows[:shown]],
    }


def trace_info(trace: Trace, fill: FillPolicy = NO_FILL, grid_s: float = 0.5) -> TraceInfo:
    """Return the summary of ``trace`` (computed in DuckDB; Parquet stays on disk).

    ``fill`` bridges gaps in the energy integration (steps up to its duration plus one nominal
    interval; ``hold`` integrates the earlier sample's power over them) and in the coverage,
    which is counted on a ``grid_s`` grid as the analyses see it.
    """
    con = connect()
    trace.register(con)
    columns = [r[0] for r in con.execute("DESCRIBE trace").fetchall()]
    params = step_params(trace, fill, grid_s)
    rows = con.execute(
        INFO_SERIES, {"gap": GAP_FACTOR, "fill_cells": fill.max_cells(grid_s), **params}
    )
    records = rows.fetchall()
    names = [d[0] for d in rows.description]
    total = con.execute("SELECT count(*), median(power_w), avg(power_w) FROM trace").fetchone()
    con.close()
    if not records or total is None or total[0] == 0:
        raise BadInputError(f"{trace.origin}: no samples (empty trace)")
    series: list[SeriesInfo] = []
    for values in records:
        r = dict(zip(names, values, strict=True))
        if r["bad_power"]:
            raise BadInputError(
                f"{trace.origin}: {r['bad_power']} sample(s) with missing, NaN, infinite or "
                f"negative power in host={r['host']} gpu={r['gpu']}"
            )
        use_counter = r["counter_samples"] == r["samples"] and r["samples"] > 1
        gpu_meta = next(
            (g for g in trace.meta.gpus if g.host == r["host"] and g.gpu == r["gpu"]), None
        )
        series.append(
            SeriesInfo(
                host=r["host"],
                gpu=int(r["gpu"]),
                name=gpu_meta.name if gpu_meta else None,
                nameplate_w=gpu_meta.nameplate_w if gpu_meta else None,
                samples=int(r["samples"]),
                start=_iso(r["t0"]),
                end=_iso(r["t1"]),
                span_s=float(r["t1"] - r["t0"]),
                interval_median_s=r["interval_median_s"],
                interval_p99_s=r["interval_p99_s"],
                max_gap_s=float(r["max_gap_s"]),
                gaps=int(r["gaps"]),
                gap_time_s=float(r["gap_time_s"]),
                min_power_w=float(r["min_power_w"]),
                mean_power_w=float(r["mean_power_w"]),
                max_power_w=float(r["max_power_w"]),
                energy_j=float(r["energy_counter_j"] if use_counter else r["energy_trapezoid_j"]),
                energy_source="counter" if use_counter else "trapezoid",
                coverage=float((r["present_cells"] + r["filled_cells"]) / r["cells"]),
                filled_cells=int(r["filled_cells"]),
                unintegrated_s=0.0 if use_counter else float(r["unintegrated_s"]),
            )
        )
    t0 = min(s.start for s in series)
    t1 = max(s.end for s in series)
    span = max(datetime.fromisoformat(s.end) for s in series) - min(
        datetime.fromisoformat(s.start) for s in series
    )
    intervals = sorted(s.interval_median_s for s in series if s.interval_median_s)
    cells = sum(int(r[names.index("cells")]) for r in records)
    present = sum(int(r[names.index("present_cells")]) + int(r[names.index("filled_cells")])
                  for r in records)  # fmt: skip
    semantics = resolved_semantics(trace.meta)
    return TraceInfo(
        path=trace.origin,
        source=trace.meta.source,
        power_semantics=semantics,
        gpus=len(series),
        samples=int(total[0]),
        start=t0,
        end=t1,
        span_s=span.total_seconds(),
        interval_median_s=intervals[len(intervals) // 2] if intervals else None,
        max_gap_s=max(s.max_gap_s for s in series),
        gaps=sum(s.gaps for s in series),
        min_power_w=min(s.min_power_w for s in series),
        mean_power_w=float(total[2]),
        max_power_w=max(s.max_power_w for s in series),
        energy_j=sum(s.energy_j for s in series),
        columns=columns,
        series=series,
        metadata={
            "source": trace.meta.source,
            "power_semantics": semantics,
            "power_semantics_means": SEMANTICS.get(semantics, semantics),
            "interval_s": trace.meta.interval_s,
            "tz": trace.meta.tz,
            "gpu_names": trace.meta.gpu_names(),
            "nameplate_w": trace.meta.nameplate_w(),
            "powerkit_version": trace.meta.powerkit_version,
            **trace.meta.extra,
        },
        warnings=list(trace.warnings),
        fill=str(fill),
        grid_s=grid_s,
        coverage=present / cells if cells else None,
        tz=trace.meta.tz,
        bad_rows=bad_rows_summary(trace),
    )
