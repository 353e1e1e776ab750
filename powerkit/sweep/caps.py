"""GPU power caps for the sweep's cap axis: set per point, always restored, and journaled.

The original limits go into the cap journal (powerkit/sweep/journal.py) before the first
change, so that even a SIGKILL leaves a record ``powerkit restore`` can act on. A GPU whose
limit a killed run left behind is adopted: its journaled original is the one restored.
"""

from __future__ import annotations

from types import TracebackType

from powerkit.errors import BadInputError, NotPermittedError
from powerkit.sweep import journal
from powerkit.telemetry.nvml import NvmlGpu

__all__ = ["PowerCaps"]


class PowerCaps:
    """Context manager over NVML GPUs: ``set(watts)`` per point; the original limits come back
    on exit, whether the sweep ended, failed or was interrupted."""

    def __init__(self, gpus: list[NvmlGpu]) -> None:
        self.gpus = gpus
        self.original: list[float | None] = []
        #: journal entries of killed runs whose limits this run will restore
        self.adopted: list[journal.CapEntry] = []

    def __enter__(self) -> PowerCaps:
        left = {(e.gpu, e.uuid): e for e in journal.stale()}
        self.original = []
        originals: list[tuple[int, str | None, float]] = []
        for gpu in self.gpus:
            uuid = gpu.uuid()
            entry = left.get((gpu.index, uuid))
            value = entry.original_w if entry is not None else gpu.power_limit_w()
            if entry is not None:
                self.adopted.append(entry)
            self.original.append(value)
            if value is not None and entry is None:
                originals.append((gpu.index, uuid, value))
        journal.add_entries(originals)  # before any change
        return self

    def set(self, watts: float | None) -> None:
        """Set every GPU's limit to ``watts`` (None: back to the original limit)."""
        for gpu, original in zip(self.gpus, self.original, strict=True):
            target = original if watts is None else watts
            if target is None:
                continue
            lo, hi = gpu.power_limit_range_w()
            if not lo <= target <= hi:
                raise BadInputError(
                    f"power cap {target:g} W is outside GPU {gpu.index}'s range {lo:g}-{hi:g} W"
                )
            try:
                gpu.set_power_limit_w(target)
            except NotPermittedError:
                raise NotPermittedError(
                    "setting GPU power limits is not permitted: run as root (or with "
                    "CAP_SYS_ADMIN), or drop the power-cap axis"
                ) from None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        failed: list[Exception] = []
        for gpu, original in zip(self.gpus, self.original, strict=True):
            if original is not None:
                try:  # every GPU gets its limit back, even if another one fails
                    gpu.set_power_limit_w(original)
                except Exception as error:
                    failed.append(error)
        if failed:
            if exc is None:
                raise failed[0]
            return  # the journal keeps what could not be restored
        journal.remove_entries()
        for entry in self.adopted:
            journal.remove_entries([entry.gpu], pid=entry.pid)
