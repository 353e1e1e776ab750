"""``powerkit energy``: energy per training step or per workload phase, per GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from powerkit.analysis.energy import EnergyReport, energy_report
from powerkit.cli import options as opt
from powerkit.cli.common import finish, handle_errors, load_trace, make_engine, out_console
from powerkit.errors import BadInputError
from powerkit.trace.arguments import import_options
from powerkit.units import format_value, parse_percent, parse_power

__all__ = ["energy"]


def render(report: EnergyReport) -> None:
    """Print one row per interval and the per-GPU totals."""
    out = out_console()
    phases = report.kind == "phases"
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    headers = ["phase" if phases else "step", "start (UTC)", "s", "trace kJ", "cover"]
    headers += ["counter kJ", "diff"] if phases else ["waiting", "J/token"]
    for h in headers:
        table.add_column(h, justify="left" if h in ("phase", "step", "start (UTC)") else "right")
    for iv in report.intervals:
        row = [str(iv.name), iv.start[:23], f"{iv.duration_s:,.2f}", f"{iv.energy_j / 1e3:,.3f}",
               format_value(iv.coverage, ".1%")]  # fmt: skip
        if phases:
            row += [
                format_value(None if iv.counter_energy_j is None else iv.counter_energy_j / 1e3,
                             ",.3f"),
                "-" if iv.difference_pct is None else f"{iv.difference_pct:+.1f}%",
            ]  # fmt: skip
        else:
            row += [format_value(iv.waiting_share, ".1%"), format_value(iv.j_per_token, ",.3f")]
        table.add_row(*row)
    out.print(table)
    gpus = Table("GPU", "kJ", "integrated s", "waiting", "source", box=box.SIMPLE_HEAD)
    for g in report.gpus:
        waiting = None if g.waiting_s is None or g.busy_s <= 0 else g.waiting_s / g.busy_s
        gpus.add_row(f"{g.host}:{g.gpu}", f"{g.energy_j / 1e3:,.3f}", f"{g.busy_s:,.1f}",
                     format_value(waiting, ".1%"), g.source)  # fmt: skip
    out.print(gpus)
    if phases:
        diffs = [iv.difference_pct for iv in report.intervals if iv.difference_pct is not None]
        if diffs:
            out.print(
                f"trace minus counter over {len(diffs)} phase(s): median "
                f"{sorted(diffs)[len(diffs) // 2]:+.1f}%, range {min(diffs):+.1f}% to "
                f"{max(diffs):+.1f}% (power {report.power_semantics}, sampled every "
                f"{format_value(report.interval_s, '.3f')} s; see docs/energy.md)"
            )


@handle_errors
@opt.reader_options
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
    host: opt.Host = None,
    gpus_per_frame: opt.GpusPerFrame = None,
    nameplate: opt.Nameplate = None,
    reader: opt.ReaderArgs | None = None,
) -> None:
    """Energy per step (time, energy per GPU, waiting share, J/token) or per phase (the trace's
    energy next to the workload's own counters)."""
    if (steps is None) == (phases is None):
        raise BadInputError("give one of --steps or --phases")
    threshold = parse_power(wait_below)
    util = (
        None if wait_util is None else 100 * parse_percent(wait_util, "--wait-util", positive=True)
    )
    opts = import_options(
        host=host, gpus_per_frame=gpus_per_frame, nameplate=nameplate, **(reader or {})
    )
    report = energy_report(
        load_trace(trace, opts), steps=steps, phases=phases, tokens=tokens,
        wait_below=threshold, wait_util=util, fill=opt.fill_option(fill),
        engine=make_engine(engine, address), tz=opts.tz,
    )  # fmt: skip
    finish(report, json_out, render, warnings=report.notes)
