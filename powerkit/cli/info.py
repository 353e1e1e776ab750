"""``powerkit info``: what is in a trace."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from powerkit.analysis.info import (
    TraceInfo,
    energy_by_label,
    label_column,
    trace_info,
    unintegrated_note,
)
from powerkit.cli.common import (
    AddressOpt,
    EngineOpt,
    FillOpt,
    GpuNameOpt,
    GpusPerFrameOpt,
    GridOpt,
    HostOpt,
    JsonOpt,
    NameplateOpt,
    ReaderArgs,
    emit_json,
    fill_option,
    grid_option,
    handle_errors,
    import_options,
    load_trace,
    make_engine,
    out_console,
    reader_options,
)
from powerkit.units import format_duration, format_value

__all__ = ["info"]


def render(info: TraceInfo) -> None:
    """Print the summary and the per-GPU table."""
    out = out_console()
    hours = info.span_s / 3600
    names = ", ".join(sorted({s.name for s in info.series if s.name})) or "unknown"
    out.print(
        f"[bold]{escape(info.path)}[/]  source={info.source}  power={info.power_semantics}  "
        f"zone={info.tz}"
    )
    out.print(f"GPU model: {names}")
    out.print(
        f"{info.gpus} GPU(s), {info.samples:,} samples, {info.start} -> {info.end} "
        f"({hours:.2f} h); interval median {format_value(info.interval_median_s, '.3f')} s, "
        f"max gap {info.max_gap_s:.2f} s, {info.gaps} gap(s)"
    )
    out.print(
        f"power min/mean/max {info.min_power_w:.1f} / {info.mean_power_w:.1f} / "
        f"{info.max_power_w:.1f} W; energy {info.energy_j / 3.6e6:.3f} kWh; coverage "
        f"{format_value(info.coverage, '.1%')} of {format_duration(info.grid_s)} cells "
        f"(fill {info.fill})"
    )
    if info.bad_rows.get("count"):
        lines = ", ".join(str(n) for n in info.bad_rows["lines"][:10])
        out.print(f"{info.bad_rows['count']} bad row(s) skipped, at line(s) {lines}")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for header in ("GPU", "samples", "step s", "max gap s", "gaps", "cover", "mean W", "max W",
                   "TDP W", "kWh"):  # fmt: skip
        table.add_column(header, no_wrap=True, justify="left" if header == "GPU" else "right")
    for s in info.series:
        table.add_row(
            f"{s.host}:{s.gpu}",
            f"{s.samples:,}",
            format_value(s.interval_median_s, ".3f"),
            f"{s.max_gap_s:.2f}",
            str(s.gaps),
            f"{100 * s.coverage:.1f}%",
            f"{s.mean_power_w:.1f}",
            f"{s.max_power_w:.0f}",
            format_value(s.nameplate_w, ".0f"),
            f"{s.energy_j / 3.6e6:.4f}" + ("" if s.energy_source == "counter" else "*"),
        )
    out.print(table)
    if any(s.energy_source == "trapezoid" for s in info.series):
        out.print("* energy integrated from power (no energy counter in the trace)")
    note = unintegrated_note(info)
    if note is not None:
        out.print(f"[yellow]not integrated:[/] {escape(note)}")


@handle_errors
@reader_options
def info(
    trace: Annotated[
        Path, typer.Argument(help="Trace: Parquet (file or folder), CSV, dmon, DCGM.")
    ],
    fill: FillOpt = "none",
    grid: GridOpt = None,
    by: Annotated[
        str | None,
        typer.Option("--by", help="Energy per value of a label: pod, namespace, job, LABEL."),
    ] = None,
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    json_out: JsonOpt = False,
    host: HostOpt = None,
    gpus_per_frame: GpusPerFrameOpt = None,
    nameplate: NameplateOpt = None,
    gpu_name: GpuNameOpt = None,
    reader: ReaderArgs | None = None,
) -> None:
    """Show GPUs, span, sampling intervals, gaps, coverage, power and energy of a trace."""
    policy = fill_option(fill)
    opts = import_options(
        host=host,
        gpus_per_frame=gpus_per_frame,
        nameplate=nameplate,
        gpu_name=gpu_name,
        **(reader or {}),
    )
    loaded = load_trace(trace, opts)
    if by is not None:
        label_column(loaded, by)  # an unknown label fails before the long work
    chosen = make_engine(engine, address)
    result = trace_info(loaded, policy, grid_option(grid),
                        engine=chosen)  # fmt: skip
    groups = None if by is None else energy_by_label(loaded, by, policy, engine=chosen)
    if json_out:
        doc: dict[str, Any] = dataclasses.asdict(result)
        if groups is not None:
            doc["by"] = {"label": by, "groups": [dataclasses.asdict(g) for g in groups]}
        emit_json(doc, "info")
        return
    render(result)
    if groups is not None:
        table = Table(str(by), "kWh", "share", "GPU-hours", "GPUs", box=box.SIMPLE_HEAD)
        for g in groups:
            name = "(none)" if g.value is None else g.value
            table.add_row(name, f"{g.energy_j / 3.6e6:.4f}", f"{100 * g.share:.1f}%",
                          f"{g.gpu_seconds / 3600:.3f}", str(g.gpus))  # fmt: skip
        out_console().print(table)
