"""``powerkit bloat``: stage profiles, the iteration time-energy frontier of a pipeline, and
measuring a plan."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import typer

from powerkit.bloat.job import (
    RUN_COLUMNS,
    BloatRun,
    PlanOptions,
    ProfileOptions,
    RunPlanOptions,
    run_bloat_plan,
    run_plan,
    run_profile,
)
from powerkit.bloat.plan_file import BloatPlan, frontier_columns
from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli.progress import progress
from powerkit.core.choices import Backend, GpuBackend, LoopBackend, Method, Schedule
from powerkit.core.units import (
    format_value,
    parse_duration,
    parse_factors,
    parse_frequencies,
    parse_gpus,
    parse_power,
)
from powerkit.report.bloat_section import bloat_section
from powerkit.sweep.job import sweep_config

__all__ = ["bloat_app"]

bloat_app = typer.Typer(
    help="Energy bloat of pipeline-parallel training: profiles, the frontier, measured plans.",
    no_args_is_help=True,
)


@bloat_app.command("profile")
@cli.handle_errors
def profile_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Profile CSV to write.")],
    backend: Annotated[GpuBackend, typer.Option(help="Where to measure.")] = GpuBackend.sim,
    preset: Annotated[
        str, typer.Option(help="sim: pipeline preset (a100-gpt3-pp4, a40-bloom-pp8).")
    ] = "a100-gpt3-pp4",
    run: Annotated[
        str | None,
        typer.Option(
            help="nvml: command running one stage's computation, with {stage}, {instruction} "
            "(and {gpu_frequency_mhz}) placeholders; prints JSON lines "
            '{"microbatches": n, "seconds": s}.'
        ),
    ] = None,
    stages: Annotated[
        int | None, typer.Option(min=1, help="nvml: pipeline stages to profile.")
    ] = None,
    gpu_frequency: Annotated[
        str | None, typer.Option(help="nvml: SM clocks (MHz), e.g. 1410:810:60.")
    ] = None,
    gpus: opt.Gpus = None,
    point: Annotated[str, typer.Option(help="nvml: measured length per point.")] = "20s",
    warmup: Annotated[str, typer.Option(help="nvml: discarded start.")] = "5s",
    interval: Annotated[str, typer.Option(help="nvml: sampling interval.")] = "0.1s",
    force: opt.Force = False,
) -> None:
    """Write a stage profile: time and energy per stage, instruction and SM frequency."""
    cli.refuse_overwrite(out, force, [])
    timing = sweep_config(
        warmup=warmup, point=point, interval=interval, cooldown="0s", repeats=1, seed=0
    )
    opts = cli.options_from(
        ProfileOptions,
        locals(),
        backend=Backend(backend),
        gpu_frequency_mhz=None if gpu_frequency is None else parse_frequencies(gpu_frequency),
        gpus=parse_gpus(gpus),
    )
    cli.err.print(run_profile(opts, out, progress=progress, note=cli.warn))


def _render_plan(plan: BloatPlan) -> None:
    out = cli.out_console()
    out.print(
        f"{plan.stages} stages x {plan.microbatches} microbatches, {plan.schedule}, idle "
        f"{plan.idle_power_w:g} W, method {plan.method}"
    )
    base = plan.all_max
    out.print(f"all max clocks: {base.time_s:.4f} s, {base.energy_j:,.1f} J per iteration")
    cli.print_table(frontier_columns(base.energy_j), plan.frontier, out)
    intr = plan.intrinsic
    out.print(f"intrinsic bloat: {intr.saved_j:,.1f} J ({intr.saved_pct:.1f}%) per iteration")
    for b in plan.extrinsic:
        out.print(
            f"extrinsic bloat, straggler x{b.straggler:g}: {b.saved_j:,.1f} J ({b.saved_pct:.1f}%)"
        )


@bloat_app.command("plan")
@cli.handle_errors
def plan_cmd(
    profile: Annotated[Path, typer.Argument(help="Stage profile CSV.")],
    stages: Annotated[int, typer.Option(min=1, help="Pipeline stages.")],
    microbatches: Annotated[int, typer.Option(min=1, help="Microbatches per iteration.")],
    schedule: Annotated[Schedule, typer.Option(help="Pipeline schedule.")] = Schedule.one_f_one_b,
    idle_power: Annotated[str, typer.Option(help="Power of a waiting GPU.")] = "75W",
    straggler: Annotated[
        str, typer.Option(help="Straggler factors for extrinsic bloat.")
    ] = "1.1,1.2,1.5",
    points: Annotated[int, typer.Option(min=2, help="Deadlines on the frontier.")] = 20,
    method: Annotated[Method, typer.Option(help="How to solve.")] = Method.auto,
    frontier_out: Annotated[
        Path | None, typer.Option("--frontier", help="Write the frontier as CSV.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the plan (JSON) for bloat run.")
    ] = None,
    html: Annotated[
        Path | None, typer.Option(help="Write a Plotly page (frontier, stages, timeline).")
    ] = None,
    plotly_js: opt.PlotlyJs = "inline",
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """The iteration time-energy frontier and the intrinsic and extrinsic bloat it removes."""
    for path in (frontier_out, out):
        cli.refuse_overwrite(path, force, [profile])
    page = cli.Page(html, plotly_js, force, [profile, frontier_out, out])
    opts = cli.options_from(
        PlanOptions,
        locals(),
        stragglers=parse_factors(straggler, "--straggler"),
        idle_power_w=parse_power(idle_power, allow_zero=True).resolve(None),
    )
    with progress("planning", points, quiet=json_out) as advance:
        doc = run_bloat_plan(profile, opts, on_point=lambda k, n: advance(1))
    page.write("powerkit bloat plan", lambda: [bloat_section(doc, str(profile))])
    cli.finish(doc, json_out, _render_plan, written=[html])


@bloat_app.command("run")
@cli.handle_errors
def run_cmd(
    plan_path: Annotated[Path, typer.Option("--plan", help="`bloat plan --out` JSON.")],
    preset: Annotated[str | None, typer.Option(help="sim: pipeline preset to run on.")] = None,
    backend: Annotated[
        LoopBackend, typer.Option(help="live: a training loop's knobs.")
    ] = LoopBackend.sim,
    point: Annotated[
        int | None, typer.Option(min=0, help="Frontier point (default: the all-max-time one).")
    ] = None,
    straggler: Annotated[
        float, typer.Option(min=1.0, help="Another pipeline is this much slower.")
    ] = 1.0,
    iterations: Annotated[int, typer.Option(min=1, help="sim: iterations.")] = 5,
    seed: Annotated[int, typer.Option(min=0, help="sim: seed of the noise.")] = 0,
    trace_out: Annotated[
        Path | None, typer.Option(help="sim: write the plan's simulated power trace (Parquet).")
    ] = None,
    steps_out: Annotated[
        Path | None, typer.Option(help="sim: write that trace's step annotations (JSON lines).")
    ] = None,
    actuator: opt.Actuator = None,
    steps_from: Annotated[
        Path | None, typer.Option(help='live: the loop\'s step lines {"ts", "step"}.')
    ] = None,
    rounds: Annotated[int, typer.Option(min=1, help="live: rounds of both arms.")] = 3,
    arm: Annotated[str, typer.Option(help="live: measured length of each arm.")] = "2m",
    warmup: Annotated[str, typer.Option(help="live: settling time per arm.")] = "30s",
    interval: Annotated[str, typer.Option(help="live: sampling interval.")] = "0.5s",
    gpus: opt.Gpus = None,
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Measure a plan against all-max clocks (time and energy per iteration)."""
    for path in (trace_out, steps_out):
        if backend == Backend.sim and path is not None:
            cli.refuse_overwrite(path, force, [plan_path])
    opts = cli.options_from(
        RunPlanOptions,
        locals(),
        backend=Backend(backend),
        plan=plan_path,
        arm_s=parse_duration(arm),
        warmup_s=parse_duration(warmup, allow_zero=True),
        interval_s=parse_duration(interval),
        gpus=parse_gpus(gpus),
    )
    result = run_plan(
        opts,
        progress=functools.partial(progress, quiet=json_out),
        note=cli.warn,
        info=cli.err.print,
    )
    cli.finish(result, json_out, _render_run)


def _render_run(result: BloatRun) -> None:
    f = format_value
    cli.print_table(RUN_COLUMNS, result.rows())
    if result.saved_j is not None:
        cli.out_console().print(
            f"saved {result.saved_j:,.1f} J per iteration ({f(result.saved_pct, '.1f')}%), time "
            f"{f(result.slowdown_pct, '+.2f')}%"
        )
