"""``powerkit info``: what is in a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.analysis.info import (
    TraceInfo,
    label_columns,
    series_columns,
    unintegrated_note,
)
from powerkit.analysis.jobs import InfoOptions, run_info
from powerkit.analysis.sensor_check import SENSOR_COLUMNS
from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.core.units import format_duration, format_energy, format_span, format_value
from powerkit.trace.options import ImportOptions

__all__ = ["info"]


def render(info: TraceInfo) -> None:
    """Print the summary and the per-GPU table."""
    out = cli.out_console()
    names = ", ".join(sorted({s.name for s in info.series if s.name})) or "unknown"
    out.print(f"{info.path}  source={info.source}  power={info.power_semantics}  zone={info.tz}")
    out.print(f"GPU model: {names}")
    out.print(
        f"{info.gpus} GPU(s), {info.samples:,} samples, {info.start} -> {info.end} "
        f"({format_span(info.span_s)}); interval median "
        f"{format_value(info.interval_median_s, '.3f')} s, max gap {info.max_gap_s:.2f} s, "
        f"{info.gaps} gap(s)"
    )
    out.print(
        f"power min/mean/max {info.min_power_w:.1f} / {info.mean_power_w:.1f} / "
        f"{info.max_power_w:.1f} W; energy {format_energy(info.energy_j)}"
        f"{_interval(info.energy_j, info.energy_low_j, info.energy_high_j, info.energy_method)}"
        "; coverage "
        f"{format_value(info.coverage, '.1%')} of {format_duration(info.grid_s)} cells "
        f"(fill {info.fill})"
    )
    if info.bad_rows.get("count"):
        lines = ", ".join(str(n) for n in info.bad_rows["lines"][:10])
        out.print(f"{info.bad_rows['count']} bad row(s) skipped, at line(s) {lines}")
    cli.print_table(series_columns(info.series), info.series, out)
    if any(s.energy_source == "trapezoid" for s in info.series):
        out.print("* energy integrated from power (no energy counter in the trace)")
    note = unintegrated_note(info)
    if note is not None:
        out.print(f"not integrated: {note}")
    if info.by is not None:
        cli.print_table(label_columns(info.by.label), info.by.groups, out)
    if info.sensor_check is not None:
        cli.print_table(SENSOR_COLUMNS, info.sensor_check.series, out)
        for finding in info.sensor_check.findings or ["none: the readings agree with the claim"]:
            out.print(f"finding: {finding}")


def _interval(energy: float, low: float | None, high: float | None, method: str) -> str:
    """How far the true energy can be from ``energy``, in per cent, and how it was found."""
    if low is None or high is None or energy <= 0:
        return f" (no interval: {method})" if method else ""
    return f" [{100 * (low / energy - 1):+.2f} %, {100 * (high / energy - 1):+.2f} %] ({method})"


@cli.handle_errors
@reading.reader_options(*reading.SOURCE)
def info(
    trace: Annotated[
        Path, typer.Argument(help="Trace: Parquet (file or folder), CSV, dmon, DCGM.")
    ],
    fill: opt.Fill = "none",
    grid: opt.Grid = None,
    by: Annotated[
        str | None, typer.Option(help="Energy per value of a label: pod, namespace, job, LABEL.")
    ] = None,
    engine: opt.Engine = "local",
    address: opt.Address = None,
    explain: opt.Explain = False,
    sensor_check: Annotated[
        bool, typer.Option(help="Also what the readings say of their sensor (docs/trust.md).")
    ] = False,
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Show GPUs, span, sampling intervals, gaps, coverage, power and energy of a trace."""
    opts = InfoOptions(
        opt.fill_option(fill),
        opt.grid_option(grid),
        by,
        cli.make_engine(engine, address),
        sensor_check,
    )
    loaded = cli.load_trace(trace, reader)
    if explain:  # (before the summary; on stderr with --json)
        cli.print_explanation(loaded, stderr=json_out)
    cli.finish(run_info(loaded, opts), json_out, render)
