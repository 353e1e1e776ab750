"""``powerkit energy``: energy per training step or per workload phase, per GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.analysis.energy import EnergyReport
from powerkit.analysis.energy_columns import GPU_COLUMNS, interval_columns
from powerkit.analysis.jobs import EnergyOptions, run_energy
from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.core.errors import BadInputError
from powerkit.core.units import format_value, parse_percent, parse_power
from powerkit.trace.options import ImportOptions

__all__ = ["energy"]


def render(report: EnergyReport) -> None:
    """Print one row per interval and the per-GPU totals."""
    out = cli.out_console()
    phases = report.kind == "phases"
    throttled = any(iv.cap_throttled_share is not None for iv in report.intervals)
    cli.print_table(interval_columns(report.kind, throttled), report.intervals, out)
    cli.print_table(GPU_COLUMNS, report.gpus, out)
    if phases:
        diffs = [iv.difference_pct for iv in report.intervals if iv.difference_pct is not None]
        if diffs:
            out.print(
                f"trace minus counter over {len(diffs)} phase(s): median "
                f"{sorted(diffs)[len(diffs) // 2]:+.1f}%, range {min(diffs):+.1f}% to "
                f"{max(diffs):+.1f}% (power {report.power_semantics}, sampled every "
                f"{format_value(report.interval_s, '.3f')} s; see docs/energy.md)"
            )


@cli.handle_errors
@reading.reader_options(*reading.SOURCE)
def energy(
    trace: Annotated[Path, typer.Argument(help="Trace: Parquet, CSV, nvidia-smi, dmon, DCGM.")],
    steps: Annotated[
        Path | None,
        typer.Option(
            help="Step starts: annotation JSON lines, a step,start CSV, or `trace` (the "
            "trace's own step column)."
        ),
    ] = None,
    phases: Annotated[
        Path | None, typer.Option(help="A workload's phase file with its energy counters.")
    ] = None,
    tokens: Annotated[
        bool, typer.Option(help="Require tokens per step (J/token for each).")
    ] = False,
    wait_below: Annotated[
        str, typer.Option(help="A GPU below this power is waiting (W or % of TDP).")
    ] = "40%",
    wait_util: Annotated[
        str | None,
        typer.Option(
            help="Instead, a GPU below this utilization is waiting, e.g. 10% (needs gpu_util)."
        ),
    ] = None,
    fill: opt.Fill = "none",
    engine: opt.Engine = "local",
    address: opt.Address = None,
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Energy per step (time, energy per GPU, waiting share, J/token) or per phase (the trace's
    energy next to the workload's own counters)."""
    if (steps is None) == (phases is None):
        raise BadInputError("give one of --steps or --phases")
    util = (
        None if wait_util is None else 100 * parse_percent(wait_util, "--wait-util", positive=True)
    )
    opts = EnergyOptions(
        steps,
        phases,
        tokens,
        parse_power(wait_below),
        util,
        opt.fill_option(fill),
        cli.make_engine(engine, address),
        reader.tz,
    )
    report = run_energy(cli.load_trace(trace, reader), opts)
    cli.finish(report, json_out, render, warnings=report.notes)
