"""Simulated pipeline-parallel training: per-stage computation time and power against the SM
frequency, for ``bloat profile --backend sim`` and ``bloat run``. Calibration: docs/simulator.md
("Pipeline-parallel presets").

A stage's forward computation of one microbatch takes ``layers × layer_s`` at the highest clock
(its backward ``backward_ratio`` times that); at a lower clock f the compute-bound share of it
stretches by f_max / f: t(f) = t_max × (α f_max / f + 1 − α). Power while computing is
P(f) = P_static + (P_max − P_static) (f / f_max)^γ; energy is P(f) t(f).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from powerkit.bloat.profile import INSTRUCTIONS, Choices, Profile
from powerkit.bloat.schedule import Dag
from powerkit.core.errors import BadInputError
from powerkit.core.outputs import write_text
from powerkit.sim.settings import SIM_EPOCH_S
from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical
from powerkit.trace.writing import write_trace

__all__ = [
    "PIPELINE_PRESETS",
    "Measured",
    "PipelinePreset",
    "get_pipeline_preset",
    "measure",
    "sim_profile",
    "write_run",
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
            options[(s, instruction)] = Choices(f.copy(), t, preset.power_w(f) * t)
    return Profile(preset.stages, options, f"sim:{preset.name}")


@dataclass
class Measured:
    """Simulated iterations: mean time and energy per iteration (idle included); with ``keep``,
    each iteration's computation durations and powers and its length, for :func:`write_run`."""

    time_s: float
    energy_j: float
    dag: Dag | None = None
    iterations: list[tuple[np.ndarray, np.ndarray, float]] = field(default_factory=list)


def measure(
    preset: PipelinePreset,
    dag: Dag,
    frequencies: np.ndarray,
    *,
    iterations: int = 5,
    noise: float = 0.02,
    straggler: float = 1.0,
    seed: int = 0,
    keep: bool = False,
) -> Measured:
    """Run ``iterations`` simulated iterations with every computation at its frequency: each
    computation's time and power vary by ``noise`` (1 sigma, independent), and with
    ``straggler`` > 1 the iteration lasts at least straggler x the all-max-clock time of an
    unperturbed pipeline (another pipeline is that slow; this one waits, idle). Mean per
    iteration; ``keep`` keeps every iteration's computations for :func:`write_run`."""
    rng = np.random.default_rng(seed)

    base = preset.time_s(dag.stage, dag.instruction, np.asarray(frequencies, dtype=float))
    fastest = dag.makespan(
        preset.time_s(dag.stage, dag.instruction, np.full(dag.size, preset.f_max_mhz))
    )
    power = preset.power_w(np.asarray(frequencies, dtype=float))
    times, energies = [], []
    kept = []
    for _ in range(iterations):
        t = base * (1 + noise * rng.standard_normal(dag.size)).clip(0.5)
        p = power * (1 + noise * rng.standard_normal(dag.size)).clip(0.5)
        length = max(dag.makespan(t), straggler * fastest)
        busy = float(t.sum())
        times.append(length)
        energies.append(float((p * t).sum()) + preset.idle_w * (preset.stages * length - busy))
        if keep:
            kept.append((t, p, length))
    return Measured(float(np.mean(times)), float(np.mean(energies)), dag if keep else None, kept)


def write_run(
    preset: PipelinePreset,
    run: Measured,
    trace_out: Path,
    steps_out: Path,
    *,
    interval_s: float = 0.01,
    epoch_s: float = SIM_EPOCH_S,
) -> None:
    """Write a kept run as a power trace (one GPU per stage, sampled every ``interval_s``: a
    computation's power while it runs, idle power between) and its step annotations (one line
    per iteration start, and an end line), for ``powerkit energy TRACE --steps STEPS``."""
    if run.dag is None or not run.iterations:
        raise ValueError("measure(..., keep=True) keeps the iterations write_run needs")
    dag = run.dag
    offsets = np.concatenate([[0.0], np.cumsum([length for _, _, length in run.iterations])])
    times = np.arange(0.0, offsets[-1] + interval_s / 2, interval_s)
    power = np.full((preset.stages, times.size), preset.idle_w)
    for k, (t, p, _) in enumerate(run.iterations):
        finish = offsets[k] + dag.finish_times(t)
        start = finish - t
        for n in range(dag.size):
            inside = (times >= start[n]) & (times < finish[n])
            power[int(dag.stage[n]), inside] = p[n]
    stages, n = power.shape
    frame = pl.DataFrame(
        {
            "ts": pl.Series(
                np.tile(np.round((epoch_s + times) * 1e6).astype(np.int64), stages)
            ).cast(pl.Datetime("us", "UTC")),
            "host": ["sim"] * (stages * n),
            "gpu": np.repeat(np.arange(stages), n).astype(np.int16),
            "power_w": power.ravel(),
        }
    )
    meta = TraceMeta(
        source=f"sim-pipeline:{preset.name}",
        power_semantics="instant",
        interval_s=interval_s,
        gpus=[GpuMeta("sim", g, preset.gpu_name, preset.tdp_w) for g in range(stages)],
    )
    write_trace(to_canonical(frame), meta, trace_out)
    lines = [json.dumps({"ts": epoch_s + float(o), "step": k}) for k, o in enumerate(offsets[:-1])]
    lines.append(json.dumps({"ts": epoch_s + float(offsets[-1]), "end": True}))
    write_text(steps_out, "\n".join(lines) + "\n")
