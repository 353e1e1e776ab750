"""Simulator presets: one GPU model + one GRPO job each. Calibration sources: docs/simulator.md."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
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


_A100: dict[str, Any] = dict(
    gpu_name="NVIDIA A100-SXM4-80GB",
    tdp_w=400.0,
    idle_w=60.0,
    sm_clock_mhz=1410.0,
    mem_clock_mhz=1593.0,
    ambient_c=30.0,
    thermal_tau_s=90.0,
    thermal_c_per_w=0.1,
    leak_per_c=0.0015,
    overshoot=0.35,
    overshoot_tau_s=0.35,
    noise_frac=0.02,
    wander_frac=0.015,
)
_H100: dict[str, Any] = dict(
    _A100,
    gpu_name="NVIDIA H100 80GB HBM3",
    tdp_w=700.0,
    idle_w=75.0,
    sm_clock_mhz=1980.0,
    mem_clock_mhz=2619.0,
    thermal_c_per_w=0.06,
)
_H200: dict[str, Any] = dict(
    _H100, gpu_name="NVIDIA H200", sm_clock_mhz=1980.0, mem_clock_mhz=3201.0
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="a100-7b",
            description="GRPO on a 7B model, one A100 80GB: generation, log-prob, fwd/bwd, sync",
            gpus=1,
            prompts_per_step=32,
            response_tokens=400,
            response_cv=0.12,
            prompt_ratio=0.5,
            group_size=8,
            concurrency=8,
            group_ladder=(2, 4, 8, 16),
            concurrency_ladder=(1, 2, 4, 8, 16),
            group_occupancy=True,
            seqs_per_request=1,
            gen_max_w=250.0,
            gen_floor=0.2,
            batch_sat=48.0,
            decode_tok_s=40.0,
            batch_half=64.0,
            logprob_tok_s=6000.0,
            logprob_w=285.0,
            train_tok_s=2500.0,
            train_w=310.0,
            microbatch_s=1.6,
            microbatch_duty=0.85,
            microbatch_dip=0.72,
            sync_s=3.0,
            sync_w=150.0,
            overhead_s=4.0,
            overhead_w=90.0,
            **_A100,
        ),
        Preset(
            name="a100-14b",
            description="GRPO on a 14B model, two A100 80GB (tensor parallel 2)",
            gpus=2,
            prompts_per_step=32,
            response_tokens=450,
            response_cv=0.12,
            prompt_ratio=0.5,
            group_size=8,
            concurrency=8,
            group_ladder=(2, 4, 8, 16),
            concurrency_ladder=(1, 2, 4, 8, 16),
            group_occupancy=False,
            seqs_per_request=4,
            gen_max_w=170.0,
            gen_floor=0.45,
            batch_sat=12.0,
            decode_tok_s=40.0,
            batch_half=6.0,
            logprob_tok_s=5000.0,
            logprob_w=250.0,
            train_tok_s=1500.0,
            train_w=285.0,
            microbatch_s=2.5,
            microbatch_duty=0.65,
            microbatch_dip=0.6,
            sync_s=4.0,
            sync_w=130.0,
            overhead_s=4.0,
            overhead_w=85.0,
            **_A100,
        ),
        Preset(
            name="a100-72b-tp4",
            description="GRPO on a 72B model, four A100 80GB (tensor parallel 4)",
            gpus=4,
            prompts_per_step=16,
            response_tokens=500,
            response_cv=0.12,
            prompt_ratio=0.5,
            group_size=8,
            concurrency=8,
            group_ladder=(4, 8, 16),
            concurrency_ladder=(1, 2, 4, 8),
            group_occupancy=False,
            seqs_per_request=4,
            gen_max_w=165.0,
            gen_floor=0.5,
            batch_sat=12.0,
            decode_tok_s=30.0,
            batch_half=6.0,
            logprob_tok_s=3500.0,
            logprob_w=240.0,
            train_tok_s=200.0,
            train_w=295.0,
            microbatch_s=4.0,
            microbatch_duty=0.5,
            microbatch_dip=0.45,
            sync_s=4.0,
            sync_w=120.0,
            overhead_s=3.0,
            overhead_w=80.0,
            **_A100,
        ),
        Preset(
            name="h100-8b",
            description="GRPO on an 8B model, one H100 80GB SXM",
            gpus=1,
            prompts_per_step=32,
            response_tokens=450,
            response_cv=0.12,
            prompt_ratio=0.5,
            group_size=8,
            concurrency=8,
            group_ladder=(2, 4, 8, 16),
            concurrency_ladder=(1, 2, 4, 8, 16),
            group_occupancy=True,
            seqs_per_request=1,
            # Decode fitted to ML.ENERGY v3 (Llama 3.1 8B, one H100, vLLM 0.11.1, batch
            # 8-512): power within 1 %, throughput within 3.2 % (docs/simulator.md).
            gen_max_w=691.0,
            gen_floor=0.62,
            batch_sat=57.0,
            decode_tok_s=150.0,
            batch_half=75.0,
            logprob_tok_s=12000.0,
            logprob_w=590.0,
            train_tok_s=5000.0,
            train_w=620.0,
            microbatch_s=1.2,
            microbatch_duty=0.85,
            microbatch_dip=0.7,
            sync_s=2.0,
            sync_w=220.0,
            overhead_s=3.0,
            overhead_w=130.0,
            **_H100,
        ),
        Preset(
            name="h200-70b-tp8",
            description="GRPO on a 70B model, eight H200 (tensor parallel 8)",
            gpus=8,
            prompts_per_step=32,
            response_tokens=500,
            response_cv=0.12,
            prompt_ratio=0.5,
            group_size=8,
            concurrency=8,
            group_ladder=(4, 8, 16),
            concurrency_ladder=(1, 2, 4, 8, 16),
            group_occupancy=False,
            seqs_per_request=4,
            gen_max_w=340.0,
            gen_floor=0.45,
            batch_sat=12.0,
            decode_tok_s=45.0,
            batch_half=6.0,
            logprob_tok_s=9000.0,
            logprob_w=520.0,
            train_tok_s=3000.0,
            train_w=600.0,
            microbatch_s=2.5,
            microbatch_duty=0.6,
            microbatch_dip=0.55,
            sync_s=5.0,
            sync_w=200.0,
            overhead_s=3.0,
            overhead_w=120.0,
            **_H200,
        ),
    )
}


PRESETS["a100-72b-tp4-gen"] = replace(
    PRESETS["a100-72b-tp4"],
    name="a100-72b-tp4-gen",
    description="Rollout generation of a 72B model on four A100 80GB (TP4), no training",
    generation_only=True,
)


def _training(name: str, description: str, gpu: dict[str, Any], **values: Any) -> Preset:
    """A training job on 8 GPUs (data parallel): steps of fixed token volume."""
    base: dict[str, Any] = dict(
        gpus=8,
        prompts_per_step=256,  # sequences per global batch
        response_tokens=4096.0,  # sequence length (packed: little step-to-step variation)
        response_cv=0.02,
        prompt_ratio=0.0,
        group_size=1,
        concurrency=1,
        group_ladder=(1,),
        concurrency_ladder=(1,),
        group_occupancy=False,
        seqs_per_request=1,
        gen_max_w=340.0,
        gen_floor=0.45,
        batch_sat=12.0,
        decode_tok_s=45.0,
        batch_half=6.0,
        logprob_tok_s=1.0e6,
        logprob_w=520.0,
        sync_s=1.2,
        overhead_s=0.0,
        overhead_w=120.0,
        training_only=True,
    )
    base.update(values)
    return Preset(name=name, description=description, **base, **gpu)


_JOBS: dict[str, dict[str, Any]] = {
    # Calibrated to the published PFI medians on H200 (docs/simulator.md): dense ~1.27,
    # MoE pretraining ~1.43, MoE fine-tuning ~2.10.
    "dense-pretrain": dict(
        description="Pretraining a dense model on eight {gpu}: compute-bound fwd/bwd",
        train_tok_s=105_000.0,
        train_w=690.0,
        microbatch_s=1.0,
        microbatch_duty=0.9,
        microbatch_dip=0.8,
        sync_w=420.0,
        train_mem_share=0.1,
        train_cap_exponent=0.75,
    ),
    "moe-pretrain": dict(
        description="Pretraining a mixture-of-experts model on eight {gpu}: all-to-all",
        train_tok_s=90_000.0,
        train_w=660.0,
        microbatch_s=1.2,
        microbatch_duty=0.75,
        microbatch_dip=0.65,
        sync_w=400.0,
        train_mem_share=0.25,
        train_cap_exponent=0.75,
    ),
    "moe-finetune": dict(
        description="Fine-tuning a mixture-of-experts model on eight {gpu}: memory-bound",
        prompts_per_step=64,
        train_tok_s=40_000.0,
        train_w=600.0,
        microbatch_s=0.8,
        microbatch_duty=0.7,
        microbatch_dip=0.6,
        sync_w=380.0,
        train_mem_share=0.4,
        train_cap_exponent=0.55,
    ),
}
for _gpu_key, _gpu in (("h200", _H200), ("h100", _H100)):
    for _kind, _values in _JOBS.items():
        _values = dict(_values, description=_values["description"].format(gpu=_gpu_key.upper()))
        if _gpu_key == "h100":
            # Less memory bandwidth than H200 (3.35 vs 4.8 TB/s): more of each step waits
            # on memory, and the same work runs slower.
            _values["train_mem_share"] += 0.05
            _values["train_tok_s"] *= 0.8
        _job = _training(f"{_gpu_key}-{_kind}", gpu=_gpu, **_values)
        PRESETS[_job.name] = _job


def get_preset(name: str) -> Preset:
    """Return the preset called ``name``; a one-line error lists the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise BadInputError(f"unknown preset {name!r} (one of {', '.join(PRESETS)})") from None
