"""Simulated pipeline-parallel training: per-stage computation time and power against the SM
frequency, for ``bloat profile --backend sim`` and ``bloat run``. Calibration: docs/simulator.md
("Pipeline-parallel presets").

A stage's forward computation of one microbatch takes ``layers × layer_s`` at the highest clock
(its backward ``backward_ratio`` times that); at a lower clock f the compute-bound share of it
stretches by f_max / f: t(f) = t_max × (α f_max / f + 1 − α). Power while computing is
P(f) = P_static + (P_max − P_static) (f / f_max)^γ; energy is P(f) t(f).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerkit.bloat.profile import INSTRUCTIONS, Options, Profile
from powerkit.bloat.schedule import Dag
from powerkit.errors import BadInputError

__all__ = [
    "PIPELINE_PRESETS",
    "Measured",
    "PipelinePreset",
    "get_pipeline_preset",
    "measure",
    "sim_profile",
]


@dataclass(frozen=True)
class PipelinePreset:
    """One GPU model and one pipeline-parallel training job."""

    name: str
    description: str
    gpu_name: str
    tdp_w: float
    idle_w: float  # a GPU waiting for its neighbours
    f_max_mhz: float
    f_min_mhz: float
    f_step_mhz: float
    stage_layers: tuple[float, ...]  # transformer-layer equivalents per stage (LM head included)
    layer_s: float  # forward time of one layer for one microbatch at f_max (s)
    backward_ratio: float
    compute_share: float  # α: share of the time that scales with the clock
    busy_w: float  # power while computing at f_max
    static_w: float  # power while computing that does not scale with the clock
    gamma: float
    microbatches: int

    @property
    def stages(self) -> int:
        return len(self.stage_layers)

    def frequencies(self) -> np.ndarray:
        return np.arange(self.f_max_mhz, self.f_min_mhz - 1e-9, -self.f_step_mhz)

    def time_s(
        self, stage: int | np.ndarray, instruction: str | np.ndarray, f: np.ndarray
    ) -> np.ndarray:
        """Time of the computation(s): one stage and instruction at many frequencies, or one
        frequency per computation (arrays of stages and instructions)."""
        forward = np.asarray(instruction) == "forward"
        scale = np.where(forward, 1.0, self.backward_ratio)
        base = np.asarray(self.stage_layers)[stage] * self.layer_s * scale
        a = self.compute_share
        return base * (a * self.f_max_mhz / f + 1 - a)

    def power_w(self, f: np.ndarray) -> np.ndarray:
        return self.static_w + (self.busy_w - self.static_w) * (f / self.f_max_mhz) ** self.gamma


def _head(vocab: int, hidden: int) -> float:
    """The LM head in layer equivalents: 2·h·V FLOPs per token against a layer's 24·h²."""
    return 2 * hidden * vocab / (24 * hidden * hidden)


PIPELINE_PRESETS = {
    p.name: p
    for p in (
        PipelinePreset(
            name="a100-gpt3-pp4",
            description="GPT-3 2.7B (32 layers, hidden 2560, vocabulary 50,257) on 4 A100-SXM4 "
            "stages, 8 layers each, the LM head on the last",
            gpu_name="NVIDIA A100-SXM4-40GB",
            tdp_w=400.0,
            idle_w=75.0,
            f_max_mhz=1410.0,
            f_min_mhz=810.0,
            f_step_mhz=15.0,
            stage_layers=(8.0, 8.0, 8.0, 8.0 + _head(50257, 2560)),
            layer_s=0.0086,
            backward_ratio=2.0,
            compute_share=0.9,
            busy_w=330.0,
            static_w=110.0,
            gamma=2.5,
            microbatches=32,
        ),
        PipelinePreset(
            name="a40-bloom-pp8",
            description="BLOOM 3B (30 layers, hidden 2560, vocabulary 250,880) on 8 A40 stages, "
            "4-4-4-4-4-4-3-3 layers, the LM head on the last",
            gpu_name="NVIDIA A40",
            tdp_w=300.0,
            idle_w=35.0,
            f_max_mhz=1740.0,
            f_min_mhz=1005.0,
            f_step_mhz=15.0,
            stage_layers=(4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 3.0, 3.0 + _head(250880, 2560)),
            layer_s=0.017,
            backward_ratio=2.0,
            compute_share=0.9,
            busy_w=260.0,
            static_w=80.0,
            gamma=2.5,
            microbatches=32,
        ),
    )
}


def get_pipeline_preset(name: str) -> PipelinePreset:
    """Return a pipeline preset by name (one line listing them when unknown)."""
    try:
        return PIPELINE_PRESETS[name]
    except KeyError:
        raise BadInputError(
            f"unknown pipeline preset {name!r} (one of {', '.join(PIPELINE_PRESETS)})"
        ) from None


def sim_profile(preset: PipelinePreset) -> Profile:
    """The preset's stage profile at every supported frequency (the model, without noise)."""
    f = preset.frequencies()
    options = {}
    for s in range(preset.stages):
        for instruction in INSTRUCTIONS:
            t = preset.time_s(s, instruction, f)
            options[(s, instruction)] = Options(f.copy(), t, preset.power_w(f) * t)
    return Profile(preset.stages, options, f"sim:{preset.name}")


@dataclass
class Measured:
    """One simulated iteration: its time and energy (idle included) and the stages' busy time."""

    time_s: float
    energy_j: float


def measure(
    preset: PipelinePreset,
    dag: Dag,
    frequencies: np.ndarray,
    *,
    iterations: int = 5,
    noise: float = 0.02,
    straggler: float = 1.0,
    seed: int = 0,
) -> Measured:
    """Run ``iterations`` simulated iterations with every computation at its frequency: each
    computation's time and power vary by ``noise`` (1 sigma, independent), and with
    ``straggler`` > 1 the iteration lasts at least straggler x the all-max-clock time of an
    unperturbed pipeline (another pipeline is that slow; this one waits, idle). Mean per
    iteration."""
    rng = np.random.default_rng(seed)

    base = preset.time_s(dag.stage, dag.instruction, np.asarray(frequencies, dtype=float))
    fastest = dag.makespan(
        preset.time_s(dag.stage, dag.instruction, np.full(dag.size, preset.f_max_mhz))
    )
    power = preset.power_w(np.asarray(frequencies, dtype=float))
    times, energies = [], []
    for _ in range(iterations):
        t = base * (1 + noise * rng.standard_normal(dag.size)).clip(0.5)
        p = power * (1 + noise * rng.standard_normal(dag.size)).clip(0.5)
        length = max(dag.makespan(t), straggler * fastest)
        busy = float(t.sum())
        times.append(length)
        energies.append(float((p * t).sum()) + preset.idle_w * (preset.stages * length - busy))
    return Measured(float(np.mean(times)), float(np.mean(energies)))
