"""The control seam both GPU vendors implement: what ``sweep``, ``pfi sweep``, ``bloat`` and
``restore`` change on a GPU (power limit, locked SM clock) and read back to put it back.

:class:`GpuControl` is one GPU, in SI units; :class:`GpuSource` is a telemetry source whose
GPUs can be controlled. NVIDIA GPUs come through NVML (powerkit.telemetry.nvml), AMD Instinct
GPUs through amd-smi's Python library (powerkit.telemetry.amdsmi). Every change goes through
powerkit.actuation.caps, which journals the original first (powerkit.actuation.journal).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from powerkit.core.errors import DeviceError
from powerkit.telemetry.base import DeviceInfo, Readings, TelemetrySource

__all__ = ["AMD", "NVIDIA", "VENDORS", "GpuControl", "GpuSource", "chosen_gpus"]

NVIDIA, AMD = "nvidia", "amd"
VENDORS = (NVIDIA, AMD)


class GpuControl(ABC):
    """One GPU's settable state: the power limit and the SM (graphics) clock lock."""

    index: int
    vendor: str

    @abstractmethod
    def name(self) -> str:
        """Return the marketing name (``NVIDIA H100 80GB HBM3``, ``AMD Instinct MI300X``)."""

    @abstractmethod
    def default_power_limit_w(self) -> float | None:
        """Return the default power limit (the board's TDP: its nameplate) in W."""

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
    """A telemetry source over real GPUs, each of which can be controlled: read at wall-clock
    time, one reading per GPU, NaN where a GPU does not support one."""

    gpus: Sequence[GpuControl]
    vendor: str
    _devices: list[DeviceInfo]
    _session: contextlib.AbstractContextManager[None] | None = None

    def _enter(self, session: contextlib.AbstractContextManager[None]) -> None:
        """Open the vendor's library for the source's life (``close`` shuts it down)."""
        session.__enter__()
        self._session = session

    def close(self) -> None:
        """Shut the vendor's library down (once)."""
        if self._session is not None:
            session, self._session = self._session, None
            session.__exit__(None, None, None)

    def _describe(self) -> None:
        """Note each GPU as recording starts (name, UUID, nameplate, limit in force)."""
        self._devices = [
            DeviceInfo(g.index, g.name(), g.uuid(), g.default_power_limit_w(), g.power_limit_w())
            for g in self.gpus
        ]

    def devices(self) -> list[DeviceInfo]:
        """Return the GPUs being read."""
        return self._devices

    @abstractmethod
    def read_gpu(self, gpu: GpuControl) -> dict[str, float | None]:
        """One GPU's readings, named as the canonical columns (None: not supported)."""

    @abstractmethod
    def read_gpu_power(self, gpu: GpuControl) -> tuple[float, float | None]:
        """One GPU's power (W, as ``read_gpu`` reads it) and energy counter (J, None: none)."""

    def read_now(self, elapsed_s: float) -> Readings:
        """Return one reading per GPU; unsupported readings are NaN."""
        per_gpu = [self.read_gpu(g) for g in self.gpus]
        return {
            key: np.array([np.nan if r[key] is None else r[key] for r in per_gpu], dtype=float)
            for key in per_gpu[0]
        }

    def read_power(self, elapsed_s: float) -> Readings:
        """Return power (as ``read_now`` reads it) and the energy counter alone."""
        both = [self.read_gpu_power(g) for g in self.gpus]
        return {
            "power_w": np.array([p for p, _ in both], dtype=float),
            "energy_j": np.array([np.nan if e is None else e for _, e in both], dtype=float),
        }


def chosen_gpus(gpus: Sequence[int] | None, count: int, what: str) -> list[int]:
    """The indices asked for (None: all ``count``); DeviceError naming an index the host lacks,
    or no GPU at all (``what``: ``NVIDIA GPU visible to NVML``, ...)."""
    chosen = list(range(count)) if gpus is None else list(gpus)
    bad = [g for g in chosen if not 0 <= g < count]
    if bad:
        raise DeviceError(f"no GPU {bad[0]} (this host has {count}: 0-{count - 1})")
    if not chosen:
        raise DeviceError(f"no {what}")
    return chosen


@contextlib.contextmanager
def library_session(
    init: Callable[[], object],
    shutdown: Callable[[], object],
    errors: type[Exception],
    unavailable: str,
) -> Iterator[None]:
    """A vendor library open for the block: ``init()`` failing with ``errors`` is a
    DeviceError, ``unavailable`` (its ``{}`` the library's word) saying so; ``shutdown()`` at
    the end, its errors ignored (the GPUs are let go either way)."""
    try:
        init()
    except errors as exc:
        raise DeviceError(unavailable.format(exc)) from None
    try:
        yield
    finally:
        with contextlib.suppress(errors):
            shutdown()
