"""``powerkit carbon``: operational emissions of a trace at a grid carbon intensity."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.core.errors import BadInputError
from powerkit.econ.carbon import (
    REGION_COLUMNS,
    CarbonReport,
    RegionList,
    ScenarioCarbon,
    carbon_of,
    hourly_energy,
    list_regions,
    parse_intensity,
    read_intensity_csv,
    regional_intensity,
    scenario_carbon,
)
from powerkit.econ.economics import EconReport
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
    if (trace is None) == (econ is None):
        raise BadInputError("give one of --trace or --econ")
    if econ is not None and intensity_csv is not None:
        raise BadInputError("--econ is a yearly figure: give --region or --intensity")
    if sum(x is not None for x in (region, intensity, intensity_csv)) != 1:
        raise BadInputError(
            "give one of --region (e.g. germany), --intensity (e.g. 250g/kWh) or --intensity-csv"
        )
    grams, hourly, source = None, None, ""
    if region is not None:
        known = regional_intensity(region)
        grams, source = known.g_per_kwh, f"{known.name} {known.year}: {known.source}"
    elif intensity is not None:
        grams, source = parse_intensity(intensity), "given (command line)"
    elif intensity_csv is not None:
        hourly, source = read_intensity_csv(intensity_csv), f"hourly ({intensity_csv})"
    if econ is not None:
        assert grams is not None
        cli.finish(scenario_carbon(EconReport.read(econ), grams, source), json_out, _render)
        return
    assert trace is not None
    opts = reader
    energy = hourly_energy(
        cli.load_trace(trace, opts), opt.fill_option(fill), engine=cli.make_engine(engine, address)
    )
    report = carbon_of(energy, intensity=grams, hourly=hourly, source=source)
    cli.finish(report, json_out, _render)


def _render(result: CarbonReport | ScenarioCarbon) -> None:
    cli.print_pairs(result.rows())
