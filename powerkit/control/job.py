"""``control run`` as a library job: a trained policy in the loop on the simulated job or on
real GPUs, with its fallback, callable from Python."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from powerkit.actuator import KnobChannel
from powerkit.choices import Backend
from powerkit.control.live import Decision, LoopConfig, NvmlPlant, SimPlant, control_loop, write_run
from powerkit.control.train import env_factory, load_policy, spec_nameplate_w
from powerkit.errors import BadInputError
from powerkit.sim import GrpoSim, get_preset
from powerkit.telemetry.recorder import stop_on_signals
from powerkit.units import parse_power

__all__ = ["RunOptions", "run_policy"]


@dataclass(frozen=True)
class RunOptions:
    """What ``control run`` is given, its units parsed (``budget`` is a power or a share of
    the policy's nameplate; None: the policy's own budget)."""

    policy: Path
    backend: Backend = Backend.nvml
    budget: str | None = None
    period_s: float = 60.0
    duration_s: float | None = None  # None: until stopped
    interval_s: float = 0.5
    actuator: str | None = None  # nvml: file:PATH knob channel
    tokens_from: Path | None = None  # nvml: the job's JSON lines with cumulative tokens
    gpus: list[int] | None = None
    fallback: int | None = None  # the safe knob setting (None: the lowest)
    hard_margin: float = 0.10
    hard_periods: int = 3
    seed: int = 0
    out: Path | None = None  # record the run here (Parquet)


def run_policy(
    opts: RunOptions, on_decision: Callable[[Decision, str], None] | None = None
) -> dict[str, Any]:
    """Run the policy in the loop — read power, write knobs, fall back when unsafe — until
    ``duration_s`` or a signal; ``on_decision(decision, knob)`` hears each period. Return the
    ``control run`` document (periods, fallbacks, shielded, the decisions)."""
    if not opts.policy.exists():
        raise BadInputError(f"{opts.policy}: no such file")
    agent, spec = load_policy(opts.policy)
    if opts.backend is Backend.sim and spec.env != "sim":
        raise BadInputError(
            f"--backend sim runs the simulated job; this policy was trained on {spec.env!r} "
            "(use --backend nvml)"
        )
    budget_w = (
        parse_power(opts.budget).resolve(spec_nameplate_w(spec)) if opts.budget else spec.budget_w
    )
    if opts.fallback is not None and opts.fallback not in spec.ladder:
        raise BadInputError(f"--fallback {opts.fallback}: not on the policy's ladder {spec.ladder}")
    cfg = LoopConfig(
        budget_w=budget_w,
        ladder=spec.ladder,
        tokens_ref=env_factory(spec)().tokens_ref,
        target=spec.target,
        shield=spec.shield,
        period_s=opts.period_s,
        periods=None if opts.duration_s is None else max(1, round(opts.duration_s / opts.period_s)),
        fallback_rung=spec.ladder.index(opts.fallback) if opts.fallback is not None else 0,
        hard_margin=opts.hard_margin,
        hard_periods=opts.hard_periods,
    )
    plant: SimPlant | NvmlPlant
    if opts.backend is Backend.sim:
        if cfg.periods is None:
            raise BadInputError("--duration is needed with --backend sim")
        plant = SimPlant(GrpoSim(get_preset(spec.preset), seed=opts.seed), spec.knob,
                         opts.interval_s)  # fmt: skip
    else:
        if not (opts.actuator or "").startswith("file:"):
            raise BadInputError("--backend nvml needs --actuator file:PATH")
        from powerkit.telemetry.nvml import NvmlSource

        plant = NvmlPlant(NvmlSource(opts.gpus), KnobChannel((opts.actuator or "")[5:]),
                          spec.knob, opts.interval_s, opts.tokens_from)  # fmt: skip
    tell = on_decision or (lambda d, knob: None)
    stop = threading.Event()
    try:
        with stop_on_signals(stop):
            decisions = control_loop(agent, plant, cfg, stop=stop,
                                     on_decision=lambda d: tell(d, spec.knob))  # fmt: skip
    finally:
        if isinstance(plant, NvmlPlant):
            plant.channel.close()
    if opts.out is not None:
        write_run(opts.out, plant, decisions, spec.knob, budget_w)
    return {
        "periods": len(decisions),
        "fallbacks": sum(d.action == "fallback" for d in decisions),
        "shielded": sum(d.action == "shield" for d in decisions),
        "decisions": [d.__dict__ for d in decisions],
        "out": None if opts.out is None else str(opts.out),
    }
