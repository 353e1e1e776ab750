"""``powerkit info``: what is in a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from powerkit.analysis.info import TraceInfo, trace_info
from powerkit.cli.common import (
    GpusPerFrameOpt,
    HostOpt,
    JsonOpt,
    NameplateOpt,
    SkipBadRowsOpt,
    TzOpt,
    emit_json,
    handle_errors,
    import_options,
    load_trace,
    out_console,
)
from powerkit.units import format_value

__all__ = ["info"]


def render(info: TraceInfo) -> None:
    """Print the summary and the per-GPU table."""
    out = out_console()
    hours = info.span_s / 3600
    names = ", ".join(sorted({s.name for s in info.series if s.name})) or "unknown"
    out.print(f"[bold]{info.path}[/]  source={info.source}  power={info.power_semantics}")
    out.print(f"GPU model: {names}")
    out.print(
        f"{info.gpus} GPU(s), {info.samples:,} samples, {info.start} -> {info.end} "
        f"({hours:.2f} h); interval median {format_value(info.interval_median_s, '.3f')} s, "
        f"max gap {info.max_gap_s:.2f} s, {info.gaps} gap(s)"
    )
    out.print(
        f"power min/mean/max {info.min_power_w:.1f} / {info.mean_power_w:.1f} / "
        f"{info.max_power_w:.1f} W; energy {info.energy_j / 3.6e6:.3f} kWh"
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for header in ("GPU", "samples", "step s", "max gap s", "gaps", "mean W", "max W",
                   "TDP W", "kWh"):  # fmt: skip
        table.add_column(header, no_wrap=True, justify="left" if header == "GPU" else "right")
    for s in info.series:
        table.add_row(
            f"{s.host}:{s.gpu}",
            f"{s.samples:,}",
            format_value(s.interval_median_s, ".3f"),
            f"{s.max_gap_s:.2f}",
            str(s.gaps),
            f"{s.mean_power_w:.1f}",
            f"{s.max_power_w:.0f}",
            format_value(s.nameplate_w, ".0f"),
            f"{s.energy_j / 3.6e6:.4f}" + ("" if s.energy_source == "counter" else "*"),
        )
    out.print(table)
    if any(s.energy_source == "trapezoid" for s in info.series):
        out.print("* energy integrated from power (no energy counter in the trace)")


@handle_errors
def info(
    trace: Annotated[
        Path, typer.Argument(help="Trace: Parquet (file or folder), CSV, dmon, DCGM.")
    ],
    json_out: JsonOpt = False,
    tz: TzOpt = "UTC",
    host: HostOpt = None,
    gpus_per_frame: GpusPerFrameOpt = None,
    skip_bad_rows: SkipBadRowsOpt = False,
    nameplate: NameplateOpt = None,
) -> None:
    """Show GPUs, span, sampling intervals, gaps, power and energy of a trace."""
    opts = import_options(
        tz=tz,
        host=host,
        gpus_per_frame=gpus_per_frame,
        skip_bad_rows=skip_bad_rows,
        nameplate=nameplate,
    )
    result = trace_info(load_trace(trace, opts))
    if json_out:
        emit_json(result)
    else:
        render(result)
