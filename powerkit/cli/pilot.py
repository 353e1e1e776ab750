"""``powerkit pilot``: a Markdown plan for an operator pilot of oversubscription."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.core.outputs import write_text
from powerkit.core.units import parse_duration, parse_percent, parse_power
from powerkit.econ.job import PilotOptions, run_pilot
from powerkit.econ.pilot import pilot_markdown

__all__ = ["pilot"]


@cli.handle_errors
def pilot(
    oversub: Annotated[Path, typer.Option(help="`oversub --json` output.")],
    site_mw: Annotated[float, typer.Option(help="The site's power feed, MW.")],
    gpu_tdp: Annotated[str, typer.Option(help="Per-GPU nameplate.")] = "700W",
    pue: Annotated[
        float | None, typer.Option(help="Facility PUE (default: industry average).")
    ] = None,
    window: Annotated[str, typer.Option(help="Window whose peak sets provisioning.")] = "30s",
    target: Annotated[str, typer.Option(help="Provisioned share of nameplate to try.")] = "70%",
    days: Annotated[int, typer.Option(help="Length of the pilot.")] = 45,
    racks: Annotated[int, typer.Option(help="Racks in the pilot.")] = 8,
    gpus_per_rack: Annotated[int, typer.Option(help="GPUs per rack.")] = 32,
    max_violation_30s: Annotated[
        str, typer.Option(help="Go/no-go: 30 s violation share.")
    ] = "0.1%",
    max_slowdown: Annotated[str, typer.Option(help="Go/no-go: throughput loss allowed.")] = "2%",
    meter_per_rack: Annotated[float | None, typer.Option(help="USD of metering per rack.")] = None,
    engineer_weeks: Annotated[float | None, typer.Option(help="Engineer-weeks of work.")] = None,
    engineer_week_usd: Annotated[float | None, typer.Option(help="USD per engineer-week.")] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the plan here (else stdout).")
    ] = None,
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Plan a pilot: scope, duration, metering, go/no-go, rollback and cost, from a fleet peak."""
    cli.refuse_overwrite(out, force, [oversub])
    opts = PilotOptions(
        oversub,
        site_mw,
        parse_power(gpu_tdp).resolve(None),
        pue,
        parse_duration(window),
        parse_percent(target, "--target"),
        days,
        racks,
        gpus_per_rack,
        parse_percent(max_violation_30s, "--max-violation-30s"),
        parse_percent(max_slowdown, "--max-slowdown"),
        meter_per_rack,
        engineer_weeks,
        engineer_week_usd,
    )
    plan = run_pilot(opts)
    text = pilot_markdown(plan)
    if out is not None:
        write_text(out, text)
        plan = replace(plan, out=str(out))
    if json_out:
        cli.emit_json(plan)
    elif out is None:
        typer.echo(text, nl=False)
    else:
        cli.err.print(f"wrote {out}: {plan.pilot_gpus} GPUs, {days} days, ${plan.cost_usd:,.0f}")
