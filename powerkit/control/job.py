"""``control train`` and ``control run`` as library jobs: a policy trained on the simulated job
or a replayed trace, and a trained policy in the loop on the simulated job or on real GPUs
with its fallback, callable from Python."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from powerkit.actuation.knobs import KnobChannel
from powerkit.control.env import OBS_SPEC, RewardWeights, nominal_lengths
from powerkit.control.evaluate import Episode
from powerkit.control.judge import ARMS, EvalReport, evaluate_policy
from powerkit.control.live import Decision, LoopConfig, NvmlPlant, SimPlant, control_loop, write_run
from powerkit.control.train import (
    TrainResult,
    env_factory,
    load_policy,
    nameplate_w,
    spec_nameplate_w,
    train_policy,
    train_seeds,
    with_inputs,
)
from powerkit.core.choices import Backend
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.outputs import unfinished_path
from powerkit.core.units import PowerSpec, list_items
from powerkit.sim import DRIFTS, GrpoSim, get_preset
from powerkit.telemetry.recorder import stop_on_signals

__all__ = [
    "EvalOptions",
    "RunOptions",
    "RunResult",
    "TrainOptions",
    "evaluation_arms",
    "run_evaluation",
    "run_policy",
    "run_training",
]


@dataclass(frozen=True)
class RunOptions:
    """What ``control run`` is given, its units parsed.

    Attributes:
        policy: the policy file (``control train --out``).
        backend: ``nvml`` (real GPUs, the job's knob channel) or ``sim``.
        budget: a power, or a share of the policy's nameplate (None: the policy's budget).
        period_s: the control period, s (60). duration_s: how long to run, s (None: until
            stopped). interval_s: the power sampling interval, s (0.5).
        actuator: nvml: the job's knob channel, ``file:PATH``.
        tokens_from: nvml: the job's JSON lines of cumulative tokens.
        gpus: nvml: GPU indices (None: all).
        fallback: the safe knob setting (None: the lowest).
        hard_margin: fall back above the budget plus this share (0.10) ...
        hard_periods: ... for this many periods (3).
        seed: sim: the seed of the simulated job. out: record the run here (Parquet; None: not).
    """

    policy: Path
    backend: Backend = Backend.nvml
    budget: PowerSpec | None = None
    period_s: float = 60.0
    duration_s: float | None = None
    interval_s: float = 0.5
    actuator: str | None = None
    tokens_from: Path | None = None
    gpus: list[int] | None = None
    fallback: int | None = None
    hard_margin: float = 0.10
    hard_periods: int = 3
    seed: int = 0
    out: Path | None = None


@dataclass(frozen=True)
class EvalOptions:
    """What ``control eval`` is given, its units parsed.

    Attributes:
        policy: the policy file (``control train --out``).
        env: ``sim`` or ``trace``, refused unless it is the policy's (None: the policy's).
        preset: sim: another workload preset than the policy's (None: the policy's).
        budget: a power, or a share of the policy's (or ``preset``'s) nameplate (None: the
            policy's budget).
        seeds: evaluation seeds per arm (5). horizon_s: job time per seed, s (8 h).
        arms: the arms to run (all of ``ARMS``).
        fill: a replayed trace's gap fill (None: the policy's).
        drift: sim: the jobs' response-length drift (None: the policy's).
        trace, response: a trace-trained policy's trace and sweep of responses, named again.
        keep_traces: keep each episode's power (for the HTML page).
    """

    policy: Path
    env: str | None = None
    preset: str | None = None
    budget: PowerSpec | None = None
    seeds: int = 5
    horizon_s: float = 8 * 3600.0
    arms: tuple[str, ...] = ARMS
    fill: str | None = None
    drift: str | None = None
    trace: Path | None = None
    response: Path | None = None
    keep_traces: bool = False


def evaluation_arms(text: str) -> tuple[str, ...]:
    """``--arms a,b``: at least one arm."""
    chosen = tuple(list_items(text, option("arms")))
    if not chosen:
        raise BadInputError(f"{option('arms')} {text!r}: name at least one of {', '.join(ARMS)}")
    return chosen


def run_evaluation(
    opts: EvalOptions,
    on_episode: Callable[[Episode], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> EvalReport:
    """Run every arm over ``seeds`` fresh jobs with the policy and the baselines;
    ``on_start`` hears when the inputs are checked and the work begins (the baselines are
    chosen first), ``on_episode`` each (arm, seed) finished."""
    if not opts.policy.exists():
        raise BadInputError(f"{opts.policy}: no such file")
    if opts.seeds < 1:
        raise BadInputError(f"{option('seeds')} must be at least 1")
    agent, spec = load_policy(opts.policy)
    if opts.env is not None and opts.env != spec.env:
        raise BadInputError(
            f"{option('env')} {opts.env!r}: this policy was trained on {spec.env!r}"
        )
    spec = with_inputs(spec, opts.trace, opts.response)
    budget_w = None
    if opts.budget is not None:
        plate = (
            nameplate_w(spec.env, opts.preset, None)
            if spec.env == "sim" and opts.preset
            else spec_nameplate_w(spec)
        )
        budget_w = opts.budget.resolve(plate)
    if on_start is not None:
        on_start()
    return evaluate_policy(
        agent,
        spec,
        budget_w=budget_w,
        preset=opts.preset,
        seeds=opts.seeds,
        horizon_s=opts.horizon_s,
        arms=opts.arms,
        keep_traces=opts.keep_traces,
        on_episode=on_episode,
        fill=opts.fill,
        drift=opts.drift,
    )


@dataclass(frozen=True)
class RunResult(Document):
    """What ``powerkit control run`` reports: periods run, fallbacks, shielded periods, each
    decision, and where the run was recorded."""

    COMMAND: ClassVar[str] = "control run"

    periods: int
    fallbacks: int
    shielded: int
    decisions: list[Decision]
    out: str | None = None

    def summary(self) -> str:
        """The run in a line: periods, fallbacks, shielded periods."""
        return f"{self.periods} period(s), {self.fallbacks} fallback(s), {self.shielded} shielded"


def run_policy(
    opts: RunOptions, on_decision: Callable[[Decision, str], None] | None = None
) -> RunResult:
    """Run the policy in the loop — read power, write knobs, fall back when unsafe — until
    ``duration_s`` or a signal; ``on_decision(decision, knob)`` hears each period. Return the
    ``control run`` document (periods, fallbacks, shielded, the decisions)."""
    if not opts.policy.exists():
        raise BadInputError(f"{opts.policy}: no such file")
    agent, spec = load_policy(opts.policy)
    if opts.backend is Backend.sim and spec.env != "sim":
        raise BadInputError(
            f"{option('backend')} sim runs the simulated job; this policy was trained on "
            f"{spec.env!r} "
            f"(use {option('backend')} nvml)"
        )
    budget_w = (
        opts.budget.resolve(spec_nameplate_w(spec)) if opts.budget is not None else spec.budget_w
    )
    if opts.fallback is not None and opts.fallback not in spec.ladder:
        raise BadInputError(
            f"{option('fallback')} {opts.fallback}: not on the policy's ladder {spec.ladder}"
        )
    cfg = LoopConfig(
        budget_w=budget_w,
        ladder=spec.ladder,
        tokens_ref=spec.tokens_ref
        if spec.tokens_ref is not None
        else env_factory(spec)().tokens_ref,  # (a policy written before it was stored)
        target=spec.target,
        shield=spec.shield,
        period_s=opts.period_s,
        periods=None if opts.duration_s is None else max(1, round(opts.duration_s / opts.period_s)),
        fallback_rung=spec.ladder.index(opts.fallback) if opts.fallback is not None else 0,
        hard_margin=opts.hard_margin,
        hard_periods=opts.hard_periods,
        lengths=nominal_lengths(get_preset(spec.preset))
        if spec.obs_spec == list(OBS_SPEC)
        else None,
    )
    plant: SimPlant | NvmlPlant
    if opts.backend is Backend.sim:
        if cfg.periods is None:
            raise BadInputError(f"{option('duration')} is needed with {option('backend')} sim")
        sim = GrpoSim(get_preset(spec.preset), seed=opts.seed, drift=DRIFTS[spec.drift])
        # (a policy trained with a period within the step changes concurrency at once)
        plant = SimPlant(sim, spec.knob, opts.interval_s, within_step=spec.period_s is not None)
    else:
        if not (opts.actuator or "").startswith("file:"):
            raise BadInputError(f"{option('backend')} nvml needs {option('actuator')} file:PATH")
        from powerkit.telemetry.vendors import open_gpu_source

        plant = NvmlPlant(
            open_gpu_source(opts.gpus),
            KnobChannel((opts.actuator or "")[5:]),
            spec.knob,
            opts.interval_s,
            opts.tokens_from,
        )
    tell = on_decision or (lambda d, knob: None)
    stop = threading.Event()
    try:
        with stop_on_signals(stop):
            decisions = control_loop(
                agent, plant, cfg, stop=stop, on_decision=lambda d: tell(d, spec.knob)
            )
    finally:
        if isinstance(plant, NvmlPlant):
            plant.channel.close()
    if opts.out is not None:
        write_run(opts.out, plant, decisions, spec.knob, budget_w)
    return RunResult(
        periods=len(decisions),
        fallbacks=sum(d.action == "fallback" for d in decisions),
        shielded=sum(d.action == "shield" for d in decisions),
        decisions=decisions,
        out=None if opts.out is None else str(opts.out),
    )


@dataclass(frozen=True)
class TrainOptions:
    """What ``control train`` is given, its units parsed.

    Attributes:
        out: the policy file to write (.npz).
        budget: a power, or a share of the preset's or the trace's nameplate.
        env: ``sim``, or ``trace`` (a recorded trace replayed through a sweep of the knob).
        preset: sim: the workload preset (``a100-7b``).
        knob: ``group_size``, ``concurrency``, or ``joint`` (both, a cap as a last resort).
        steps: control periods to train on (500). seed: the seed of training (0).
        seeds: seeds to train (1); with several, the validation jobs choose one.
        target: the violation share allowed at 0.5 s (0.03).
        weights: the reward's weights (tokens, excess energy, violations over the target,
            knob changes).
        trace, response: trace: the recorded trace and the sweep of the knob's response.
        period_s: trace: the control period, s (None: 60 s); sim: a fixed period for the
            concurrency knob (None: a GRPO step).
        trace_from, trace_to: trace: the slice of the trace to train on (as ``--from/--to``).
        fill: trace: the gap fill (``none``). shield: hold back steps up while recent
            violations exceed the target (True). drift: sim: response-length drift (``none``).
        force: start over where an unfinished training into ``out`` is.
    """

    out: Path
    budget: PowerSpec
    env: str = "sim"
    preset: str = "a100-7b"
    knob: str = "group_size"
    steps: int = 500
    seed: int = 0
    seeds: int = 1
    target: float = 0.03
    weights: RewardWeights = field(default_factory=RewardWeights)
    trace: Path | None = None
    response: Path | None = None
    period_s: float | None = None
    trace_from: str | None = None
    trace_to: str | None = None
    fill: str = "none"
    shield: bool = True
    drift: str = "none"
    force: bool = False


#: told of each update (done, stats) or each seed's validation (seed, figures)
Told = Callable[[int, dict[str, float]], None]


def run_training(
    opts: TrainOptions, *, on_update: Told | None = None, on_seed: Told | None = None
) -> TrainResult:
    """Train the controller and write the policy to ``opts.out`` (an interrupted training
    keeps what it learnt in ``unfinished_path(out)``); ``on_update(done, stats)`` hears each
    update, ``on_seed(seed, figures)`` each seed's validation with several seeds."""
    if opts.env not in ("sim", "trace"):
        raise BadInputError(f"{option('env')} {opts.env!r}: sim or trace")
    if opts.env == "trace" and opts.knob == "joint":
        raise BadInputError(
            f"{option('knob')} joint needs {option('env')} sim (a replayed trace answers one knob)"
        )
    if opts.env == "trace" and opts.drift != "none":
        raise BadInputError(
            f"{option('drift')} needs {option('env')} sim (a replayed trace drifts as it was "
            "recorded)"
        )
    if opts.env == "trace":
        for path, name in ((opts.trace, option("trace")), (opts.response, option("response"))):
            if path is None:
                raise BadInputError(f"{option('env')} trace needs {name}")
            if not path.exists():
                raise BadInputError(f"{path}: no such file")
    if unfinished_path(opts.out).exists() and not opts.force:
        raise BadInputError(
            f"{unfinished_path(opts.out)}: an unfinished training into {opts.out} is there; "
            f"keep it elsewhere, or start over with {option('force')}"
        )
    if opts.steps < 1:
        raise BadInputError(f"{option('steps')} must be at least 1")
    trace = opts.env == "trace"
    budget_w = opts.budget.resolve(nameplate_w(opts.env, opts.preset, opts.trace))
    common: dict[str, Any] = dict(
        preset=None if trace else opts.preset,
        budget_w=budget_w,
        knob=opts.knob,
        steps=opts.steps,
        target=opts.target,
        weights=opts.weights,
        trace=opts.trace if trace else None,
        response=opts.response if trace else None,
        period_s=opts.period_s,
        on_update=on_update,
        trace_from=opts.trace_from,
        trace_to=opts.trace_to,
        fill=opts.fill,
        shield=opts.shield,
        **({} if trace else {"drift": opts.drift}),
    )
    if opts.seeds == 1:
        spec = train_policy(out=opts.out, seed=opts.seed, **common)
    else:
        spec = train_seeds(opts.seeds, opts.out, seed=opts.seed, on_seed=on_seed, **common)
    return TrainResult(str(opts.out), spec)
