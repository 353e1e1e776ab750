"""``powerkit bloat``: stage profiles, the iteration time-energy frontier of a pipeline, and
measuring a plan."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from powerkit.bloat.planner import PlanResult, plan
from powerkit.bloat.profile import read_profile, write_profile
from powerkit.bloat.schedule import build_dag
from powerkit.cli.common import (
    Backend,
    ForceOpt,
    JsonOpt,
    emit_json,
    err,
    handle_errors,
    load_json_doc,
    out_console,
    parse_gpus,
    refuse_overwrite,
    warn,
)
from powerkit.cli.progress import progress
from powerkit.errors import BadInputError
from powerkit.outputs import write_text
from powerkit.units import parse_frequencies, parse_power

__all__ = ["bloat_app"]

bloat_app = typer.Typer(
    help="Energy bloat of pipeline-parallel training: profiles, the frontier, measured plans.",
    no_args_is_help=True,
)


class Schedule(StrEnum):
    """The pipeline schedule."""

    one_f_one_b = "1f1b"
    gpipe = "gpipe"


class Method(StrEnum):
    """How each deadline is solved."""

    auto = "auto"
    exact = "exact"
    relaxed = "relaxed"


@bloat_app.command("profile")
@handle_errors
def profile_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Profile CSV to write.")],
    backend: Annotated[Backend, typer.Option("--backend", help="Where to measure.")] = Backend.sim,
    preset: Annotated[
        str, typer.Option("--preset", help="sim: pipeline preset (a100-gpt3-pp4, a40-bloom-pp8).")
    ] = "a100-gpt3-pp4",
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="nvml: command running one stage's computation, with {stage}, {instruction} "
            "(and {gpu_frequency_mhz}) placeholders; prints JSON lines "
            '{"microbatches": n, "seconds": s}.',
        ),
    ] = None,
    stages: Annotated[
        int | None, typer.Option("--stages", min=1, help="nvml: pipeline stages to profile.")
    ] = None,
    gpu_frequency: Annotated[
        str | None,
        typer.Option("--gpu-frequency", help="nvml: SM clocks (MHz), e.g. 1410:810:60."),
    ] = None,
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="nvml: GPUs one stage runs on (default all).")
    ] = None,
    point: Annotated[str, typer.Option("--point", help="nvml: measured length per point.")] = "20s",
    warmup: Annotated[str, typer.Option("--warmup", help="nvml: discarded start.")] = "5s",
    interval: Annotated[str, typer.Option("--interval", help="nvml: sampling interval.")] = "0.1s",
    force: ForceOpt = False,
) -> None:
    """Write a stage profile: time and energy per stage, instruction and SM frequency."""
    refuse_overwrite(out, force, [])
    if backend is Backend.nvml:
        _nvml_profile(out, run, stages, gpu_frequency, gpus, point, warmup, interval)
        return
    from powerkit.sim.pipeline import get_pipeline_preset, sim_profile

    chosen = get_pipeline_preset(preset)
    profile = sim_profile(chosen)
    write_profile(profile, out)
    freqs = chosen.frequencies()
    err.print(
        f"wrote {out}: {chosen.stages} stages x forward/backward x {freqs.size} frequencies "
        f"({freqs.min():g}-{freqs.max():g} MHz), {chosen.description}"
    )


def _nvml_profile(
    out: Path, run: str | None, stages: int | None, gpu_frequency: str | None,
    gpus: str | None, point: str, warmup: str, interval: str,
) -> None:  # fmt: skip
    import threading

    from powerkit.bloat.measure import measure_profile
    from powerkit.cli.sweep import sweep_config
    from powerkit.sweep.caps import LockedClocks
    from powerkit.telemetry.nvml import NvmlSource
    from powerkit.telemetry.recorder import stop_on_signals

    if not run or stages is None or gpu_frequency is None:
        raise BadInputError(
            "bloat profile --backend nvml needs --run 'COMMAND {stage} {instruction}', --stages "
            "and --gpu-frequency"
        )
    freqs = parse_frequencies(gpu_frequency)
    config = sweep_config(warmup=warmup, point=point, interval=interval, cooldown="0s",
                          repeats=1, seed=0)  # fmt: skip
    source = NvmlSource(parse_gpus(gpus))
    stop = threading.Event()
    total = stages * 2 * len(freqs)
    try:
        with (
            stop_on_signals(stop),
            LockedClocks(source.gpus) as clocks,
            progress("profiling", total) as advance,
        ):
            measured = measure_profile(
                run, stages, freqs, source, clocks, config, stop=stop,
                on_point=lambda note: advance(note=note),
            )  # fmt: skip
    finally:
        source.close()
    for failure in measured.failures:
        warn(failure)
    if measured.interrupted:
        raise BadInputError("interrupted before every stage was measured; no profile written")
    write_profile(measured.profile, out)
    err.print(f"wrote {out}: {stages} stages x forward/backward x {len(freqs)} frequencies")


def plan_doc(result: PlanResult) -> dict[str, Any]:
    """The ``bloat plan --json`` document (also what ``--out`` writes)."""
    dag = result.dag

    def point(p: Any, with_freqs: bool) -> dict[str, Any]:
        doc: dict[str, Any] = {"time_s": p.time_s, "energy_j": p.energy_j}
        if p.lower_bound_j is not None:
            doc["lower_bound_j"] = p.lower_bound_j
            doc["gap_pct"] = p.gap_pct
        if with_freqs:
            doc["frequencies"] = result.frequencies(p).tolist()
        return doc

    return {
        "profile": result.profile.origin,
        "stages": dag.stages,
        "microbatches": dag.microbatches,
        "schedule": dag.schedule,
        "idle_power_w": result.idle_power_w,
        "method": result.method,
        "all_max": point(result.all_max, False),
        "frontier": [point(p, True) for p in result.frontier],
        "intrinsic": {
            "time_s": result.intrinsic.deadline_s,
            "saved_j": result.intrinsic.saved_j,
            "saved_pct": result.intrinsic.saved_pct,
        },
        "extrinsic": [
            {
                "straggler": b.straggler,
                "time_s": b.deadline_s,
                "saved_j": b.saved_j,
                "saved_pct": b.saved_pct,
                "plan": None if b.plan is None else point(b.plan, True),
            }
            for b in result.extrinsic
        ],
        "computations": [
            {"stage": int(s), "instruction": str(i), "microbatch": int(m)}
            for s, i, m in zip(dag.stage, dag.instruction, dag.microbatch, strict=True)
        ],
    }


def _render_plan(doc: dict[str, Any]) -> None:
    out = out_console()
    out.print(
        f"{doc['stages']} stages x {doc['microbatches']} microbatches, {doc['schedule']}, idle "
        f"{doc['idle_power_w']:g} W, method {doc['method']}"
    )
    base = doc["all_max"]
    out.print(f"all max clocks: {base['time_s']:.4f} s, {base['energy_j']:,.1f} J per iteration")
    table = Table("time s", "energy J", "vs all-max", "gap to bound", box=box.SIMPLE_HEAD)
    for p in doc["frontier"]:
        gap = p.get("gap_pct")
        table.add_row(f"{p['time_s']:.4f}", f"{p['energy_j']:,.1f}",
                      f"{100 * (p['energy_j'] / base['energy_j'] - 1):+.1f}%",
                      "-" if gap is None else f"{gap:.2f}%")  # fmt: skip
    out.print(table)
    intr = doc["intrinsic"]
    out.print(f"intrinsic bloat: {intr['saved_j']:,.1f} J ({intr['saved_pct']:.1f}%) per iteration")
    for b in doc["extrinsic"]:
        out.print(
            f"extrinsic bloat, straggler x{b['straggler']:g}: {b['saved_j']:,.1f} J "
            f"({b['saved_pct']:.1f}%)"
        )


@bloat_app.command("plan")
@handle_errors
def plan_cmd(
    profile: Annotated[Path, typer.Argument(help="Stage profile CSV.")],
    stages: Annotated[int, typer.Option("--stages", min=1, help="Pipeline stages.")],
    microbatches: Annotated[
        int, typer.Option("--microbatches", min=1, help="Microbatches per iteration.")
    ],
    schedule: Annotated[
        Schedule, typer.Option("--schedule", help="Pipeline schedule.")
    ] = Schedule.one_f_one_b,
    idle_power: Annotated[
        str, typer.Option("--idle-power", help="Power of a waiting GPU.")
    ] = "75W",
    straggler: Annotated[
        str, typer.Option("--straggler", help="Straggler factors for extrinsic bloat.")
    ] = "1.1,1.2,1.5",
    points: Annotated[int, typer.Option("--points", min=2, help="Deadlines on the frontier.")] = 20,
    method: Annotated[Method, typer.Option("--method", help="How to solve.")] = Method.auto,
    frontier_out: Annotated[
        Path | None, typer.Option("--frontier", help="Write the frontier as CSV.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the plan (JSON) for bloat run.")
    ] = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """The iteration time-energy frontier and the intrinsic and extrinsic bloat it removes."""
    for path in (frontier_out, out):
        if path is not None:
            refuse_overwrite(path, force, [profile])
    try:
        factors = tuple(float(x) for x in straggler.split(",") if x.strip())
    except ValueError:
        raise BadInputError(f"--straggler {straggler!r}: numbers like 1.1,1.2,1.5") from None
    idle = parse_power(idle_power, allow_zero=True).resolve(None)
    with progress("planning", points, quiet=json_out) as advance:
        result = plan(
            read_profile(profile), stages=stages, microbatches=microbatches,
            schedule=schedule.value, idle_power_w=idle, stragglers=factors, points=points,
            method=method.value, on_point=lambda k, n: advance(1),
        )  # fmt: skip
    doc = plan_doc(result)
    if frontier_out is not None:
        lines = ["time_s,energy_j,gap_pct"] + [
            f"{p['time_s']:.9g},{p['energy_j']:.9g},{p.get('gap_pct', '')}" for p in doc["frontier"]
        ]
        write_text(frontier_out, "\n".join(lines) + "\n")
    if out is not None:
        write_text(out, json.dumps(doc) + "\n")
    if json_out:
        emit_json(doc)
    else:
        _render_plan(doc)


@bloat_app.command("run")
@handle_errors
def run_cmd(
    plan_path: Annotated[Path, typer.Option("--plan", help="`bloat plan --out` JSON.")],
    preset: Annotated[str, typer.Option("--preset", help="Pipeline preset to run on.")],
    backend: Annotated[Backend, typer.Option("--backend", help="Where to run.")] = Backend.sim,
    point: Annotated[
        int | None,
        typer.Option("--point", min=0, help="Frontier point (default: the all-max-time one)."),
    ] = None,
    straggler: Annotated[
        float, typer.Option("--straggler", min=1.0, help="Another pipeline is this much slower.")
    ] = 1.0,
    iterations: Annotated[int, typer.Option("--iterations", min=1, help="Iterations.")] = 5,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the noise.")] = 0,
    json_out: JsonOpt = False,
) -> None:
    """Measure a plan against all-max clocks (time and energy per iteration)."""
    if backend is Backend.nvml:
        raise BadInputError(
            "bloat run --backend nvml is not available yet: apply the plan's frequencies in "
            "your training loop (docs/bloat.md) and measure with `powerkit energy --steps`"
        )
    import numpy as np

    from powerkit.sim.pipeline import get_pipeline_preset, measure

    doc = load_json_doc(plan_path, "powerkit bloat plan")
    try:
        frontier, stages = doc["frontier"], int(doc["stages"])
        microbatches, schedule = int(doc["microbatches"]), str(doc["schedule"])
    except (KeyError, TypeError, ValueError):
        raise BadInputError(f"{plan_path}: not a `bloat plan --out` document") from None
    chosen = get_pipeline_preset(preset)
    if chosen.stages != stages:
        raise BadInputError(
            f"{plan_path}: planned for {stages} stages; {preset} has {chosen.stages}"
        )
    # the plan for this straggler's deadline where the planner made one (the cheapest plan
    # that finishes in time: with a straggler, a slower but cheaper plan can be best), else
    # the frontier point at the all-max time, or --point
    chosen_plan = None
    if point is None:
        chosen_plan = next(
            (b["plan"] for b in doc.get("extrinsic", [])
             if b.get("plan") and abs(b["straggler"] - straggler) < 1e-9),
            None,
        )  # fmt: skip
        if chosen_plan is None:
            deadline = straggler * float(doc["all_max"]["time_s"])
            point = max(k for k, p in enumerate(frontier) if p["time_s"] <= deadline + 1e-12)
    if chosen_plan is None:
        assert point is not None
        if point >= len(frontier):
            raise BadInputError(f"--point {point}: the plan has {len(frontier)} points (0-based)")
        chosen_plan = frontier[point]
    dag = build_dag(stages, microbatches, schedule)
    freqs = np.asarray(chosen_plan["frequencies"], dtype=float)
    if freqs.size != dag.size:
        raise BadInputError(
            f"{plan_path}: point {point} has {freqs.size} frequencies, not {dag.size}"
        )
    # planned: the point's energy, plus its GPUs idle until the straggler's iteration ends
    length = max(chosen_plan["time_s"], straggler * float(doc["all_max"]["time_s"]))
    idle_w = float(doc["idle_power_w"]) * stages
    planned_j = chosen_plan["energy_j"] + idle_w * (length - chosen_plan["time_s"])
    planned_run = measure(chosen, dag, freqs, iterations=iterations, straggler=straggler, seed=seed)
    base_run = measure(
        chosen, dag, np.full(dag.size, chosen.f_max_mhz), iterations=iterations,
        straggler=straggler, seed=seed,
    )  # fmt: skip
    saved = base_run.energy_j - planned_run.energy_j
    result: dict[str, Any] = {
        "preset": preset, "point": point, "straggler": straggler, "iterations": iterations,
        "planned": {"time_s": length, "energy_j": planned_j},
        "measured": {"time_s": planned_run.time_s, "energy_j": planned_run.energy_j},
        "all_max_measured": {"time_s": base_run.time_s, "energy_j": base_run.energy_j},
        "saved_j": saved, "saved_pct": 100 * saved / base_run.energy_j,
        "slowdown_pct": 100 * (planned_run.time_s / base_run.time_s - 1),
    }  # fmt: skip
    if json_out:
        emit_json(result)
        return
    table = Table("", "time s", "energy J", box=box.SIMPLE_HEAD)
    table.add_row(
        "all max clocks (measured)", f"{base_run.time_s:.4f}", f"{base_run.energy_j:,.1f}"
    )
    table.add_row("plan (planned)", f"{result['planned']['time_s']:.4f}",
                  f"{result['planned']['energy_j']:,.1f}")  # fmt: skip
    table.add_row("plan (measured)", f"{planned_run.time_s:.4f}", f"{planned_run.energy_j:,.1f}")
    out_console().print(table)
    out_console().print(
        f"saved {saved:,.1f} J per iteration ({result['saved_pct']:.1f}%), time "
        f"{result['slowdown_pct']:+.2f}%"
    )
