"""``bloat profile`` on real GPUs and ``bloat run`` of a plan, as library jobs: what they
measure and the document they return, told through callbacks (a progress factory and a
``note`` for what the user must know), callable from Python."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from powerkit.bloat.plan_file import BloatPlan, PlanPoint, chosen_point
from powerkit.bloat.profile import read_profile, write_profile
from powerkit.core.choices import Backend, Method, Schedule, only
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.jsonable import OMIT_NONE
from powerkit.core.outputs import write_text
from powerkit.core.tables import Column
from powerkit.sweep.runner import SweepConfig

__all__ = [
    "RUN_COLUMNS",
    "BloatRun",
    "Measured",
    "PlanOptions",
    "ProfileOptions",
    "Progress",
    "RunPlanOptions",
    "run_bloat_plan",
    "run_plan",
    "run_plan_live",
    "run_plan_sim",
    "run_profile",
]

#: ``progress(label, steps)``: a context giving ``advance(note=...)`` for each step done
Progress = Callable[[str, int], contextlib.AbstractContextManager[Callable[..., None]]]


@contextlib.contextmanager
def _silent(label: str, steps: int) -> Iterator[Callable[..., None]]:
    yield lambda **_: None


def _ignore(text: str) -> None:
    return None


@dataclass(frozen=True)
class ProfileOptions:
    """What ``bloat profile`` is given, its units parsed.

    Attributes:
        backend: ``sim`` (a pipeline preset's model), ``nvml`` or ``amdsmi`` (real GPUs).
        preset: sim: the pipeline preset (``a100-gpt3-pp4``, ``a40-bloom-pp8``).
        run: nvml/amdsmi: the command running one stage's computation, with ``{stage}``,
            ``{instruction}`` (and ``{gpu_frequency_mhz}``) placeholders, printing JSON lines
            ``{"microbatches": n, "seconds": s}``.
        stages: nvml/amdsmi: the pipeline stages to profile.
        gpu_frequency_mhz: nvml/amdsmi: the SM clocks to lock, MHz.
        gpus: nvml/amdsmi: the GPUs one stage runs on (None: all).
        timing: nvml/amdsmi: each point's warm-up, length and sampling interval (default 5 s,
            20 s, 0.1 s), as a :class:`powerkit.sweep.runner.SweepConfig`.
    """

    backend: Backend = Backend.sim
    preset: str = "a100-gpt3-pp4"
    run: str | None = None
    stages: int | None = None
    gpu_frequency_mhz: list[float] | None = None
    gpus: list[int] | None = None
    timing: SweepConfig = field(
        default_factory=lambda: SweepConfig(axes={}, warmup_s=5.0, point_s=20.0, interval_s=0.1)
    )


def run_profile(
    opts: ProfileOptions,
    out: Path,
    *,
    progress: Progress = _silent,
    note: Callable[[str], None] = _ignore,
) -> str:
    """Write the stage profile of ``opts`` to ``out``: time and energy per stage, instruction
    and SM frequency, simulated or measured on real GPUs (clocks locked and put back); return
    what was written, in words."""
    only(
        opts.backend,
        (Backend.nvml, Backend.amdsmi, Backend.sim),
        option("backend"),
        "bloat profile",
    )
    if opts.backend is Backend.sim:
        from powerkit.bloat.pipeline import get_pipeline_preset, sim_profile

        chosen = get_pipeline_preset(opts.preset)
        write_profile(sim_profile(chosen), out)
        freqs = chosen.frequencies()
        return (
            f"wrote {out}: {chosen.stages} stages x forward/backward x {freqs.size} frequencies "
            f"({freqs.min():g}-{freqs.max():g} MHz), {chosen.description}; plan it with "
            f"{option('stages')} {chosen.stages} {option('microbatches')} {chosen.microbatches} "
            f"{option('idle-power')} {chosen.idle_w:g}W"
        )
    return _profile_gpus(opts, out, progress, note)


def _profile_gpus(
    opts: ProfileOptions, out: Path, progress: Progress, note: Callable[[str], None]
) -> str:
    """Measure each stage's instructions at each SM clock on real GPUs."""
    from powerkit.bloat.measure import measure_on_gpus
    from powerkit.telemetry.gpu import AMD, NVIDIA

    run, stages, freqs = opts.run, opts.stages, opts.gpu_frequency_mhz
    if not run or stages is None or freqs is None:
        raise BadInputError(
            f"bloat profile {option('backend')} {opts.backend} needs {option('run')} 'COMMAND "
            f"{{stage}} {{instruction}}', "
            f"{option('stages')} and {option('gpu-frequency')}"
        )
    config = replace(opts.timing, axes={}, cooldown_s=0.0, repeats=1, seed=0)
    vendor = AMD if opts.backend is Backend.amdsmi else NVIDIA
    with progress("profiling", stages * 2 * len(freqs)) as advance:
        measured = measure_on_gpus(
            run, stages, freqs, opts.gpus, vendor, config, lambda text: advance(note=text)
        )
    for failure in measured.failures:
        note(failure)
    if measured.interrupted:
        raise BadInputError("interrupted before every stage was measured; no profile written")
    write_profile(measured.profile, out)
    return f"wrote {out}: {stages} stages x forward/backward x {len(freqs)} frequencies"


@dataclass(frozen=True)
class PlanOptions:
    """What ``bloat plan`` is given, its units parsed.

    Attributes:
        stages: pipeline stages. microbatches: microbatches per iteration.
        schedule: the pipeline schedule (``1f1b``, ``gpipe``).
        idle_power_w: the power of a waiting GPU, W (default 75 W).
        stragglers: slowdown factors of another pipeline, for extrinsic bloat.
        points: deadlines on the frontier. method: how to solve (``auto``, ``lp``, ...).
        frontier_out: the frontier written as CSV here (None: not written).
        out: the plan written as JSON here, for ``bloat run`` (None: not written).
    """

    stages: int
    microbatches: int
    schedule: Schedule = Schedule.one_f_one_b
    idle_power_w: float = 75.0
    stragglers: tuple[float, ...] = (1.1, 1.2, 1.5)
    points: int = 20
    method: Method = Method.auto
    frontier_out: Path | None = None
    out: Path | None = None


def run_bloat_plan(
    profile: Path, opts: PlanOptions, *, on_point: Callable[[int, int], None] | None = None
) -> BloatPlan:
    """The iteration time-energy frontier of the stage profile at ``profile`` and the
    intrinsic and extrinsic bloat it removes (``on_point(done, points)`` as each deadline is
    solved); the files ``opts`` names written."""
    from powerkit.bloat.plan_file import plan_document
    from powerkit.bloat.planner import plan

    result = plan(
        read_profile(profile),
        stages=opts.stages,
        microbatches=opts.microbatches,
        schedule=opts.schedule.value,
        idle_power_w=opts.idle_power_w,
        stragglers=opts.stragglers,
        points=opts.points,
        method=opts.method.value,
        on_point=on_point,
    )
    doc = plan_document(result)  # (the out file is the same document)
    if opts.frontier_out is not None:
        lines = ["time_s,energy_j,gap_pct"] + [
            f"{p.time_s:.9g},{p.energy_j:.9g},{'' if p.gap_pct is None else p.gap_pct}"
            for p in doc.frontier
        ]
        write_text(opts.frontier_out, "\n".join(lines) + "\n")
    if opts.out is not None:
        write_text(opts.out, json.dumps(doc.to_doc()) + "\n")
    return doc


@dataclass(frozen=True)
class Measured:
    """Time and energy per iteration as measured (live: mean power and steps counted too)."""

    time_s: float | None
    energy_j: float | None
    power_w: float | None = field(default=None, metadata=OMIT_NONE)
    steps: int | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, kw_only=True)
class BloatRun(Document):
    """What ``powerkit bloat run`` reports: a plan's point measured against all-max clocks
    (sim: on a simulated pipeline, with what was planned; live: on a running training loop)."""

    COMMAND: ClassVar[str] = "bloat run"

    backend: str
    preset: str | None = field(default=None, metadata=OMIT_NONE)  # sim
    straggler: float | None = field(default=None, metadata=OMIT_NONE)  # sim
    iterations: int | None = field(default=None, metadata=OMIT_NONE)  # sim
    plan: str | None = field(default=None, metadata=OMIT_NONE)  # live: the plan file
    rounds: int | None = field(default=None, metadata=OMIT_NONE)  # live
    planned: Measured | None = field(default=None, metadata=OMIT_NONE)  # sim
    measured: Measured
    all_max_measured: Measured
    saved_j: float | None
    saved_pct: float | None
    slowdown_pct: float | None
    interrupted: bool | None = field(default=None, metadata=OMIT_NONE)  # live
    windows: dict[str, Any] | None = field(default=None, metadata=OMIT_NONE)  # live
    point: int | None = None  # the frontier point (None: the straggler's own plan)
    stages: int | None = field(default=None, metadata=OMIT_NONE)  # live
    microbatches: int | None = field(default=None, metadata=OMIT_NONE)  # live

    def rows(self) -> list[tuple[str, Measured]]:
        """What the table shows: all-max clocks measured, the plan planned (sim), measured."""
        planned = [] if self.planned is None else [("plan (planned)", self.planned)]
        return [
            ("all max clocks (measured)", self.all_max_measured),
            *planned,
            ("plan (measured)", self.measured),
        ]


#: the table of ``bloat run``: a row per (what, Measured) of :meth:`BloatRun.rows`
RUN_COLUMNS = (
    Column("", lambda r: r[0], key=True),
    Column("time s", lambda r: r[1].time_s, ".4f"),
    Column("energy J", lambda r: r[1].energy_j, ",.1f"),
)


@dataclass(frozen=True)
class RunPlanOptions:
    """What ``bloat run`` is given, its units parsed.

    Attributes:
        plan: a ``bloat plan --out`` JSON file.
        backend: ``sim`` (the simulated pipeline) or ``live`` (a training loop's knobs).
        point: the frontier point to run (None: the one for the straggler's deadline).
        straggler: another pipeline is this much slower (1: none).
        preset: sim: the pipeline preset. iterations: sim: iterations per arm (default 5).
        seed: sim: the seed of the noise.
        trace_out, steps_out: sim: the plan's simulated power trace (Parquet) and its step
            annotations (JSON lines), written together (None: not written).
        actuator: live: the loop's knob channel, ``file:PATH``.
        steps_from: live: the loop's step lines ``{"ts", "step"}``.
        rounds: live: rounds of both arms (default 3).
        arm_s, warmup_s: live: each arm's measured length and settling time, s (2 min, 30 s).
        interval_s: live: the sampling interval, s (0.5). gpus: live: GPU indices (None: all).
    """

    plan: Path
    backend: Backend = Backend.sim
    point: int | None = None
    straggler: float = 1.0
    preset: str | None = None
    iterations: int = 5
    seed: int = 0
    trace_out: Path | None = None
    steps_out: Path | None = None
    actuator: str | None = None
    steps_from: Path | None = None
    rounds: int = 3
    arm_s: float = 120.0
    warmup_s: float = 30.0
    interval_s: float = 0.5
    gpus: list[int] | None = None


def run_plan(
    opts: RunPlanOptions,
    *,
    progress: Progress = _silent,
    note: Callable[[str], None] = _ignore,
    info: Callable[[str], None] = _ignore,
) -> BloatRun:
    """``bloat run``: the plan's chosen point (and all-max clocks) measured on the simulated
    pipeline or on a running training loop."""
    from powerkit.bloat.schedule import build_dag

    plan = BloatPlan.read(opts.plan)
    index, chosen = chosen_point(plan, opts.point, opts.straggler)
    dag = build_dag(plan.stages, plan.microbatches, plan.schedule)
    if len(chosen.frequencies) != dag.size:
        raise BadInputError(
            f"{opts.plan}: the chosen point has {len(chosen.frequencies)} frequencies, "
            f"not {dag.size}"
        )
    if opts.backend is Backend.live:
        if not (opts.actuator or "").startswith("file:") or opts.steps_from is None:
            raise BadInputError(
                f"{option('backend')} live needs {option('actuator')} file:PATH and "
                f"{option('steps-from')} FILE"
            )
        arms = {"all_max": plan.all_max.frequencies, "plan": chosen.frequencies}
        live = run_plan_live(
            opts.plan,
            opts.actuator or "",
            opts.steps_from,
            arms,
            opts.rounds,
            opts.arm_s,
            opts.warmup_s,
            opts.interval_s,
            opts.gpus,
            progress=progress,
            note=note,
        )
        return replace(live, point=index, stages=plan.stages, microbatches=plan.microbatches)
    if opts.preset is None:
        raise BadInputError(f"{option('backend')} sim needs {option('preset')} (a pipeline preset)")
    if (opts.trace_out is None) != (opts.steps_out is None):
        raise BadInputError(f"{option('trace-out')} and {option('steps-out')} go together")
    sim = run_plan_sim(
        opts.preset,
        dag,
        chosen,
        opts.straggler,
        opts.iterations,
        opts.seed,
        plan.all_max.time_s,
        plan.idle_power_w,
        opts.trace_out,
        opts.steps_out,
        note=note,
        info=info,
    )
    return replace(sim, point=index)


def run_plan_sim(
    preset: str,
    dag: Any,
    chosen: PlanPoint,
    straggler: float,
    iterations: int,
    seed: int,
    all_max_s: float,
    idle_power_w: float,
    trace_out: Path | None,
    steps_out: Path | None,
    *,
    note: Callable[[str], None] = _ignore,
    info: Callable[[str], None] = _ignore,
) -> BloatRun:
    """Run a plan's point and all-max clocks on the simulated pipeline ``preset``: planned,
    measured, saved. ``note`` hears an idle power the plan did not assume, ``info`` the files
    written with ``trace_out``/``steps_out``."""
    from powerkit.bloat.pipeline import get_pipeline_preset, measure

    sim = get_pipeline_preset(preset)
    if sim.stages != dag.stages:
        raise BadInputError(f"the plan is for {dag.stages} stages; {preset} has {sim.stages}")
    if abs(idle_power_w - sim.idle_w) > 1e-9:
        note(
            f"the plan assumed {idle_power_w:g} W idle power; {preset}'s GPUs idle at "
            f"{sim.idle_w:g} W, so planned and measured energy differ (plan with "
            f"{option('idle-power')} "
            f"{sim.idle_w:g}W)"
        )
    # planned: the point's energy, plus its GPUs idle until the straggler's iteration ends
    length = max(chosen.time_s, straggler * all_max_s)
    planned_j = chosen.energy_j + idle_power_w * dag.stages * (length - chosen.time_s)
    planned = measure(
        sim,
        dag,
        np.asarray(chosen.frequencies, dtype=float),
        iterations=iterations,
        straggler=straggler,
        seed=seed,
        keep=trace_out is not None,
    )
    base = measure(
        sim,
        dag,
        np.full(dag.size, sim.f_max_mhz),
        iterations=iterations,
        straggler=straggler,
        seed=seed,
    )
    if trace_out is not None and steps_out is not None:
        from powerkit.bloat.pipeline import write_run

        write_run(sim, planned, trace_out, steps_out)
        info(f"wrote {trace_out} and {steps_out}")
    saved = base.energy_j - planned.energy_j
    return BloatRun(
        backend="sim",
        preset=preset,
        straggler=straggler,
        iterations=iterations,
        planned=Measured(length, planned_j),
        measured=Measured(planned.time_s, planned.energy_j),
        all_max_measured=Measured(base.time_s, base.energy_j),
        saved_j=saved,
        saved_pct=100 * saved / base.energy_j,
        slowdown_pct=100 * (planned.time_s / base.time_s - 1),
    )


def run_plan_live(
    plan_path: Path,
    actuator: str,
    steps_from: Path,
    frequencies: dict[str, list[float]],
    rounds: int,
    arm_s: float,
    warmup_s: float,
    interval_s: float,
    gpus: list[int] | None,
    *,
    progress: Progress = _silent,
    note: Callable[[str], None] = _ignore,
) -> BloatRun:
    """Alternate a running training loop between a plan's clocks and all-max clocks through
    its knob channel (``actuator``, ``file:PATH``), measuring each arm; the ``bloat run``
    document. The loop is left at all-max clocks."""
    from powerkit.actuation.knobs import KnobChannel
    from powerkit.bloat.live import measure_live
    from powerkit.telemetry.recorder import stop_on_signals
    from powerkit.telemetry.vendors import open_gpu_source

    source = open_gpu_source(gpus)
    stop = threading.Event()
    try:
        with (
            KnobChannel(actuator[5:]) as channel,
            stop_on_signals(stop),
            progress("measuring", 2 * rounds) as advance,
        ):
            live = measure_live(
                channel,
                source,
                steps_from,
                frequencies,
                plan_path=str(plan_path),
                rounds=rounds,
                arm_s=arm_s,
                warmup_s=warmup_s,
                interval_s=interval_s,
                stop=stop,
                on_window=lambda a, w: advance(note=f"{a}: {w['power_w']:.0f} W"),
            )
            channel.write(
                {
                    "bloat_arm": "all_max",
                    "bloat_plan": str(plan_path),
                    "frequencies": frequencies["all_max"],
                }
            )
    finally:
        source.close()
    if live.interrupted:
        note("interrupted; the arms measured so far are reported")
    base, plan_arm = live.arms["all_max"], live.arms["plan"]
    saved = None
    if base.energy_j and plan_arm.energy_j is not None:
        saved = base.energy_j - plan_arm.energy_j
    return BloatRun(
        backend="live",
        plan=str(plan_path),
        rounds=rounds,
        measured=Measured(plan_arm.time_s, plan_arm.energy_j, plan_arm.power_w, plan_arm.steps),
        all_max_measured=Measured(base.time_s, base.energy_j, base.power_w, base.steps),
        saved_j=saved,
        saved_pct=None if saved is None or not base.energy_j else 100 * saved / base.energy_j,
        slowdown_pct=None
        if not (base.time_s and plan_arm.time_s)
        else 100 * (plan_arm.time_s / base.time_s - 1),
        interrupted=live.interrupted,
        windows={a: live.arms[a].windows for a in live.arms},
    )
