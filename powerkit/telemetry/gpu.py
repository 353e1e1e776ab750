"""The control seam both GPU vendors implement: what ``sweep``, ``pfi sweep``, ``bloat`` and
``restore`` change on a GPU (power limit, locked SM clock) and read back to put it back.

:class:`GpuControl` is one GPU, in SI units; :class:`GpuSource` is a telemetry source whose
GPUs can be controlled. NVIDIA GPUs come through NVML (powerkit.telemetry.nvml), AMD Instinct
GPUs through amd-smi's Python library (powerkit.telemetry.amdsmi). Every change goes through
powerkit.sweep.caps, which journals the original first (powerkit.sweep.journal).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

from powerkit.errors import BadInputError, DeviceError
from powerkit.telemetry.base import TelemetrySource

__all__ = ["AMD", "NVIDIA", "VENDORS", "GpuControl", "GpuSource", "open_gpu", "open_gpu_source"]

NVIDIA, AMD = "nvidia", "amd"
VENDORS = (NVIDIA, AMD)


class GpuControl(ABC):
    """One GPU's settable state: the power limit and the SM (graphics) clock lock."""

    index: int
    vendor: str

    @abstractmethod
    def uuid(self) -> str | None:
        """Return the GPU's UUID (what the journal checks before putting a limit back)."""

    @abstractmethod
    def power_limit_w(self) -> float | None:
        """Return the power limit in force, in W (None: not readable)."""

    @abstractmethod
    def power_limit_range_w(self) -> tuple[float, float]:
        """Return the (min, max) settable power limit in W."""

    @abstractmethod
    def set_power_limit_w(self, watts: float) -> None:
        """Set the power limit in W; NotPermittedError when refused."""

    @abstractmethod
    def sm_clock_range_mhz(self) -> tuple[float, float]:
        """Return the (lowest, highest) SM clock that can be locked, in MHz."""

    @abstractmethod
    def lock_sm_clock_mhz(self, mhz: float) -> None:
        """Lock the SM clock at ``mhz``; NotPermittedError when refused."""

    @abstractmethod
    def reset_locked_clocks(self) -> None:
        """Undo any SM clock lock (the driver chooses the clock again)."""


class GpuSource(TelemetrySource):
    """A telemetry source over real GPUs, each of which can be controlled."""

    gpus: Sequence[GpuControl]
    vendor: str


def open_gpu_source(gpus: list[int] | None = None, vendor: str | None = None) -> GpuSource:
    """Open the GPUs of ``vendor`` (``nvidia``, ``amd``; None: NVIDIA through NVML if its
    driver answers, else AMD through amd-smi), ``gpus`` their indices (None: all)."""
    from powerkit.telemetry.amdsmi import AmdSmiSource
    from powerkit.telemetry.nvml import NvmlSource

    if vendor == NVIDIA:
        return NvmlSource(gpus)
    if vendor == AMD:
        return AmdSmiSource(gpus)
    if vendor is not None:
        raise BadInputError(f"GPU vendor {vendor!r}: one of {', '.join(VENDORS)}")
    try:
        return NvmlSource(gpus)
    except DeviceError as nvidia:
        try:
            return AmdSmiSource(gpus)
        except DeviceError as amd:
            raise DeviceError(f"no GPU found: {nvidia}; {amd}") from None


@contextlib.contextmanager
def open_gpu(vendor: str, index: int) -> Iterator[GpuControl]:
    """One GPU of ``vendor`` by index, its library open for the block (``restore``)."""
    if vendor == AMD:
        from powerkit.telemetry.amdsmi import AmdGpu, amdsmi_session

        with amdsmi_session():
            yield AmdGpu(index)
        return
    if vendor != NVIDIA:
        raise BadInputError(f"cap journal: GPU vendor {vendor!r}: one of {', '.join(VENDORS)}")
    from powerkit.telemetry.nvml import NvmlGpu, nvml_session

    with nvml_session():
        yield NvmlGpu(index)
