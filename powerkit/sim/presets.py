"""Simulator presets: one GPU model + one job each, read from the bundled
``powerkit/data/presets.toml`` (data, with the sources of its figures in docs/simulator.md)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from importlib import resources
from typing import Any

import numpy as np

from powerkit.core.errors import BadInputError

__all__ = ["PRESETS", "Preset", "get_preset"]


@dataclass(frozen=True)
class Preset:
    """Parameters of a simulated GRPO job; powers are per GPU in W, rates are per job."""

    name: str
    description: str
    gpu_name: str
    tdp_w: float  # nameplate (board TDP)
    idle_w: float  # powered, clocks idle, nothing resident running
    gpus: int  # tensor-parallel degree: GPUs that run the job in lockstep
    # Workload volume
    prompts_per_step: int
    response_tokens: float  # mean generated tokens per sequence
    response_cv: float  # step-to-step variation of the mean response length
    prompt_ratio: float  # prompt tokens per generated token (log-prob pass reads both)
    # Knobs: defaults and the ladders sweeps and controllers move along
    group_size: int
    concurrency: int
    group_ladder: tuple[int, ...]
    concurrency_ladder: tuple[int, ...]
    group_occupancy: bool  # one GPU: a group's samples share the decode batch
    seqs_per_request: int  # sharded engine: sequences a request puts in flight
    # Generation (decode): occupancy u = 1 - exp(-B / batch_sat) sets power
    gen_max_w: float
    gen_floor: float  # occupancy share at batch -> 0 (decode streams the weights anyway)
    batch_sat: float
    decode_tok_s: float  # per-sequence decode rate at small batch (tokens/s)
    batch_half: float  # batch at which the per-sequence rate has halved
    # Training phases
    logprob_tok_s: float
    logprob_w: float
    train_tok_s: float
    train_w: float
    microbatch_s: float  # period of the fwd/bwd micro-batch cycle
    microbatch_duty: float  # share of the period spent computing (rest: communication)
    microbatch_dip: float  # power during communication, as a share of train_w
    sync_s: float  # weight sync to the generation engine
    sync_w: float
    overhead_s: float  # reward scoring, data loading
    overhead_w: float
    # Dynamics
    overshoot: float  # transient overshoot at a power step, share of the step
    overshoot_tau_s: float
    noise_frac: float  # white sensor noise, share of power (1 sigma)
    wander_frac: float  # slow AR(1) wander, share of power (1 sigma)
    thermal_tau_s: float
    thermal_c_per_w: float  # steady-state temperature rise per W
    leak_per_c: float  # leakage power rise per degree C above 40 C
    ambient_c: float
    sm_clock_mhz: float
    mem_clock_mhz: float
    generation_only: bool = False  # a generation (rollout) job: no training phases
    # A pretraining or fine-tuning job: each step is fwd/bwd (train) then the optimizer step
    # and gradient all-reduce (sync); tokens count as they are trained. Knobs do not apply.
    training_only: bool = False
    # Under a power cap the SM clock falls; the memory clock does not. The share of the
    # fwd/bwd time bound by memory or communication does not stretch (see docs/simulator.md).
    train_mem_share: float = 0.0
    train_cap_exponent: float = 0.5  # compute part: slowed by (demand ratio) ** exponent
    # Sequence lengths within a step: lognormal around the step's mean with this coefficient
    # of variation, at most max_response_ratio x response_tokens (the engine's max tokens).
    # ML.ENERGY v3 (lm-arena-chat, Llama 3.1 8B/70B, Qwen3 8B/32B on H100): CV 0.86-1.05 at
    # means of 350-660 tokens, max_tokens 4096 (about 10x the mean); see docs/simulator.md.
    seq_cv: float = 0.95
    max_response_ratio: float = 10.0

    def decode(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (power per GPU in W, tokens/s) while decoding ``batch`` sequences at once:
        occupancy floor + (1 − floor)(1 − e^(−B/batch_sat)) of the generation power above
        idle, and B · decode_tok_s / (1 + B / batch_half) tokens/s."""
        b = np.asarray(batch, dtype=float)
        occupancy = self.gen_floor + (1.0 - self.gen_floor) * (1.0 - np.exp(-b / self.batch_sat))
        power = self.idle_w + (self.gen_max_w - self.idle_w) * occupancy
        return power, b * self.decode_tok_s / (1.0 + b / self.batch_half)

    def with_overrides(self, **values: float) -> Preset:
        """Return a copy with some parameters replaced (unknown names are an error)."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise BadInputError(f"unknown preset parameter(s): {', '.join(unknown)}")
        return replace(self, **values)  # type: ignore[arg-type]


def _load() -> dict[str, Preset]:
    """The presets of ``powerkit/data/presets.toml``, in its order (GRPO jobs, then training
    jobs per GPU)."""
    data = tomllib.loads(resources.files("powerkit").joinpath("data/presets.toml").read_text())

    def gpu(name: str) -> dict[str, Any]:
        values = dict(data["gpu"][name])
        base = values.pop("base", None)
        return {**(gpu(base) if base else {}), **values}

    def preset(name: str, values: dict[str, Any]) -> Preset:
        values = dict(values)
        if "base" in values:
            return replace(found[values.pop("base")], name=name, **values)
        for ladder in ("group_ladder", "concurrency_ladder"):
            values[ladder] = tuple(values[ladder])
        return Preset(name=name, **gpu(values.pop("gpu")), **values)

    found: dict[str, Preset] = {}
    for name, values in data["preset"].items():
        found[name] = preset(name, values)
    training = dict(data["training"])
    jobs, gpus = training.pop("job"), training.pop("gpu")
    for gpu_name, adjust in gpus.items():
        for kind, job in jobs.items():
            values = {**training, **job, "gpu": gpu_name}
            values["description"] = job["description"].format(gpu=gpu_name.upper())
            values["train_mem_share"] += adjust.get("train_mem_share_add", 0.0)
            values["train_tok_s"] *= adjust.get("train_tok_s_scale", 1.0)
            found[f"{gpu_name}-{kind}"] = preset(f"{gpu_name}-{kind}", values)
    return found


PRESETS: dict[str, Preset] = _load()


def get_preset(name: str) -> Preset:
    """Return the preset called ``name``; a one-line error lists the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise BadInputError(f"unknown preset {name!r} (one of {', '.join(PRESETS)})") from None
