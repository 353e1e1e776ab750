"""GPU power caps for the sweep's cap axis: set per point, always restored."""

from __future__ import annotations

from types import TracebackType

from powerkit.errors import BadInputError, NotPermittedError
from powerkit.telemetry.nvml import NvmlGpu

__all__ = ["PowerCaps"]


class PowerCaps:
    """Context manager over NVML GPUs: ``set(watts)`` per point; the original limits come back
    on exit, whether the sweep ended, failed or was interrupted."""

    def __init__(self, gpus: list[NvmlGpu]) -> None:
        self.gpus = gpus
        self.original: list[float | None] = []

    def __enter__(self) -> PowerCaps:
        self.original = [g.power_limit_w() for g in self.gpus]
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
        if failed and exc is None:
            raise failed[0]
