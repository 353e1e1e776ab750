"""The simulated GPU + GRPO workload (``--backend sim``) and its presets."""

from __future__ import annotations

from powerkit.sim.model import DRIFTS, PHASES, SIM_EPOCH_S, Drift, GrpoSim, Knobs, SimSamples
from powerkit.sim.presets import PRESETS, Preset, get_preset

__all__ = [
    "DRIFTS",
    "PHASES",
    "PRESETS",
    "SIM_EPOCH_S",
    "Drift",
    "GrpoSim",
    "Knobs",
    "Preset",
    "SimSamples",
    "get_preset",
]
