"""``powerkit econ``: what oversubscription (and the controller) are worth, assumptions shown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.econ.economics import (
    ASSUMPTION_COLUMNS,
    CAP_VALUE_COLUMNS,
    EconReport,
    assumption_rows,
    econ_rows,
)
from powerkit.econ.job import EconOptions, run_econ

__all__ = ["econ"]


def render(report: EconReport) -> None:
    """Print the figures, then every assumption with its source."""
    out = cli.out_console()
    cli.print_pairs(econ_rows(report), out)
    if report.cap is not None:
        out.print(f"capping the fleet under feeds of nameplate ÷ ratio ({report.gpus:,} GPUs):")
        cli.print_table(CAP_VALUE_COLUMNS, report.cap, out)
    cli.print_table(ASSUMPTION_COLUMNS, assumption_rows(report), out)


@cli.handle_errors
def econ(
    oversub: Annotated[
        Path | None, typer.Option(help="`oversub --json` output. Required, here or in --config.")
    ] = None,
    control: Annotated[Path | None, typer.Option(help="`control eval --json` output.")] = None,
    cap: Annotated[Path | None, typer.Option(help="`cap --json` output: price its ratios.")] = None,
    gpu_hour: Annotated[
        str | None, typer.Option(help="What a GPU-hour of work is worth, USD (with --cap).")
    ] = None,
    gpus: Annotated[
        int | None, typer.Option(min=1, help="GPUs to provision. Required, here or in --config.")
    ] = None,
    gpu_tdp: Annotated[
        str | None,
        typer.Option(help="Per-GPU nameplate, e.g. 700W. Required, here or in --config."),
    ] = None,
    pue: Annotated[
        float | None, typer.Option(help="Facility PUE (default: industry average).")
    ] = None,
    capex_per_kw: Annotated[
        str | None, typer.Option(help="USD per kW of critical IT capacity.")
    ] = None,
    amortize: Annotated[str | None, typer.Option(help="Years, e.g. 15y.")] = None,
    price: Annotated[str | None, typer.Option(help="Electricity, e.g. 0.08/kWh.")] = None,
    window: Annotated[str | None, typer.Option(help="Window whose peak sets provisioning.")] = None,
    margin: Annotated[
        str | None, typer.Option(help="Headroom (default: the oversub run's).")
    ] = None,
    utilization: Annotated[
        str | None,
        typer.Option(help="Mean power share of nameplate, if the oversub result lacks it."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML file with any of these options.")
    ] = None,
    json_out: opt.Json = False,
) -> None:
    """Turn a fleet's peak into provisioned power, GPUs per feed, capex and energy per year."""
    report = run_econ(cli.options_from(EconOptions, locals()), config)
    cli.finish(report, json_out, render)
