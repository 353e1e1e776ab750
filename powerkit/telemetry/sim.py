"""The simulator as a telemetry source (``--backend sim``)."""

from __future__ import annotations

import numpy as np

from powerkit.sim.model import GrpoSim
from powerkit.sim.presets import Preset
from powerkit.sim.settings import DRIFTS, Drift, Knobs
from powerkit.telemetry.base import DeviceInfo, Readings, TelemetrySource

__all__ = ["SimSource"]


class SimSource(TelemetrySource):
    """Readings of a simulated GRPO job; far faster than real time unless ``realtime``."""

    source_name = "sim"
    power_semantics = "sim_instant"

    def __init__(
        self,
        preset: Preset,
        *,
        knobs: Knobs | None = None,
        seed: int = 0,
        host: str = "sim",
        realtime: bool = False,
        drift: Drift = DRIFTS["none"],
    ) -> None:
        self.preset = preset
        self.seed = seed
        self.host = host
        self.sim = GrpoSim(preset, knobs, seed=seed, drift=drift)
        self.virtual_time = not realtime

    def devices(self) -> list[DeviceInfo]:
        """Return the preset's GPUs."""
        p = self.preset
        return [
            DeviceInfo(
                index=i,
                name=p.gpu_name,
                uuid=f"SIM-{p.name}-{self.seed}-{i}",
                nameplate_w=p.tdp_w,
                power_limit_w=p.tdp_w,
            )
            for i in range(p.gpus)
        ]

    def read_block(self, times_s: np.ndarray) -> Readings:
        """Return simulated readings at ``times_s`` (s since start, non-decreasing)."""
        s = self.sim.sample(times_s)
        return {
            "power_w": s.power_w,
            "power_instant_w": s.power_w,
            "power_avg_w": s.power_avg_w,
            "energy_j": s.energy_j,
            "temp_c": s.temp_c,
            "sm_clock_mhz": s.sm_clock_mhz,
            "mem_clock_mhz": np.full_like(s.power_w, self.preset.mem_clock_mhz),
            "gpu_util": s.gpu_util,
            "mem_util": s.mem_util,
            "memcpy_util": s.mem_util,
            "dram_active": s.dram_active,
            "power_limit_w": s.power_limit_w,
            "step": s.step,
            "phase": np.asarray(s.phase, dtype=object),
            "tokens": s.tokens,
            "group_size": s.group_size,
            "concurrency": s.concurrency,
        }

    def read_now(self, elapsed_s: float) -> Readings:
        """Return one reading at ``elapsed_s`` (real-time mode)."""
        block = self.read_block(np.array([elapsed_s]))
        return {k: (v[..., 0] if v.ndim == 2 else v) for k, v in block.items()}

    def extra_metadata(self) -> dict[str, object]:
        """Return the preset, seed and knobs the trace was simulated with."""
        k = self.sim.knobs
        drift = {} if self.sim.drift.stationary else {"drift": self.sim.drift.name}
        return {
            "preset": self.preset.name,
            "seed": self.seed,
            **drift,
            "group_size": k.group_size,
            "concurrency": k.concurrency,
            "power_cap_w": k.power_cap_w,
        }
