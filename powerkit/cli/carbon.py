"""``powerkit carbon``: operational emissions of a trace at a grid carbon intensity."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.econ.carbon import (
    REGION_COLUMNS,
    CarbonOptions,
    CarbonReport,
    RegionList,
    ScenarioCarbon,
    check_carbon,
    list_regions,
    run_carbon,
)
from powerkit.trace.options import ImportOptions

__all__ = ["carbon"]


def _print_regions(json_out: bool) -> None:
    regions = RegionList(list_regions())
    if json_out:
        cli.emit_json(regions)
    else:
        cli.print_table(REGION_COLUMNS, regions.regions)


@cli.handle_errors
@reading.reader_options()
def carbon(
    trace: Annotated[Path | None, typer.Option(help="The trace to account (any format).")] = None,
    econ: Annotated[
        Path | None, typer.Option(help="`econ --json` output: emissions per year.")
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            help="Bundled annual average: a country (germany, US, GBR) or a US eGRID "
            "subregion (us-caiso, CAMX, ERCT)."
        ),
    ] = None,
    intensity: Annotated[
        str | None, typer.Option(help="Constant intensity, e.g. 250g/kWh.")
    ] = None,
    intensity_csv: Annotated[
        Path | None, typer.Option(help="Hourly timestamp,g/kWh rows (naive times: UTC).")
    ] = None,
    fill: opt.Fill = "none",
    pue: Annotated[float, typer.Option(help="Facility PUE (1: the GPUs' energy alone).")] = 1.0,
    list_regions_: Annotated[
        bool, typer.Option("--list-regions", help="List the bundled regions with their sources.")
    ] = False,
    engine: opt.Engine = "local",
    address: opt.Address = None,
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Emissions of a trace (energy per clock hour x grid intensity) or of an econ scenario."""
    if list_regions_:
        _print_regions(json_out)
        return
    opts = CarbonOptions(
        econ,
        region,
        intensity,
        intensity_csv,
        opt.fill_option(fill),
        cli.make_engine(engine, address),
        pue,
    )
    check_carbon(trace is not None, opts)  # (before the trace is read)
    loaded = None if trace is None else cli.load_trace(trace, reader)
    cli.finish(run_carbon(loaded, opts), json_out, _render)


def _render(result: CarbonReport | ScenarioCarbon) -> None:
    cli.print_pairs(result.rows())
