"""``powerkit oversub``: compose traces into a fleet and find how far its power can be oversold."""

from __future__ import annotations

from typing import Annotated

import typer

from powerkit.analysis.fleet import CAPACITY_COLUMN, FLEET_COLUMNS, FleetReport
from powerkit.analysis.jobs import OversubOptions, run_oversub
from powerkit.cells.grid import default_grid_s
from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.cli.progress import progress
from powerkit.core import units
from powerkit.core.choices import Compose
from powerkit.core.units import format_duration, format_value, parse_percent, parse_power
from powerkit.report.fleet_section import fleet_section
from powerkit.trace.arguments import parse_member
from powerkit.trace.options import ImportOptions

__all__ = ["oversub"]


def render(report: FleetReport) -> None:
    """Print the per-window table."""
    out = cli.out_console()
    plate = "mixed nameplates" if report.nameplate_w is None else f"{report.nameplate_w:.0f} W each"
    out.print(
        f"fleet: {report.gpus} GPUs ({plate}, {report.fleet_nameplate_w / 1e3:.1f} "
        f"kW nameplate), {report.compose}, {report.draws} draw(s), seed {report.seed}, horizon "
        f"{units.format_span(report.horizon_s)}, margin {100 * report.margin:.0f}%, fill "
        f"{report.fill}, fleet coverage {format_value(report.coverage, '.1%')}"
    )
    extra = () if report.capacity_w is None else (CAPACITY_COLUMN,)
    cli.print_table((*FLEET_COLUMNS, *extra), report.windows, out)
    if report.compose == "random":
        out.print("peak and safe x use the p95 of the peak over draws")


@cli.handle_errors
@reading.reader_options("gpu_name")
def oversub(
    members: Annotated[list[str], typer.Argument(help="Traces as path or path:count.")],
    windows_: opt.Windows = None,
    nameplate: Annotated[
        str | None, typer.Option(help="Per-GPU nameplate, wins over metadata.")
    ] = None,
    compose: opt.Composition = Compose.aligned,
    draws: Annotated[int, typer.Option(min=1, help="Monte-Carlo draws (random).")] = 200,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random offsets.")] = 0,
    capacity: Annotated[
        str | None, typer.Option(help="Feed capacity: 60% of nameplate or kW.")
    ] = None,
    margin: Annotated[str, typer.Option(help="Headroom kept, e.g. 5%.")] = "0%",
    grid: opt.Grid = None,
    html: opt.Html = None,
    plotly_js: opt.PlotlyJs = "inline",
    force: opt.Force = False,
    fill: opt.Fill = "none",
    engine: opt.Engine = "local",
    address: opt.Address = None,
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Compose traces into a fleet; report its peak per window and the safe oversubscription."""
    window_list = opt.windows_option(windows_)
    plate = parse_power(nameplate).resolve(None) if nameplate else None
    cap = parse_power(capacity) if capacity else None
    policy = opt.fill_option(fill)
    parsed = [parse_member(text) for text in members]
    page = cli.Page(html, plotly_js, force, [p for p, _, _ in parsed])
    traces = cli.load_members(parsed, reader, plate)
    grid_s = opt.grid_option(grid) or default_grid_s(*(t for t, _ in traces))
    if not json_out:
        cli.err.print(
            f"composing the fleet from {len(traces)} trace(s) on a "
            f"{format_duration(grid_s)} grid..."
        )
    opts = OversubOptions(
        window_list,
        compose,
        draws,
        seed,
        cap,
        parse_percent(margin, "--margin"),
        grid_s,
        policy,
        cli.make_engine(engine, address),
    )
    total = draws if compose is Compose.random else 1
    with progress("composing", total, quiet=json_out) as advance:
        report, timeline = run_oversub(traces, opts, on_progress=advance)
    page.write("powerkit oversub", lambda: [fleet_section(report, timeline)])
    cli.finish(report, json_out, render, warnings=report.warnings, written=[html])
