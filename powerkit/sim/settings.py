"""What a simulated job runs with, and what a read of it returns: its knobs (group size,
concurrency, power cap, locked clock), the drift of its response lengths, and the samples."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from powerkit.sim.presets import Preset

__all__ = [
    "DRIFTS",
    "PHASES",
    "SIM_EPOCH_S",
    "Drift",
    "Knobs",
    "SimSamples",
    "mean_length",
    "response_lengths",
]

#: simulated recordings start here unless told otherwise, so a seed gives identical files
SIM_EPOCH_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z

PHASES = ("rollout", "reward", "logprob", "train", "sync")
ROLLOUT, REWARD, LOGPROB, TRAIN, SYNC = range(5)


@dataclass(frozen=True)
class Drift:
    """How a job's mean response length moves over training (docs/simulator.md, "Drifting
    response lengths"). Step k's mean length is the preset's × (1 + ``growth`` × k / 1000) ×
    exp(a_k − cv²/2) × exp(d_k − difficulty²/2): a linear trend, a step-to-step correlated
    part a_k = ``rho`` a_(k−1) + sqrt(1 − rho²) cv ε_k (its spread the preset's
    ``response_cv``, whatever ``rho``), and an independent per-batch difficulty d_k of spread
    ``difficulty``. ``none`` (rho 0, no trend, no difficulty) is the stationary job: each
    step drawn independently around one fixed mean, exactly as before drift existed."""

    name: str
    growth: float = 0.0  # relative growth of the mean length per 1,000 steps
    rho: float = 0.0  # step-to-step correlation of the log mean length
    difficulty: float = 0.0  # spread (log) of each batch's own difficulty

    @property
    def stationary(self) -> bool:
        return self.growth == 0 and self.rho == 0 and self.difficulty == 0


#: the drifts ``--drift`` names
DRIFTS: dict[str, Drift] = {
    "none": Drift("none"),
    "grpo": Drift("grpo", growth=0.5, rho=0.9, difficulty=0.05),
}


@dataclass(frozen=True)
class Knobs:
    """The workload's own knobs plus the GPU power cap (None: the nameplate) and a locked SM
    clock (None: the GPU boosts as it likes)."""

    group_size: int
    concurrency: int
    power_cap_w: float | None = None
    gpu_frequency_mhz: float | None = None

    def with_knob(self, knob: str, value: int) -> Knobs:
        """These knobs with ``knob`` (group_size or concurrency) set to ``value``."""
        return replace(self, **{knob: value})


@dataclass
class SimSamples:
    """Readings at the requested times; arrays are shaped (gpus, times)."""

    power_w: np.ndarray  # instantaneous
    power_avg_w: np.ndarray  # trailing 1 s average
    energy_j: np.ndarray  # cumulative counter since the start
    temp_c: np.ndarray
    sm_clock_mhz: np.ndarray
    gpu_util: np.ndarray
    mem_util: np.ndarray
    dram_active: np.ndarray
    power_limit_w: np.ndarray
    step: np.ndarray  # (times,)
    phase: list[str]
    tokens: np.ndarray
    group_size: np.ndarray
    concurrency: np.ndarray


def mean_length(
    p: Preset, d: Drift, rng: np.random.Generator, state: float, step: int, first: bool
) -> tuple[float, float]:
    """A step's mean response length, and the drift's correlated part after it (``state``
    before; ``step`` the training step, ``first``: the job's first step). Stationary: one
    draw around the preset's mean, the draw every earlier recording made."""
    cv = p.response_cv
    eps = rng.standard_normal()
    if d.stationary:
        return float(p.response_tokens * np.exp(cv * eps - cv * cv / 2)), state
    # (the first step draws from the stationary spread, every later one continues it)
    a = cv * eps if first else d.rho * state + np.sqrt(1 - d.rho**2) * cv * eps
    hard = d.difficulty * rng.standard_normal()
    trend = 1 + d.growth * step / 1000
    length = (
        p.response_tokens * trend * np.exp(a - cv * cv / 2) * np.exp(hard - d.difficulty**2 / 2)
    )
    return float(length), float(a)


def response_lengths(p: Preset, rng: np.random.Generator, seqs: int, mean_len: float) -> np.ndarray:
    """Draw a step's ``seqs`` response lengths: lognormal around the step's mean
    (coefficient of variation ``seq_cv``), at most ``max_response_ratio`` × the preset's
    mean."""
    sigma = np.sqrt(np.log1p(p.seq_cv**2))
    draws = rng.standard_normal(seqs)
    return np.clip(
        np.round(mean_len * np.exp(sigma * draws - sigma * sigma / 2)),
        1,
        max(1.0, p.max_response_ratio * p.response_tokens),
    )
