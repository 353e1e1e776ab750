"""``powerkit pfi``: per-job power flexibility: cap sweeps, the index, prediction, allocation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli.progress import progress
from powerkit.core.choices import Backend, CvKind, PfiBackend
from powerkit.core.units import list_items, parse_gpus, parse_percent, parse_powers
from powerkit.pfi.allocate import AllocationResult, allocation_columns
from powerkit.pfi.curves import parse_labels
from powerkit.pfi.index import PFI_COLUMNS_PMAX, job_notes
from powerkit.pfi.job import (
    AllocateOptions,
    ComputeOptions,
    PfiReport,
    PfiSweepOptions,
    PfiSweepReport,
    PredictOptions,
    run_allocate,
    run_compute,
    run_pfi_sweep,
    run_predict,
)
from powerkit.pfi.predict import PredictResult, predict_columns
from powerkit.report.pfi_section import allocate_section, compute_section
from powerkit.sweep.job import sweep_config

__all__ = ["pfi_app"]

pfi_app = typer.Typer(
    help="Per-job power flexibility (PFI): cap sweeps, the index, prediction, allocation.",
    no_args_is_help=True,
)


def _render_results(report: PfiReport | PfiSweepReport) -> None:
    cli.print_table(PFI_COLUMNS_PMAX, report.jobs)


@pfi_app.command("sweep")
@cli.handle_errors
def sweep(
    caps: Annotated[
        str, typer.Option(help="Per-GPU caps, e.g. 200W,300W,...,700W or 50%,75%,100%.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Parquet file for the sweep.")],
    backend: Annotated[
        PfiBackend, typer.Option(help="nvml/amdsmi: a running job.")
    ] = PfiBackend.sim,
    point: Annotated[str, typer.Option(help="Measured length of each cap.")] = "10m",
    warmup: Annotated[str, typer.Option(help="Discarded start of each cap.")] = "1m",
    repeats: Annotated[int, typer.Option(min=1, help="Runs of each cap.")] = 1,
    cooldown: Annotated[str, typer.Option(help="Idle time between caps.")] = "0s",
    interval: Annotated[str, typer.Option(help="Power sampling interval.")] = "0.5s",
    seed: Annotated[int, typer.Option(min=0, help="Seed of the order (and of sim).")] = 0,
    preset: Annotated[str, typer.Option(help="sim: workload preset.")] = "h200-dense-pretrain",
    job: Annotated[
        str | None, typer.Option(help="Name of the job (default: the preset's).")
    ] = None,
    run: Annotated[
        str | None, typer.Option(help="cmd: the command that runs the job per cap.")
    ] = None,
    tokens_from: opt.TokensFrom = None,
    gpus: opt.Gpus = None,
    label: Annotated[
        list[str] | None, typer.Option(help="KEY=VALUE group column for the job, e.g. model=moe.")
    ] = None,
    stat: opt.Stat = "top10",
    min_slowdown: opt.MinSlowdown = "1%",
    force: opt.Force = False,
    resume: opt.Resume = False,
    json_out: opt.Json = False,
) -> None:
    """Run one job under each power cap (random order, repeats) and compute its PFI."""
    cli.refuse_overwrite(out, force or resume, [tokens_from])
    timing = sweep_config(
        warmup=warmup, point=point, interval=interval, cooldown=cooldown, repeats=repeats, seed=seed
    )
    opts = cli.options_from(
        PfiSweepOptions,
        locals(),
        backend=Backend(backend),
        caps=parse_powers(caps),
        gpus=parse_gpus(gpus),
        labels=parse_labels(label or []),
        min_slowdown=parse_percent(min_slowdown, "--min-slowdown"),
    )
    report = run_pfi_sweep(
        opts, out, resume=resume, force=force, callbacks=cli.sweep_callbacks(json_out)
    )
    if report is None:  # interrupted: no PFI from part of the caps
        raise typer.Exit(130)
    if not json_out:
        cli.err.print(f"wrote {out}")
    cli.finish(report, json_out, _render_results, warnings=job_notes(report.jobs))


@pfi_app.command("compute")
@cli.handle_errors
def compute(
    paths: Annotated[list[Path], typer.Argument(help="Jobs tables (CSV/Parquet) or sweep files.")],
    stat: opt.Stat = "top10",
    min_slowdown: opt.MinSlowdown = "1%",
    linear_band: Annotated[
        float, typer.Option(callback=opt.number_range(0), help="PFI within this of 1 is linear.")
    ] = 0.05,
    bootstrap: Annotated[
        int, typer.Option(min=0, help="Resamples for the CI (when repeats exist).")
    ] = 2000,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the bootstrap.")] = 0,
    curves_out: Annotated[
        Path | None, typer.Option(help="Write every run as one jobs CSV (for predict/allocate).")
    ] = None,
    split_by: Annotated[
        str | None,
        typer.Option(
            help="Jobs-table column(s) holding another setting (e.g. an SM-clock target): "
            "one job per value."
        ),
    ] = None,
    force: opt.Force = False,
    html: opt.Html = None,
    plotly_js: opt.PlotlyJs = "inline",
    json_out: opt.Json = False,
) -> None:
    """PFI per job: the index, its class, a bootstrap CI, and two alternatives."""
    cli.refuse_overwrite(curves_out, force, paths, "--curves-out")
    page = cli.Page(html, plotly_js, force, [*paths, curves_out])
    columns = list_items(split_by, "--split-by") if split_by else None
    slowdown = parse_percent(min_slowdown, "--min-slowdown")
    opts = ComputeOptions(stat, slowdown, linear_band, bootstrap, seed, columns, curves_out)
    report = run_compute(paths, opts)
    page.write("powerkit pfi compute", lambda: [compute_section(report.jobs)])
    cli.finish(
        report,
        json_out,
        _render_results,
        warnings=job_notes(report.jobs),
        written=[curves_out, html],
    )


def _render_predict(result: PredictResult) -> None:
    out = cli.out_console()
    for line in result.summary():
        out.print(line)
    cli.print_table(predict_columns(result), range(len(result.jobs)), out)


@pfi_app.command("predict")
@cli.handle_errors
def predict(
    train: Annotated[list[Path], typer.Option(help="Jobs tables or sweep files (repeatable).")],
    features: Annotated[
        str, typer.Option(help="Columns, products with *: dram_active*memcpy_util.")
    ] = "dram_active*memcpy_util",
    cv: Annotated[CvKind, typer.Option(help="loo or loco.")] = CvKind.loo,
    cluster_col: Annotated[
        str | None, typer.Option(help="Column naming each job's cluster.")
    ] = None,
    stat: opt.Stat = "top10",
    min_slowdown: opt.MinSlowdown = "1%",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the fitted model (JSON) here.")
    ] = None,
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Fit PFI on telemetry features (OLS) and cross-validate it (LOO or leave-one-cluster-out)."""
    cli.refuse_overwrite(out, force, train)
    slowdown = parse_percent(min_slowdown, "--min-slowdown")
    result = run_predict(train, PredictOptions(features, cv, cluster_col, stat, slowdown, out))
    cli.finish(result, json_out, _render_predict, warnings=result.warnings, written=[out])


def _render_allocation(result: AllocationResult) -> None:
    out = cli.out_console()
    out.print(result.summary())
    cli.print_table(allocation_columns(result.policies), result.cuts, out)
    out.print("gap: share of the equal-weight-to-oracle throughput gap recovered")
    out.print("oracle bound: how far the concave-hull bound (exact optimum) may sit above it")


@pfi_app.command("allocate")
@cli.handle_errors
def allocate_cmd(
    jobs: Annotated[list[Path], typer.Option(help="Jobs tables or sweep files (repeatable).")],
    cut: Annotated[
        str, typer.Option(help="Cut(s) of the summed peak power, e.g. 30% or 0%,10%,20%.")
    ] = "0%,10%,20%,30%,40%",
    policies: Annotated[
        str | None, typer.Option(help="Any of equal,pfi,predicted-pfi,oracle (default all).")
    ] = None,
    workloads: Annotated[int, typer.Option(min=1, help="Synthetic workloads.")] = 500,
    jobs_per_workload: Annotated[
        int, typer.Option(min=1, help="Jobs drawn into each workload.")
    ] = 100,
    size_spread: Annotated[
        float,
        typer.Option(
            callback=opt.number_range(1),
            help="Job sizes log-uniform in 1x..this x (1: as measured).",
        ),
    ] = 1.0,
    features: Annotated[
        str, typer.Option(help="predicted-pfi: features of the LOO predictor.")
    ] = "dram_active*memcpy_util",
    model: Annotated[
        Path | None, typer.Option(help="predicted-pfi: a `pfi predict --out` model.")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the workload draws.")] = 0,
    stat: opt.Stat = "top10",
    min_slowdown: opt.MinSlowdown = "1%",
    html: opt.Html = None,
    plotly_js: opt.PlotlyJs = "inline",
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Share a power cut among jobs: equal-weight, PFI-aware, predicted-PFI-aware, oracle."""
    page = cli.Page(html, plotly_js, force, [*jobs, model])
    cuts = [parse_percent(x, "--cut") for x in list_items(cut, "--cut")]
    opts = cli.options_from(
        AllocateOptions,
        locals(),
        policies=list_items(policies, "--policies") if policies else None,
        min_slowdown=parse_percent(min_slowdown, "--min-slowdown"),
    )
    with progress("allocating", len(cuts), quiet=json_out) as advance:
        result = run_allocate(
            opts,
            note=cli.warn,
            progress=lambda done, total: advance(
                1, f"[{done}/{total}] cut {100 * cuts[done - 1]:g}% done"
            ),
        )
    page.write("powerkit pfi allocate", lambda: [allocate_section(result)])
    cli.finish(result, json_out, _render_allocation, warnings=result.notes, written=[html])
