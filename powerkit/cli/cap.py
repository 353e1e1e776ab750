"""``powerkit cap``: what capping a fleet to a limit costs, per policy (and per ratio)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cap.job import CapOptions, parse_assign, run_cap
from powerkit.cap.replay import CAP_COLUMNS, CapReport
from powerkit.choices import Compose
from powerkit.cli import options as opt
from powerkit.cli.common import finish, handle_errors, load_members, out_console, print_table
from powerkit.cli.progress import progress
from powerkit.trace.arguments import import_options, parse_member
from powerkit.units import format_duration, parse_duration, parse_factors, parse_power

__all__ = ["cap"]


def render(report: CapReport) -> None:
    """The fleet, then a row per limit and policy."""
    out = out_console()
    out.print(
        f"[bold]fleet[/]: {report.gpus} GPUs, {report.fleet_nameplate_w / 1e3:,.1f} kW "
        f"nameplate, {report.compose}, {report.horizon_s / 3600:.2f} h on a "
        f"{format_duration(report.grid_s)} grid; decisions every "
        f"{format_duration(report.period_s)}, acting after {format_duration(report.latency_s)}"
    )
    print_table(CAP_COLUMNS, report.runs, out)


@handle_errors
@opt.reader_options
def cap(
    members: Annotated[list[str], typer.Argument(help="Traces as path, path:count or @W.")],
    limit: Annotated[
        str | None, typer.Option(help="The feed: a share of the fleet's nameplate or kW.")
    ] = None,
    ratios: Annotated[
        str | None, typer.Option(help="Oversubscription ratios: feeds of nameplate ÷ each.")
    ] = None,
    policy: Annotated[str, typer.Option(help="Policies: any of none,uniform,pfi.")] = "uniform,pfi",
    jobs: Annotated[
        list[Path] | None, typer.Option(help="Cap curves: pfi sweep files or a jobs table.")
    ] = None,
    assign: Annotated[
        list[str] | None, typer.Option(help="MEMBER=JOB: the curve a member's GPUs follow.")
    ] = None,
    period: Annotated[str, typer.Option(help="How often the policy decides.")] = "1s",
    latency: Annotated[str, typer.Option(help="How long a decision takes to act.")] = "0s",
    compose: Annotated[
        Compose, typer.Option(help="aligned, random or staggered.")
    ] = Compose.aligned,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random offsets.")] = 0,
    nameplate: Annotated[
        str | None, typer.Option(help="Per-GPU nameplate, wins over metadata.")
    ] = None,
    stat: opt.Stat = "top10",
    grid: opt.Grid = None,
    fill: opt.Fill = "none",
    json_out: opt.Json = False,
    gpu_name: opt.GpuName = None,
    reader: opt.ReaderArgs | None = None,
) -> None:
    """Replay a fleet under a power limit: how often and how long it is capped, what gets
    above the limit before the caps act, and the throughput each job loses, per policy."""
    options = CapOptions(
        limit=None if limit is None else parse_power(limit),
        ratios=None if ratios is None else list(parse_factors(ratios, "--ratios")),
        policies=[p.strip() for p in policy.split(",") if p.strip()], curves=jobs or [],
        assign=parse_assign(assign or []), period_s=parse_duration(period),
        latency_s=parse_duration(latency, allow_zero=True), compose=compose.value, seed=seed,
        grid_s=opt.grid_option(grid), fill=opt.fill_option(fill),
        nameplate_w=None if nameplate is None else parse_power(nameplate).resolve(None),
        stat=stat,
    )  # fmt: skip
    opts = import_options(gpu_name=gpu_name, **(reader or {}))
    traces = load_members([parse_member(m) for m in members], opts, options.nameplate_w)
    steps = len(options.policies) * (len(options.ratios) if options.ratios else 1)
    with progress("capping", steps, quiet=json_out) as advance:
        report = run_cap(traces, options, on_run=lambda note: advance(1, note))
    finish(report, json_out, render, warnings=report.warnings)
