"""The simulated GPU + GRPO workload (``--backend sim``) and its presets."""

from __future__ import annotations

from powerkit.sim.model import PHASES, SIM_EPOCH_S, GrpoSim, Knobs, SimSamples
from powerkit.sim.presets import PRESETS, Preset, get_preset

__all__ = [
    "PHASES",
    "PRESETS",
    "SIM_EPOCH_S",
    "GrpoSim",
    "Knobs",
    "Preset",
    "SimSamples",
    "get_preset",
]
