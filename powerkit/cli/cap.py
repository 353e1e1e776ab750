"""``powerkit cap``: what capping a fleet to a limit costs, per policy (and per ratio)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cap.breaker import BREAKER_COLUMNS
from powerkit.cap.document import CAP_COLUMNS, CapReport
from powerkit.cap.events import EVENT_COLUMNS, parse_event
from powerkit.cap.job import CapOptions, parse_assign, parse_classes, run_cap
from powerkit.cap.latency import STEP_COLUMNS, LatencyReport, step_latency
from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.cli.progress import percent_done, progress
from powerkit.core.choices import Compose
from powerkit.core.units import list_items, parse_duration, parse_factors, parse_power
from powerkit.report.cap_section import cap_section
from powerkit.trace.arguments import parse_member
from powerkit.trace.options import ImportOptions

__all__ = ["cap"]


def render(report: CapReport) -> None:
    """The fleet, then a row per limit and policy."""
    out = cli.out_console()
    out.print(report.summary())
    cli.print_table(CAP_COLUMNS, report.runs, out)
    if any(r.events for r in report.runs):
        cli.print_table(EVENT_COLUMNS, [(r, e) for r in report.runs for e in r.events], out)
    if report.breaker is not None:
        out.print(f"breaker: {report.breaker}")
        cli.print_table(BREAKER_COLUMNS, report.runs, out)


def _render_latency(report: LatencyReport) -> None:
    out = cli.out_console()
    cli.print_table(STEP_COLUMNS, report.steps, out)
    out.print(report.summary())


@cli.handle_errors
@reading.reader_options("gpu_name")
def cap(
    members: Annotated[list[str], typer.Argument(help="Traces as path, path:count or @W.")],
    limit: Annotated[
        str | None, typer.Option(help="The feed: a share of the fleet's nameplate or kW.")
    ] = None,
    ratios: Annotated[
        str | None, typer.Option(help="Oversubscription ratios: feeds of nameplate ÷ each.")
    ] = None,
    limit_csv: Annotated[
        Path | None, typer.Option(help="A limit schedule: rows of time,kW.")
    ] = None,
    event: Annotated[
        list[str] | None, typer.Option(help="start=+DUR,cut=PCT,for=DUR[,within,notice=DUR].")
    ] = None,
    policy: Annotated[
        str, typer.Option(help="Any of none,uniform,pfi,polca,priority.")
    ] = "uniform,pfi",
    jobs: Annotated[
        list[Path] | None, typer.Option(help="Cap curves: pfi sweep files or a jobs table.")
    ] = None,
    assign: Annotated[
        list[str] | None, typer.Option(help="MEMBER=JOB: the curve a member's GPUs follow.")
    ] = None,
    classes: Annotated[
        list[str] | None, typer.Option(help="JOB=N: a job's priority class, 0 (highest) to 3.")
    ] = None,
    breaker: Annotated[
        str | None, typer.Option(help="A trip curve (TOML) or a bundled one's name.")
    ] = None,
    period: Annotated[str, typer.Option(help="How often the policy decides.")] = "1s",
    latency: Annotated[str, typer.Option(help="How long a decision takes to act.")] = "0s",
    compose: opt.Composition = Compose.aligned,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random offsets.")] = 0,
    nameplate: Annotated[
        str | None, typer.Option(help="Per-GPU nameplate, wins over metadata.")
    ] = None,
    stat: opt.Stat = "top10",
    grid: opt.Grid = None,
    fill: opt.Fill = "none",
    html: opt.Html = None,
    plotly_js: opt.PlotlyJs = "inline",
    force: opt.Force = False,
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Replay a fleet under a power limit: how often and how long it is capped, what gets
    above the limit before the caps act, and the throughput each job loses, per policy.
    `cap latency LOG --steps PLAN`: how fast power followed each cap change of a recording."""
    options = cli.options_from(
        CapOptions,
        locals(),
        limit=None if limit is None else parse_power(limit),
        ratios=None if ratios is None else list(parse_factors(ratios, "--ratios")),
        events=[parse_event(e) for e in event or []],
        policies=list_items(policy, "--policy"),
        curves=jobs or [],
        assign=parse_assign(assign or []),
        classes=parse_classes(classes or []),
        period_s=parse_duration(period),
        latency_s=parse_duration(latency, allow_zero=True),
        grid_s=opt.grid_option(grid),
        fill=opt.fill_option(fill),
        nameplate_w=None if nameplate is None else parse_power(nameplate).resolve(None),
    )
    opts = reader
    parsed = [parse_member(m) for m in members]
    inputs = [p for p, _, _ in parsed] + (jobs or []) + [Path(p) for p in (limit_csv, breaker) if p]
    page = cli.Page(html, plotly_js, force, inputs)
    traces = cli.load_members(parsed, opts, options.nameplate_w)
    with progress("capping", 100, quiet=json_out) as advance:
        replayed = run_cap(traces, options, on_block=percent_done(advance, "capping"))
    page.write("powerkit cap", lambda: [cap_section(replayed, "this run")])
    cli.finish(replayed, json_out, render, warnings=replayed.warnings, written=[html])


@cli.handle_errors
@reading.reader_options()
def latency(
    log: Annotated[Path, typer.Argument(help="A recording of the GPU whose cap was stepped.")],
    steps: Annotated[Path, typer.Option(help="The cap step plan (JSON: applied changes).")],
    gpu: Annotated[int | None, typer.Option(help="The GPU that was stepped.")] = None,
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """How fast power followed each cap change of a recording: the time to 90 % of each move."""
    cli.finish(step_latency(cli.load_trace(log, reader), steps, gpu), json_out, _render_latency)
