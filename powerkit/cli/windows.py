"""``powerkit windows``: how often power exceeds a budget, judged at each window length."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.analysis.jobs import WindowsOptions, run_windows
from powerkit.analysis.windows import WINDOW_COLUMNS, WindowsReport
from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.core.choices import Mode, Scope
from powerkit.core.units import format_duration, format_value, parse_power
from powerkit.trace.options import ImportOptions

__all__ = ["windows"]


ModeOpt = Annotated[Mode, typer.Option("--mode", help="rolling (every cell) or tumbling (blocks).")]
ScopeOpt = Annotated[Scope, typer.Option("--scope", help="gpu (pool GPUs) or sum (GPUs summed).")]


def render(report: WindowsReport) -> None:
    """Print the per-window table."""
    out = cli.out_console()
    share, throttled = report.at_limit_share, report.throttled_share or {}
    at_limit = "" if share is None else f", at the power limit {share:.1%} of the time"
    at_limit += "".join(f", throttled ({k}) {v:.1%}" for k, v in throttled.items() if v)
    out.print(
        f"{report.trace}: budget {report.budget_w:.1f} W, {report.mode} windows, "
        f"scope {report.scope}, grid {format_duration(report.grid_s)}, {report.series} series, "
        f"fill {report.fill}, coverage {format_value(report.coverage, '.1%')}, "
        f"power {report.power_semantics}{at_limit}"
    )
    cli.print_table(WINDOW_COLUMNS, report.windows, out)


@cli.handle_errors
@reading.reader_options(*reading.SOURCE)
def windows(
    trace: Annotated[
        Path, typer.Argument(help="Trace: Parquet (file or folder), CSV, dmon, DCGM.")
    ],
    budget: Annotated[str, typer.Option(help="Power budget, e.g. 314.6W or 80%.")],
    windows_: opt.Windows = None,
    mode: ModeOpt = Mode.rolling,
    scope: ScopeOpt = Scope.gpu,
    grid: opt.Grid = None,
    fill: opt.Fill = "none",
    engine: opt.Engine = "local",
    address: opt.Address = None,
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Report how often windowed mean power exceeds a budget, per window length."""
    opts = WindowsOptions(
        parse_power(budget),
        opt.windows_option(windows_),
        mode,
        scope,
        opt.grid_option(grid),
        opt.fill_option(fill),
        cli.make_engine(engine, address),
    )
    report = run_windows(cli.load_trace(trace, reader), opts)
    cli.finish(report, json_out, render, warnings=report.warnings)
