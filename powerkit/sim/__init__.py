"""The simulated GPU + GRPO workload (``--backend sim``) and its presets."""

from __future__ import annotations

from powerkit.sim.model import GrpoSim
from powerkit.sim.presets import PRESETS, Preset, get_preset
from powerkit.sim.settings import DRIFTS, PHASES, SIM_EPOCH_S, Drift, Knobs, SimSamples

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
