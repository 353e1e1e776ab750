"""``powerkit bloat``: stage profiles, the iteration time-energy frontier of a pipeline, and
measuring a plan."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from powerkit.bloat.plan_file import check_plan_doc, chosen_point, plan_doc
from powerkit.bloat.planner import plan
from powerkit.bloat.profile import read_profile, write_profile
from powerkit.bloat.schedule import build_dag
from powerkit.choices import Backend, Method, Schedule, only
from powerkit.cli.common import (
    ForceOpt,
    JsonOpt,
    PlotlyJsOpt,
    emit_json,
    err,
    handle_errors,
    load_json_doc,
    out_console,
    refuse_overwrite,
    warn,
)
from powerkit.cli.progress import progress
from powerkit.documents import stamp
from powerkit.errors import BadInputError
from powerkit.outputs import check_plotly_js, write_text
from powerkit.units import format_value, parse_factors, parse_power

__all__ = ["bloat_app"]

bloat_app = typer.Typer(
    help="Energy bloat of pipeline-parallel training: profiles, the frontier, measured plans.",
    no_args_is_help=True,
)


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
    only(backend, (Backend.nvml, Backend.sim), "--backend", "bloat profile")
    refuse_overwrite(out, force, [])
    if backend is Backend.nvml:
        from powerkit.bloat.job import profile_nvml

        err.print(profile_nvml(out, run, stages, gpu_frequency, gpus, point, warmup, interval,
                               progress=progress, note=warn))  # fmt: skip
        return
    from powerkit.bloat.pipeline import get_pipeline_preset, sim_profile

    chosen = get_pipeline_preset(preset)
    profile = sim_profile(chosen)
    write_profile(profile, out)
    freqs = chosen.frequencies()
    err.print(
        f"wrote {out}: {chosen.stages} stages x forward/backward x {freqs.size} frequencies "
        f"({freqs.min():g}-{freqs.max():g} MHz), {chosen.description}; plan it with "
        f"--stages {chosen.stages} --microbatches {chosen.microbatches} --idle-power "
        f"{chosen.idle_w:g}W"
    )


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
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Write a Plotly page (frontier, stages, timeline)."),
    ] = None,
    plotly_js: PlotlyJsOpt = "inline",
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """The iteration time-energy frontier and the intrinsic and extrinsic bloat it removes."""
    for path in (frontier_out, out, html):
        if path is not None:
            refuse_overwrite(path, force, [profile])
    check_plotly_js(plotly_js, force=force, out=html, inputs=[profile])
    factors = parse_factors(straggler, "--straggler")
    idle = parse_power(idle_power, allow_zero=True).resolve(None)
    with progress("planning", points, quiet=json_out) as advance:
        result = plan(
            read_profile(profile), stages=stages, microbatches=microbatches,
            schedule=schedule.value, idle_power_w=idle, stragglers=factors, points=points,
            method=method.value, on_point=lambda k, n: advance(1),
        )  # fmt: skip
    doc = stamp("bloat plan", plan_doc(result))  # (the --out file is the same document)
    if frontier_out is not None:
        lines = ["time_s,energy_j,gap_pct"] + [
            f"{p['time_s']:.9g},{p['energy_j']:.9g},{p.get('gap_pct', '')}" for p in doc["frontier"]
        ]
        write_text(frontier_out, "\n".join(lines) + "\n")
    if out is not None:
        write_text(out, json.dumps(doc) + "\n")
    if html is not None:
        from powerkit.report.bloat_section import bloat_section
        from powerkit.report.page import write_page

        write_page(html, "powerkit bloat plan", [bloat_section(doc, str(profile))], plotly_js)
        if not json_out:
            err.print(f"wrote {html}")
    if json_out:
        emit_json(doc, "bloat plan")
    else:
        _render_plan(doc)


@bloat_app.command("run")
@handle_errors
def run_cmd(
    plan_path: Annotated[Path, typer.Option("--plan", help="`bloat plan --out` JSON.")],
    preset: Annotated[
        str | None, typer.Option("--preset", help="sim: pipeline preset to run on.")
    ] = None,
    backend: Annotated[
        Backend, typer.Option("--backend", help="sim, or live (a training loop's knobs).")
    ] = Backend.sim,
    point: Annotated[
        int | None,
        typer.Option("--point", min=0, help="Frontier point (default: the all-max-time one)."),
    ] = None,
    straggler: Annotated[
        float, typer.Option("--straggler", min=1.0, help="Another pipeline is this much slower.")
    ] = 1.0,
    iterations: Annotated[int, typer.Option("--iterations", min=1, help="sim: iterations.")] = 5,
    seed: Annotated[int, typer.Option("--seed", min=0, help="sim: seed of the noise.")] = 0,
    trace_out: Annotated[
        Path | None,
        typer.Option("--trace-out", help="sim: write the plan's simulated power trace (Parquet)."),
    ] = None,
    steps_out: Annotated[
        Path | None,
        typer.Option("--steps-out", help="sim: write that trace's step annotations (JSON lines)."),
    ] = None,
    actuator: Annotated[
        str | None, typer.Option("--actuator", help="live: file:PATH of the knob channel.")
    ] = None,
    steps_from: Annotated[
        Path | None,
        typer.Option("--steps-from", help='live: the loop\'s step lines {"ts", "step"}.'),
    ] = None,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="live: rounds of both arms.")] = 3,
    arm: Annotated[str, typer.Option("--arm", help="live: measured length of each arm.")] = "2m",
    warmup: Annotated[str, typer.Option("--warmup", help="live: settling time per arm.")] = "30s",
    interval: Annotated[str, typer.Option("--interval", help="live: sampling interval.")] = "0.5s",
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="live: NVML GPUs to measure (default all).")
    ] = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Measure a plan against all-max clocks (time and energy per iteration)."""
    only(backend, (Backend.sim, Backend.live), "--backend", "bloat run")
    doc = check_plan_doc(load_json_doc(plan_path, "powerkit bloat plan"), plan_path)
    index, chosen, stages = chosen_point(doc, plan_path, point, straggler)
    try:
        microbatches, schedule = int(doc["microbatches"]), str(doc["schedule"])
        all_max_freqs = doc["all_max"].get("frequencies")
        idle_power_w, all_max_s = float(doc["idle_power_w"]), float(doc["all_max"]["time_s"])
    except (KeyError, TypeError, ValueError, AttributeError):
        raise BadInputError(f"{plan_path}: not a `bloat plan --out` document") from None
    dag = build_dag(stages, microbatches, schedule)
    freqs = list(chosen["frequencies"])
    if len(freqs) != dag.size:
        raise BadInputError(
            f"{plan_path}: the chosen point has {len(freqs)} frequencies, not {dag.size}"
        )
    if backend is Backend.live:
        if not (actuator or "").startswith("file:") or steps_from is None:
            raise BadInputError("--backend live needs --actuator file:PATH and --steps-from FILE")
        if all_max_freqs is None:
            raise BadInputError(f"{plan_path}: written by an older powerkit; plan it again")
        arms = {"all_max": all_max_freqs, "plan": freqs}
        from powerkit.bloat.job import run_plan_live

        result = run_plan_live(plan_path, actuator or "", steps_from, arms, rounds, arm, warmup,
                               interval, gpus, progress=functools.partial(progress, quiet=json_out),
                               note=warn)  # fmt: skip
        result.update({"point": index, "stages": stages, "microbatches": microbatches})
    else:
        if preset is None:
            raise BadInputError("--backend sim needs --preset (a pipeline preset)")
        for path in (trace_out, steps_out):
            if path is not None:
                refuse_overwrite(path, force, [plan_path])
        if (trace_out is None) != (steps_out is None):
            raise BadInputError("--trace-out and --steps-out go together")
        from powerkit.bloat.job import run_plan_sim

        result = run_plan_sim(
            preset, dag, chosen, freqs, straggler, iterations, seed, all_max_s, idle_power_w,
            trace_out, steps_out, note=warn, info=err.print,
        )  # fmt: skip
        result["point"] = index
    if json_out:
        emit_json(result, "bloat run")
        return
    _render_run(result)


def _render_run(result: dict[str, Any]) -> None:
    table = Table("", "time s", "energy J", box=box.SIMPLE_HEAD)
    f = format_value
    base, measured = result["all_max_measured"], result["measured"]
    table.add_row(
        "all max clocks (measured)", f(base["time_s"], ".4f"), f(base["energy_j"], ",.1f")
    )
    if "planned" in result:
        table.add_row("plan (planned)", f(result["planned"]["time_s"], ".4f"),
                      f(result["planned"]["energy_j"], ",.1f"))  # fmt: skip
    table.add_row("plan (measured)", f(measured["time_s"], ".4f"), f(measured["energy_j"], ",.1f"))
    out_console().print(table)
    if result["saved_j"] is not None:
        out_console().print(
            f"saved {result['saved_j']:,.1f} J per iteration ({result['saved_pct']:.1f}%), time "
            f"{f(result['slowdown_pct'], '+.2f')}%"
        )
