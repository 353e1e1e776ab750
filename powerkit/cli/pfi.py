"""``powerkit pfi``: per-job power flexibility: cap sweeps, the index, prediction, allocation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from powerkit.choices import Backend, CvKind, only
from powerkit.cli.common import (
    ForceOpt,
    JsonOpt,
    PlotlyJsOpt,
    ResumeOpt,
    finish,
    handle_errors,
    number_range,
    out_console,
    print_table,
    refuse_overwrite,
    run_sweep_job,
    warn,
)
from powerkit.cli.progress import progress
from powerkit.errors import BadInputError
from powerkit.pfi.allocate import AllocationResult
from powerkit.pfi.curves import parse_labels, parse_stat
from powerkit.pfi.index import PFI_COLUMNS
from powerkit.pfi.job import (
    AllocateOptions,
    PfiReport,
    PfiSweepReport,
    run_allocate,
    run_compute,
    run_predict,
)
from powerkit.pfi.predict import PredictResult
from powerkit.report import write_page
from powerkit.report.pfi_section import allocate_section, compute_section
from powerkit.sweep.backends import (
    PointRun,
    make_backend,
)
from powerkit.sweep.job import sweep_config
from powerkit.tables import Column
from powerkit.units import format_value, parse_gpus, parse_percent, parse_powers

__all__ = ["pfi_app"]

pfi_app = typer.Typer(
    help="Per-job power flexibility (PFI): cap sweeps, the index, prediction, allocation.",
    no_args_is_help=True,
)


StatOpt = Annotated[
    str,
    typer.Option(
        "--stat", help="Steady-state power of a sweep point: topN (mean of top N %), mean, median."
    ),
]
MinSlowdownOpt = Annotated[
    str,
    typer.Option(
        "--min-slowdown", help="A cap counts only if it changed throughput by more than this."
    ),
]


def _render_results(report: PfiReport | PfiSweepReport) -> None:
    print_table((*PFI_COLUMNS, Column("P_max W", "p_max_w", ".0f")), report.jobs)
    for r in report.jobs:
        for note in r.notes:
            warn(f"{r.job}: {note}")


@pfi_app.command("sweep")
@handle_errors
def sweep(
    caps: Annotated[
        str, typer.Option("--caps", help="Per-GPU caps, e.g. 200W,300W,...,700W or 50%,75%,100%.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Parquet file for the sweep.")],
    backend: Annotated[
        Backend, typer.Option("--backend", help="sim, nvml (a running job) or cmd.")
    ] = Backend.sim,
    point: Annotated[str, typer.Option("--point", help="Measured length of each cap.")] = "10m",
    warmup: Annotated[str, typer.Option("--warmup", help="Discarded start of each cap.")] = "1m",
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Runs of each cap.")] = 1,
    cooldown: Annotated[str, typer.Option("--cooldown", help="Idle time between caps.")] = "0s",
    interval: Annotated[str, typer.Option("--interval", help="Power sampling interval.")] = "0.5s",
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the order (and of sim).")] = 0,
    preset: Annotated[
        str, typer.Option("--preset", help="sim: workload preset.")
    ] = "h200-dense-pretrain",
    job: Annotated[
        str | None, typer.Option("--job", help="Name of the job (default: the preset's).")
    ] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="cmd: the command that runs the job per cap.")
    ] = None,
    tokens_from: Annotated[
        Path | None,
        typer.Option("--tokens-from", help="nvml/cmd: JSON-lines file with cumulative tokens."),
    ] = None,
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="nvml/cmd: NVML GPU indices (default all).")
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="KEY=VALUE group column for the job, e.g. model=moe."),
    ] = None,
    stat: StatOpt = "top10",
    min_slowdown: MinSlowdownOpt = "1%",
    force: ForceOpt = False,
    resume: ResumeOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run one job under each power cap (random order, repeats) and compute its PFI."""
    only(backend, (Backend.sim, Backend.nvml, Backend.cmd), "--backend", "pfi sweep")
    refuse_overwrite(out, force or resume, [tokens_from])
    labels = parse_labels(label or [])
    stat = parse_stat(stat)
    slowdown = parse_percent(min_slowdown, "--min-slowdown")
    config = sweep_config(
        warmup=warmup,
        point=point,
        interval=interval,
        cooldown=cooldown,
        repeats=repeats,
        seed=seed,
    )
    # (every cap of a repeat runs the same simulated job: only the cap differs)
    engine, source = make_backend(backend, preset=preset, seed=seed, common_seed=True, run=run,
                                  gpus=parse_gpus(gpus), tokens_from=tokens_from)  # fmt: skip
    plate = engine.devices[0].nameplate_w if engine.devices else None
    values = parse_powers(caps, plate)
    if len(values) < 2:
        raise BadInputError(
            f"--caps {caps!r}: give at least two caps (the highest is the reference)"
        )
    config.axes = {"power_cap_w": values}
    if plate is not None and max(values) < plate:
        warn(
            f"the highest cap ({max(values):g} W) is below the nameplate ({plate:g} W): it is "
            "the reference run, so PFI compares against a capped job"
        )

    def describe(result: PointRun) -> str:
        cap = result.point.power_cap_w
        state = (
            f"failed: {result.error}"
            if result.error
            else f"{result.power_w.sum(axis=0).mean():.1f} W, "
            f"{format_value(result.tokens_per_s, ',.1f')} tok/s"
        )
        return f"cap {cap:g} W: {state}"

    written = run_sweep_job(
        engine,
        config,
        source,
        out,
        json_out=json_out,
        describe=describe,
        job=job or (preset if backend is Backend.sim else None),
        labels=labels,
        resume=resume,
        force=force,
    )
    if written != out:  # interrupted: no PFI from part of the caps
        raise typer.Exit(130)
    computed = run_compute([out], stat=stat, min_slowdown=slowdown, seed=seed)
    finish(PfiSweepReport(computed.jobs, stat, str(out)), json_out, _render_results)


@pfi_app.command("compute")
@handle_errors
def compute(
    paths: Annotated[list[Path], typer.Argument(help="Jobs tables (CSV/Parquet) or sweep files.")],
    stat: StatOpt = "top10",
    min_slowdown: MinSlowdownOpt = "1%",
    linear_band: Annotated[
        float,
        typer.Option(
            "--linear-band", callback=number_range(0), help="PFI within this of 1 is linear."
        ),
    ] = 0.05,
    bootstrap: Annotated[
        int,
        typer.Option("--bootstrap", min=0, help="Resamples for the CI (when repeats exist)."),
    ] = 2000,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the bootstrap.")] = 0,
    curves_out: Annotated[
        Path | None,
        typer.Option(
            "--curves-out", help="Write every run as one jobs CSV (for predict/allocate)."
        ),
    ] = None,
    split_by: Annotated[
        str | None,
        typer.Option(
            "--split-by",
            help="Jobs-table column(s) holding another setting (e.g. an SM-clock target): "
            "one job per value.",
        ),
    ] = None,
    force: ForceOpt = False,
    html: Annotated[Path | None, typer.Option("--html", help="Write a Plotly page here.")] = None,
    plotly_js: PlotlyJsOpt = "inline",
    json_out: JsonOpt = False,
) -> None:
    """PFI per job: the index, its class, a bootstrap CI, and two alternatives."""
    refuse_overwrite(curves_out, force, paths, "--curves-out")
    refuse_overwrite(html, force, [*paths, curves_out], "--html")
    columns = [c.strip() for c in split_by.split(",") if c.strip()] if split_by else None
    slowdown = parse_percent(min_slowdown, "--min-slowdown")
    report = run_compute(paths, stat=stat, min_slowdown=slowdown, linear_band=linear_band,
                         bootstrap=bootstrap, seed=seed, split_by=columns,
                         curves_out=curves_out)  # fmt: skip
    if html is not None:
        write_page(html, "powerkit pfi compute", [compute_section(report.jobs)], plotly_js)
    finish(report, json_out, _render_results, written=[curves_out, html])


def _render_predict(result: PredictResult) -> None:
    out = out_console()
    terms = " + ".join(
        f"{c:.4g}·{f}"
        for f, c in zip(result.model.features, result.model.coefficients, strict=True)
    )
    out.print(f"PFI ≈ {result.model.intercept:.4g} + {terms}   (n = {len(result.jobs)})")
    out.print(
        f"in-sample R² {format_value(result.r2, '.3f')}; {result.cv.upper()} "
        f"({result.folds} folds): R² {format_value(result.cv_r2, '.3f')}, "
        f"RMSE {format_value(result.cv_rmse, '.3f')}, "
        f"Spearman {format_value(result.cv_spearman, '.3f')}"
    )
    table = Table("job", "PFI", "fitted", "predicted (CV)", box=box.SIMPLE_HEAD, pad_edge=False)
    if result.clusters:
        table.add_column("cluster")
    for i, job in enumerate(result.jobs):
        row = [job, f"{result.pfi[i]:.2f}", f"{result.fitted[i]:.2f}", f"{result.predicted[i]:.2f}"]
        if result.clusters:
            row.append(result.clusters[i])
        table.add_row(*row)
    out.print(table)


@pfi_app.command("predict")
@handle_errors
def predict(
    train: Annotated[
        list[Path], typer.Option("--train", help="Jobs tables or sweep files (repeatable).")
    ],
    features: Annotated[
        str,
        typer.Option("--features", help="Columns, products with *: dram_active*memcpy_util."),
    ] = "dram_active*memcpy_util",
    cv: Annotated[CvKind, typer.Option("--cv", help="loo or loco.")] = CvKind.loo,
    cluster_col: Annotated[
        str | None, typer.Option("--cluster-col", help="Column naming each job's cluster.")
    ] = None,
    stat: StatOpt = "top10",
    min_slowdown: MinSlowdownOpt = "1%",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the fitted model (JSON) here.")
    ] = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Fit PFI on telemetry features (OLS) and cross-validate it (LOO or leave-one-cluster-out)."""
    refuse_overwrite(out, force, train)
    result = run_predict(train, features=features, cv=cv.value, cluster_col=cluster_col,
                         stat=stat, min_slowdown=parse_percent(min_slowdown, "--min-slowdown"),
                         out=out)  # fmt: skip
    finish(result, json_out, _render_predict, warnings=result.warnings, written=[out])


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def _render_allocation(result: AllocationResult) -> None:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    table.add_column("cut", justify="right")
    for p in result.policies:
        table.add_column(f"{p} tok/s (gap)", justify="right", no_wrap=True)
    table.add_column("oracle bound", justify="right")
    for c in result.cuts:
        table.add_row(
            f"{100 * c.cut:g}%",
            *[f"{c.tokens_per_s[p]:,.0f} ({_pct(c.gap_recovered[p])})" for p in result.policies],
            f"{100 * c.oracle_gap_bound:.2f}%",
        )
    out = out_console()
    out.print(
        f"{result.workloads} workloads x {result.jobs_per_workload} jobs (seed {result.seed}); "
        f"uncapped {result.uncapped_tokens_per_s:,.0f} tok/s per workload"
    )
    out.print(table)
    out.print("gap: share of the equal-weight-to-oracle throughput gap recovered")
    out.print("oracle bound: how far the concave-hull bound (exact optimum) may sit above it")
    for note in result.notes:
        warn(note)


@pfi_app.command("allocate")
@handle_errors
def allocate_cmd(
    jobs: Annotated[
        list[Path], typer.Option("--jobs", help="Jobs tables or sweep files (repeatable).")
    ],
    cut: Annotated[
        str, typer.Option("--cut", help="Cut(s) of the summed peak power, e.g. 30% or 0%,10%,20%.")
    ] = "0%,10%,20%,30%,40%",
    policies: Annotated[
        str | None,
        typer.Option("--policies", help="Any of equal,pfi,predicted-pfi,oracle (default all)."),
    ] = None,
    workloads: Annotated[
        int, typer.Option("--workloads", min=1, help="Synthetic workloads.")
    ] = 500,
    jobs_per_workload: Annotated[
        int, typer.Option("--jobs-per-workload", min=1, help="Jobs drawn into each workload.")
    ] = 100,
    size_spread: Annotated[
        float,
        typer.Option(
            "--size-spread",
            callback=number_range(1),
            help="Job sizes log-uniform in 1x..this x (1: as measured).",
        ),
    ] = 1.0,
    features: Annotated[
        str,
        typer.Option("--features", help="predicted-pfi: features of the LOO predictor."),
    ] = "dram_active*memcpy_util",
    model: Annotated[
        Path | None, typer.Option("--model", help="predicted-pfi: a `pfi predict --out` model.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the workload draws.")] = 0,
    stat: StatOpt = "top10",
    min_slowdown: MinSlowdownOpt = "1%",
    html: Annotated[Path | None, typer.Option("--html", help="Write a Plotly page here.")] = None,
    plotly_js: PlotlyJsOpt = "inline",
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Share a power cut among jobs: equal-weight, PFI-aware, predicted-PFI-aware, oracle."""
    refuse_overwrite(html, force, [*jobs, model], "--html")
    cuts = [parse_percent(x, "--cut") for x in cut.split(",") if x.strip()]
    opts = AllocateOptions(
        jobs=jobs, cuts=cuts,
        policies=[p.strip() for p in policies.split(",") if p.strip()] if policies else None,
        workloads=workloads, jobs_per_workload=jobs_per_workload, size_spread=size_spread,
        features=features, model=model, seed=seed, stat=stat,
        min_slowdown=parse_percent(min_slowdown, "--min-slowdown"),
    )  # fmt: skip
    with progress("allocating", len(cuts), quiet=json_out) as advance:
        result = run_allocate(opts, note=warn, progress=lambda done, total: advance(
            1, f"[{done}/{total}] cut {100 * cuts[done - 1]:g}% done"))  # fmt: skip
    if html is not None:
        write_page(html, "powerkit pfi allocate", [allocate_section(result)], plotly_js)
    finish(result, json_out, _render_allocation, written=[html])
