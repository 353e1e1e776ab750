"""The telemetry seam: what a source of GPU readings offers the recorder."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = ["DeviceInfo", "Readings", "TelemetrySource"]

# Column name -> array shaped (gpus,) for one tick or (gpus, n) for a block. Missing
# readings are NaN. Annotation columns (step, phase, ...) are shaped (n,) in a block.
Readings = dict[str, np.ndarray]


@dataclass(frozen=True)
class DeviceInfo:
    """One GPU as the source sees it; powers in W."""

    index: int
    name: str
    uuid: str | None
    nameplate_w: float | None  # default power limit (TDP)
    power_limit_w: float | None  # limit in force when recording started


class TelemetrySource(ABC):
    """A set of GPUs that can be read now (hardware) or at given times (simulator)."""

    host: str
    source_name: str
    power_semantics: str
    #: True when time is simulated: the recorder asks for whole blocks of tick times.
    virtual_time: bool = False

    @abstractmethod
    def devices(self) -> list[DeviceInfo]:
        """Return the GPUs this source reads, in output order."""

    @abstractmethod
    def read_now(self, elapsed_s: float) -> Readings:
        """Return one reading per GPU, taken now (``elapsed_s`` since recording start)."""

    def read_power(self, elapsed_s: float) -> Readings:
        """Return power and the energy counter alone (``power_w``, ``energy_j``), taken now:
        what a measurement's edge needs (powerkit.Monitor); by default a whole reading."""
        return self.read_now(elapsed_s)

    def read_block(self, times_s: np.ndarray) -> Readings:
        """Return readings at many times (s since start); only virtual-time sources."""
        raise NotImplementedError

    def extra_metadata(self) -> dict[str, object]:
        """Return source-specific metadata for the trace (preset, seed, driver, ...)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the source (shut NVML down, ...)."""
