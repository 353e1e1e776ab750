"""The simulator as a telemetry source (``--backend sim``)."""

from __future__ import annotations

import numpy as np

from powerkit.sensors.models import COUNTER, Sensor
from powerkit.sensors.sense import TRUTH_STEP_S, Truth, read_counter, sense
from powerkit.sim.model import GrpoSim
from powerkit.sim.presets import Preset
from powerkit.sim.settings import DRIFTS, Drift, Knobs
from powerkit.telemetry.base import DeviceInfo, Readings, TelemetrySource

__all__ = ["SimSource"]


class SimSource(TelemetrySource):
    """Readings of a simulated GRPO job; far faster than real time unless ``realtime``.

    With a ``sensor``, ``power_w`` is what that sensor reports of the job's true power (the
    simulator's power every :data:`TRUTH_STEP_S`, what ``record --truth-out`` writes) and
    ``energy_j`` what NVML's counter would hold; the sensor's updates fall at ``phase_s`` +
    k periods. Without one, ``power_w`` is the simulated power at each reading's time;
    ``truth``: that power alone, as ``record --truth-out`` writes it (no counter, no other
    power field: its trapezoids at :data:`TRUTH_STEP_S` are the true energy).
    """

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
        sensor: Sensor | None = None,
        phase_s: float = 0.0,
        truth: bool = False,
    ) -> None:
        self.preset = preset
        self.seed = seed
        self.host = host
        self.sim = GrpoSim(preset, knobs, seed=seed, drift=drift)
        self.virtual_time = not realtime
        self.sensor, self.phase_s, self.truth = sensor, phase_s, truth
        if sensor is not None:
            self.power_semantics = sensor.name
            self._truth = _TruthStream(GrpoSim(preset, knobs, seed=seed, drift=drift), sensor)

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
        power, instant, average, energy = s.power_w, s.power_w, s.power_avg_w, s.energy_j
        if self.sensor is not None:
            truth = self._truth.upto(float(np.max(times_s)))
            power = sense(self.sensor, truth, times_s, self.phase_s)
            energy = read_counter(COUNTER, truth, times_s)
            instant = average = np.full_like(power, np.nan)  # (only the sensor's reading)
            self._truth.keep_from(float(np.max(times_s)))
        elif self.truth:
            energy = instant = average = np.full_like(power, np.nan)
        return {
            "power_w": power,
            "power_instant_w": instant,
            "power_avg_w": average,
            "energy_j": energy,
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
        drift: dict[str, object] = {}
        if not self.sim.drift.stationary:
            drift["drift"] = self.sim.drift.name
        if self.sensor is not None:
            drift["sensor"] = {"name": self.sensor.name, "phase_s": self.phase_s}
        return {
            "preset": self.preset.name,
            "seed": self.seed,
            **drift,
            "group_size": k.group_size,
            "concurrency": k.concurrency,
            "power_cap_w": k.power_cap_w,
        }


class _TruthStream:
    """The job's true power on the :data:`TRUTH_STEP_S` grid, computed as far as asked and
    kept as far back as a reading reaches (its sensor's span)."""

    def __init__(self, sim: GrpoSim, sensor: Sensor) -> None:
        self.sim, self.keep_s = sim, sensor.span_s + 2 * TRUTH_STEP_S
        self.k0 = 0  # the grid index of the first kept point
        self.power = np.zeros((sim.preset.gpus, 0))
        self.energy0 = np.zeros(sim.preset.gpus)  # the true energy at the first kept point
        self._truth: Truth | None = None  # (what upto last gave: keep_from reads its energy)

    def upto(self, t_s: float) -> Truth:
        """The truth from the first kept point through the first grid point at or after
        ``t_s``."""
        last = int(np.ceil(t_s / TRUTH_STEP_S - 1e-9))
        have = self.k0 + self.power.shape[1]
        if last >= have:
            grid = np.arange(have, last + 1) * TRUTH_STEP_S
            self.power = np.concatenate([self.power, self.sim.sample(grid).power_w], axis=1)
        self._truth = Truth(self.k0 * TRUTH_STEP_S, TRUTH_STEP_S, self.power, self.energy0)
        return self._truth

    def keep_from(self, t_s: float) -> None:
        """Forget the truth more than a reading's reach before ``t_s`` (after :meth:`upto`)."""
        drop = int(np.floor((t_s - self.keep_s) / TRUTH_STEP_S)) - self.k0
        if drop > 1:
            assert self._truth is not None and self._truth.power is self.power
            self.energy0 = self._truth.cum[:, drop]
            self.power = self.power[:, drop:]
            self.k0 += drop
