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
    emit_json,
    err,
    handle_errors,
    number_range,
    out_console,
    refuse_overwrite,
    run_sweep_job,
    warn,
)
from powerkit.cli.progress import progress
from powerkit.errors import BadInputError
from powerkit.outputs import atomic_path
from powerkit.pfi.allocate import POLICIES, AllocationResult, allocate, jobs_from_curves
from powerkit.pfi.curves import (
    curves_frame,
    load_curves,
    parse_labels,
    parse_stat,
)
from powerkit.pfi.index import PfiResult, compute_all
from powerkit.pfi.predict import PredictResult, fit, parse_features, predicted_pfi
from powerkit.report import write_page
from powerkit.report.pfi_section import PFI_HEADER, allocate_section, compute_section, pfi_row
from powerkit.sweep.backends import (
    PointRun,
    make_backend,
)
from powerkit.sweep.job import sweep_config
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


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def _render_results(results: list[PfiResult]) -> None:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for head in [*PFI_HEADER, "P_max W"]:
        table.add_column(
            head, no_wrap=True, justify="left" if head in ("job", "class") else "right"
        )
    for r in results:
        table.add_row(*pfi_row(r), format_value(r.p_max_w, ".0f"))
    out_console().print(table)
    for r in results:
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
    curves = load_curves([out], stat)
    results = compute_all(curves, slowdown, 0.05, 2000, seed)
    if json_out:
        emit_json(
            {"jobs": [r.as_json() for r in results], "stat": stat, "out": str(out)}, "pfi sweep"
        )
    else:
        _render_results(results)


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
    curves = load_curves(paths, stat, columns)
    results = compute_all(
        curves, parse_percent(min_slowdown, "--min-slowdown"), linear_band, bootstrap, seed
    )
    if curves_out is not None:
        with atomic_path(curves_out) as tmp:
            curves_frame(curves).write_csv(tmp)
        if not json_out:
            err.print(f"wrote {curves_out}")
    if html is not None:
        write_page(html, "powerkit pfi compute", [compute_section(results)], plotly_js)
        if not json_out:
            err.print(f"wrote {html}")
    if json_out:
        emit_json(
            {
                "jobs": [r.as_json() for r in results],
                "stat": parse_stat(stat),
                "min_slowdown": parse_percent(min_slowdown),
                "linear_band": linear_band,
            },
            "pfi compute",
        )
    else:
        _render_results(results)


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
    names = parse_features(features)
    curves = load_curves(train, stat)
    results = compute_all(curves, parse_percent(min_slowdown, "--min-slowdown"), 0.05, None, 0)
    result = fit(curves, results, names, cv.value, cluster_col)
    for message in result.warnings:
        warn(message)
    if out is not None:
        result.model.save(out)
        if not json_out:
            err.print(f"wrote {out}")
    if json_out:
        emit_json(result.as_json(), "pfi predict")
    else:
        _render_predict(result)


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
    if not cuts:
        raise BadInputError("--cut: give at least one cut, e.g. 30%")
    curves = load_curves(jobs, stat)
    results = compute_all(curves, parse_percent(min_slowdown, "--min-slowdown"), 0.05, None, 0)
    chosen = [p.strip() for p in policies.split(",") if p.strip()] if policies else list(POLICIES)
    predicted = None
    if "predicted-pfi" in chosen:
        predicted = predicted_pfi(curves, results, parse_features(features), model,
                                  required=bool(policies), note=warn)  # fmt: skip
        if predicted is None:
            chosen.remove("predicted-pfi")
    alloc_jobs = jobs_from_curves(curves, results, predicted)

    with progress("allocating", len(cuts), quiet=json_out) as advance:
        result = allocate(
            alloc_jobs,
            cuts,
            chosen,
            workloads=workloads,
            jobs_per_workload=jobs_per_workload,
            seed=seed,
            size_spread=size_spread,
            progress=lambda done, total: advance(
                1, f"[{done}/{total}] cut {100 * cuts[done - 1]:g}% done"
            ),
        )
    if html is not None:
        write_page(html, "powerkit pfi allocate", [allocate_section(result)], plotly_js)
        if not json_out:
            err.print(f"wrote {html}")
    if json_out:
        emit_json(result.as_json(), "pfi allocate")
    else:
        _render_allocation(result)
