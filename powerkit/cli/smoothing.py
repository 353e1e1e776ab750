"""``powerkit smoothing``: NVIDIA Blackwell power smoothing, shown and set (journaled)."""

from __future__ import annotations

from typing import Annotated

import typer

from powerkit.actuation.smoothing import (
    SmoothingOptions,
    SmoothingReport,
    run_smoothing,
    smoothing_state,
)
from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.core.units import parse_gpus

__all__ = ["smoothing_app"]

smoothing_app = typer.Typer(help="Power smoothing (Blackwell): ramp rates and floor.")


@smoothing_app.command()
@cli.handle_errors
def show(gpus: opt.Gpus = None, json_out: opt.Json = False) -> None:
    """Each GPU's power smoothing (on/off, profile, ramp rates, floor) and power profiles."""
    cli.finish(smoothing_state(parse_gpus(gpus)), json_out, render)


@smoothing_app.command("set")
@cli.handle_errors
def set_(
    ramp_up: Annotated[float | None, typer.Option(help="Ramp-up rate, W/s.")] = None,
    ramp_down: Annotated[float | None, typer.Option(help="Ramp-down rate, W/s.")] = None,
    floor: Annotated[float | None, typer.Option(help="Power floor, % of the TGP.")] = None,
    off: Annotated[bool, typer.Option(help="Switch smoothing off instead.")] = False,
    gpus: opt.Gpus = None,
    json_out: opt.Json = False,
) -> None:
    """Set power smoothing (the original goes into the cap journal: `powerkit restore` puts it
    back)."""
    opts = SmoothingOptions(parse_gpus(gpus), ramp_up, ramp_down, floor, enabled=not off)
    cli.finish(done := run_smoothing(opts), json_out, render, warnings=done.warnings)


def render(report: SmoothingReport) -> None:
    """A line per GPU: its smoothing now (and before, after a set) and its power profiles."""
    out = cli.out_console()
    for row in report.gpus:
        s, was = row["smoothing"], row.get("was")
        text = "not supported (needs Blackwell, driver 570+)"
        if s is not None:
            text = (
                f"{'on' if s['enabled'] else 'off'}, profile {s['profile']}, ramp up "
                f"{s['ramp_up_w_per_s']:g} W/s, down {s['ramp_down_w_per_s']:g} W/s, floor "
                f"{s['floor_pct']:g} % TGP"
            )
        if was is not None:
            text += f" (was {'on' if was['enabled'] else 'off'}, {was['ramp_up_w_per_s']:g}/"
            text += f"{was['ramp_down_w_per_s']:g} W/s, {was['floor_pct']:g} %)"
        profiles = row["power_profiles"]
        text += "" if profiles is None else f"; power profiles: {', '.join(profiles) or 'none'}"
        out.print(f"GPU {row['gpu']} ({row['name']}): {text}")
