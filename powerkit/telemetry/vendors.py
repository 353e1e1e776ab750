"""Opening the GPUs of a vendor: NVIDIA through NVML (``powerkit.telemetry.nvml``), AMD
through amd-smi (``powerkit.telemetry.amdsmi``), or whichever answers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from powerkit.core.errors import BadInputError, DeviceError, option
from powerkit.telemetry.gpu import AMD, NVIDIA, VENDORS, GpuControl, GpuSource


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
            raise DeviceError(
                f"no GPU found (NVML: {nvidia}; amd-smi: {amd}); {option('backend')} sim runs "
                "the simulator instead"
            ) from None


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
