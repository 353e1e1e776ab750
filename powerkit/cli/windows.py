"""``powerkit windows``: how often power exceeds a budget, judged at each window length."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from powerkit.analysis.windows import WindowsReport, windowed_violations
from powerkit.choices import Mode, Scope
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
    warn,
    windows_option,
)
from powerkit.units import (
    format_duration,
    format_value,
    parse_power,
)

__all__ = ["windows"]


ModeOpt = Annotated[Mode, typer.Option("--mode", help="rolling (every cell) or tumbling (blocks).")]
ScopeOpt = Annotated[Scope, typer.Option("--scope", help="gpu (pool GPUs) or sum (GPUs summed).")]


def render(report: WindowsReport, origin: str) -> None:
    """Print the per-window table."""
    out = out_console()
    out.print(
        f"[bold]{escape(origin)}[/]: budget {report.budget_w:.1f} W, {report.mode} windows, scope "
        f"{report.scope}, grid {format_duration(report.grid_s)}, {report.series} series, "
        f"fill {report.fill}, coverage {format_value(report.coverage, '.1%')}, "
        f"power {report.power_semantics}"
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    # Short headers keep the table whole in an 80-column terminal; docs/windows.md spells
    # them out (viol. = violations, incompl. = incomplete positions).
    for header in ("window", "positions", "viol.", "rate", "max W", "incompl.", "cover",
                   "excess kJ", "longest s"):  # fmt: skip
        table.add_column(header, no_wrap=True, justify="left" if header == "window" else "right")
    for w in report.windows:
        table.add_row(
            w.window,
            f"{w.positions:,}",
            f"{w.violations:,}",
            "-" if w.violation_rate is None else f"{100 * w.violation_rate:.2f}%",
            "-" if w.max_mean_w is None else f"{w.max_mean_w:.1f}",
            f"{w.incomplete:,}",
            format_value(w.coverage, ".1%"),
            f"{w.excess_energy_j / 1e3:.2f}",
            f"{w.longest_violation_s:.1f}",
        )
    out.print(table)


@handle_errors
@reader_options
def windows(
    trace: Annotated[
        Path, typer.Argument(help="Trace: Parquet (file or folder), CSV, dmon, DCGM.")
    ],
    budget: Annotated[str, typer.Option("--budget", help="Power budget, e.g. 314.6W or 80%.")],
    windows_: Annotated[
        str | None,
        typer.Option(
            "--windows", help="Window lengths, e.g. 0.5s,30s,5m (default: those on the grid)."
        ),
    ] = None,
    mode: ModeOpt = Mode.rolling,
    scope: ScopeOpt = Scope.gpu,
    grid: GridOpt = None,
    fill: FillOpt = "none",
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    json_out: JsonOpt = False,
    host: HostOpt = None,
    gpus_per_frame: GpusPerFrameOpt = None,
    nameplate: NameplateOpt = None,
    gpu_name: GpuNameOpt = None,
    reader: ReaderArgs | None = None,
) -> None:
    """Report how often windowed mean power exceeds a budget, per window length."""
    spec = parse_power(budget)
    window_list = windows_option(windows_)
    grid_s = grid_option(grid)
    policy = fill_option(fill)
    opts = import_options(
        host=host,
        gpus_per_frame=gpus_per_frame,
        nameplate=nameplate,
        gpu_name=gpu_name,
        **(reader or {}),
    )
    loaded = load_trace(trace, opts)
    report = windowed_violations(
        loaded,
        spec,
        window_list,
        mode=mode.value,
        scope=scope.value,
        grid_s=grid_s,
        fill=policy,
        engine=make_engine(engine, address),
    )
    for line in report.warnings:
        warn(line)
    if json_out:
        emit_json(report.to_doc(), "windows")
    else:
        render(report, str(trace))
