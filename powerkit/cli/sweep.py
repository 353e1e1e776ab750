"""``powerkit sweep``: which knob moves power, and at what cost in throughput."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.core.choices import Backend, JobBackend
from powerkit.core.errors import BadInputError
from powerkit.core.units import (
    parse_counts,
    parse_frequencies,
    parse_gpus,
    parse_powers,
)
from powerkit.report.sweep_section import sweep_section
from powerkit.sweep.authority import AUTHORITY_COLUMNS, SweepReport, analyse, point_columns
from powerkit.sweep.job import SweepOptions, open_sweep, run_and_store, sweep_config
from powerkit.sweep.optimal import OPTIMAL_COLUMNS, optimal_settings, parse_objectives
from powerkit.sweep.plan import KNOB_MAX, KNOBS
from powerkit.sweep.runner import SweepData, read_sweep, unfinished_note

__all__ = ["sweep_app"]

sweep_app = typer.Typer(help="Actuator-authority sweeps across group size, concurrency, cap.")


def _ladder(text: str | None, name: str) -> list[int] | None:
    if text is None:
        return None
    return parse_counts(text, name, KNOB_MAX[name[2:].replace("-", "_")])


def render(report: SweepReport) -> None:
    """Print the point table and the authority table (and the optimal settings)."""
    out = cli.out_console()
    varied = [k for k in KNOBS if len({getattr(p, k) for p in report.points}) > 1]
    cli.print_table(point_columns(varied), report.points, out)
    cli.print_table(AUTHORITY_COLUMNS, report.authority, out)
    if report.optimal:
        cli.print_table(OPTIMAL_COLUMNS, report.optimal, out)
    for failure in report.failures:
        values = {k: getattr(failure, k) for k in KNOBS}
        knobs = ", ".join(f"{k}={v:g}" for k, v in values.items() if v is not None)
        cli.warn(f"run {failure.order + 1} ({knobs}): {failure.error}")


def _emit(
    data: SweepData,
    json_out: bool,
    page: cli.Page,
    objectives: list[tuple[str, float | None]] | None = None,
) -> None:
    report = analyse(data)
    if objectives is not None:
        report = dataclasses.replace(report, optimal=optimal_settings(report, objectives))
    page.write("powerkit sweep", lambda: [sweep_section(report, data.config.varied())])
    cli.finish(report, json_out, render, written=[page.html])


@sweep_app.callback(invoke_without_command=True)
@cli.handle_errors
def sweep(
    ctx: typer.Context,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Parquet file for the sweep.")
    ] = None,
    backend: Annotated[JobBackend, typer.Option(help="Where the job runs.")] = JobBackend.sim,
    group_size: Annotated[str | None, typer.Option(help="Settings, e.g. 4,8,16.")] = None,
    concurrency: Annotated[str | None, typer.Option(help="Settings, e.g. 1,2,4,8.")] = None,
    power_cap: Annotated[str | None, typer.Option(help="Caps, e.g. 200W,300W,75%.")] = None,
    gpu_frequency: Annotated[
        str | None,
        typer.Option(help="Locked SM clocks (MHz), e.g. 1980,1600,1200 or 1980:1200:195."),
    ] = None,
    point: Annotated[str, typer.Option(help="Measured length of each point.")] = "60s",
    warmup: Annotated[str, typer.Option(help="Discarded start of each point.")] = "10s",
    repeats: Annotated[int, typer.Option(min=1, help="Runs of each setting.")] = 1,
    cooldown: Annotated[str, typer.Option(help="Idle time between points.")] = "0s",
    interval: Annotated[str, typer.Option(help="Power sampling interval.")] = "0.5s",
    seed: Annotated[int, typer.Option(min=0, help="Seed of the order (and of sim).")] = 0,
    preset: Annotated[str, typer.Option(help="sim: workload preset.")] = "a100-7b",
    run: Annotated[str | None, typer.Option(help="cmd: command with {knob} placeholders.")] = None,
    actuator: opt.Actuator = None,
    tokens_from: opt.TokensFrom = None,
    gpus: opt.Gpus = None,
    force: opt.Force = False,
    resume: opt.Resume = False,
    html: opt.Html = None,
    plotly_js: opt.PlotlyJs = "inline",
    json_out: opt.Json = False,
) -> None:
    """Run a workload at every knob setting (random order, repeats) and measure its power."""
    if ctx.invoked_subcommand is not None:
        return
    if out is None:
        raise BadInputError("--out is needed (the Parquet file the sweep is written to)")
    cli.refuse_overwrite(out, force or resume, [tokens_from])
    page = cli.Page(html, plotly_js, force, [out, tokens_from])
    opts = SweepOptions(
        Backend(backend),
        _ladder(group_size, "--group-size"),
        _ladder(concurrency, "--concurrency"),
        None if power_cap is None else parse_powers(power_cap),
        None if gpu_frequency is None else parse_frequencies(gpu_frequency),
        sweep_config(
            warmup=warmup,
            point=point,
            interval=interval,
            cooldown=cooldown,
            repeats=repeats,
            seed=seed,
        ),
        preset,
        run,
        actuator,
        parse_gpus(gpus),
        tokens_from,
    )
    runner, source, config = open_sweep(opts)
    callbacks = cli.sweep_callbacks(json_out)
    written = run_and_store(
        runner, config, source, out, resume=resume, force=force, callbacks=callbacks
    )
    if written == out and not json_out:
        cli.err.print(f"wrote {out}")
    # Analyse what was stored, so that `sweep show` on the file says exactly the same.
    _emit(read_sweep(written), json_out, page)


@sweep_app.command("show")
@cli.handle_errors
def show(
    path: Annotated[Path, typer.Argument(help="A sweep Parquet file.")],
    optimal: Annotated[
        str | None, typer.Option(help="energy, cost or cost:ETA: the setting to run at.")
    ] = None,
    html: opt.Html = None,
    plotly_js: opt.PlotlyJs = "inline",
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Re-analyse a stored sweep."""
    objectives = None if optimal is None else parse_objectives(optimal)
    if not path.exists():
        raise BadInputError(f"{path}: no such file")
    page = cli.Page(html, plotly_js, force, [path])
    data = read_sweep(path)
    note = unfinished_note(data, path)
    if note is not None:
        cli.warn(note)
    _emit(data, json_out, page, objectives)
