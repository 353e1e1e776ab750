"""NVIDIA GPUs through NVML: the only module in powerkit that touches ``pynvml``.

Tests replace the module attribute ``pynvml`` here with a fake; nothing else sees NVML.
Units: NVML reports power in mW, energy in mJ, clocks in MHz; this module returns W, J, MHz.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pynvml

from powerkit.errors import DeviceError, NotPermittedError
from powerkit.telemetry.base import DeviceInfo, Readings
from powerkit.telemetry.gpu import NVIDIA, GpuControl, GpuSource
from powerkit.trace.semantics import usage_semantics

__all__ = ["NvmlGpu", "NvmlSource", "nvml_session"]


def _map_error(exc: Exception, what: str) -> DeviceError:
    no_permission = getattr(pynvml, "NVMLError_NoPermission", ())
    if no_permission and isinstance(exc, no_permission):
        return NotPermittedError(f"{what}: not permitted (run as root or enable persistence)")
    return DeviceError(f"{what}: {exc}")


@contextlib.contextmanager
def nvml_session() -> Iterator[None]:
    """Initialize NVML for the duration of the block; errors become DeviceError."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise DeviceError(f"NVML is not available ({exc}); is the NVIDIA driver loaded?") from None
    try:
        yield
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


class NvmlGpu(GpuControl):
    """One GPU: one method per reading or control, each in SI units."""

    vendor = NVIDIA

    def __init__(self, index: int) -> None:
        self.index = index
        try:
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as exc:
            raise _map_error(exc, f"GPU {index}") from None
        self._fields_ok = True

    def _call(self, fn_name: str, *args: Any) -> Any:
        try:
            return getattr(pynvml, fn_name)(self.handle, *args)
        except pynvml.NVMLError as exc:
            raise _map_error(exc, f"GPU {self.index}: {fn_name}") from None

    def _maybe(self, fn_name: str, *args: Any) -> Any:
        """Return the reading, or None when this GPU does not support it."""
        try:
            return getattr(pynvml, fn_name)(self.handle, *args)
        except pynvml.NVMLError:
            return None

    def name(self) -> str:
        """Return the marketing name, e.g. ``NVIDIA H100 80GB HBM3``."""
        value = self._call("nvmlDeviceGetName")
        return value.decode() if isinstance(value, bytes) else str(value)

    def uuid(self) -> str | None:
        """Return the GPU UUID."""
        value = self._maybe("nvmlDeviceGetUUID")
        return value.decode() if isinstance(value, bytes) else value

    def power_usage_w(self) -> float:
        """Return nvmlDeviceGetPowerUsage in W (a 1 s average on Ampere and newer)."""
        return float(self._call("nvmlDeviceGetPowerUsage")) / 1000.0

    def power_fields_w(self) -> tuple[float | None, float | None]:
        """Return (instantaneous, averaged) power in W from NVML field values, if offered."""
        if not self._fields_ok:
            return None, None
        ids = [pynvml.NVML_FI_DEV_POWER_INSTANT, pynvml.NVML_FI_DEV_POWER_AVERAGE]
        try:
            values = pynvml.nvmlDeviceGetFieldValues(self.handle, ids)
        except pynvml.NVMLError:
            self._fields_ok = False  # old driver: stop asking every tick
            return None, None
        out = [_field_value(v) for v in values]
        if out[0] is None and out[1] is None:
            self._fields_ok = False
        return (
            None if out[0] is None else out[0] / 1000.0,
            None if out[1] is None else out[1] / 1000.0,
        )

    def energy_j(self) -> float | None:
        """Return the total energy counter in J since the driver loaded (Volta and newer)."""
        value = self._maybe("nvmlDeviceGetTotalEnergyConsumption")
        return None if value is None else float(value) / 1000.0

    def clocks_mhz(self) -> tuple[float | None, float | None]:
        """Return (SM clock, memory clock) in MHz."""
        sm = self._maybe("nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_SM)
        mem = self._maybe("nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_MEM)
        return (None if sm is None else float(sm), None if mem is None else float(mem))

    def utilization_pct(self) -> tuple[float | None, float | None]:
        """Return (GPU, memory) utilization in percent over the driver's sample period."""
        rates = self._maybe("nvmlDeviceGetUtilizationRates")
        if rates is None:
            return None, None
        return float(rates.gpu), float(rates.memory)

    def temperature_c(self) -> float | None:
        """Return the GPU core temperature in degrees C."""
        value = self._maybe("nvmlDeviceGetTemperature", pynvml.NVML_TEMPERATURE_GPU)
        return None if value is None else float(value)

    def power_limit_w(self) -> float | None:
        """Return the power limit set (the management limit: what a change puts back), in W."""
        value = self._maybe("nvmlDeviceGetPowerManagementLimit")
        return None if value is None else float(value) / 1000.0

    def enforced_power_limit_w(self) -> float | None:
        """Return the limit the driver enforces (every limiter applied; the sample's
        ``power_limit_w``), in W: the management limit where the driver has no other."""
        value = self._maybe("nvmlDeviceGetEnforcedPowerLimit")
        return self.power_limit_w() if value is None else float(value) / 1000.0

    def clock_event_reasons(self) -> int | None:
        """Return the clocks-event (throttle) reasons bit field now (nvml.h
        ``nvmlClocksEventReason*``; powerkit.analysis.limits names the bits); older drivers
        answer the same bits as throttle reasons."""
        value = self._maybe("nvmlDeviceGetCurrentClocksEventReasons")
        if value is None:
            value = self._maybe("nvmlDeviceGetCurrentClocksThrottleReasons")
        return None if value is None else int(value)

    def default_power_limit_w(self) -> float | None:
        """Return the default power limit (the board TDP, the nameplate) in W."""
        value = self._maybe("nvmlDeviceGetPowerManagementDefaultLimit")
        return None if value is None else float(value) / 1000.0

    def power_limit_range_w(self) -> tuple[float, float]:
        """Return the (min, max) settable power limit in W."""
        lo, hi = self._call("nvmlDeviceGetPowerManagementLimitConstraints")
        return float(lo) / 1000.0, float(hi) / 1000.0

    def set_power_limit_w(self, watts: float) -> None:
        """Set the power limit in W (needs root); raises NotPermittedError when refused."""
        self._call("nvmlDeviceSetPowerManagementLimit", round(watts * 1000))

    def sm_clock_range_mhz(self) -> tuple[float, float]:
        """Return the (lowest, highest) supported SM clock in MHz at the highest memory clock."""
        memory = max(self._call("nvmlDeviceGetSupportedMemoryClocks"))
        graphics = self._call("nvmlDeviceGetSupportedGraphicsClocks", memory)
        return float(min(graphics)), float(max(graphics))

    def lock_sm_clock_mhz(self, mhz: float) -> None:
        """Lock the SM clock at ``mhz`` (min = max; needs root): NotPermittedError when refused."""
        self._call("nvmlDeviceSetGpuLockedClocks", round(mhz), round(mhz))

    def reset_locked_clocks(self) -> None:
        """Undo any SM clock lock (the driver chooses the clock again)."""
        self._call("nvmlDeviceResetGpuLockedClocks")


def _field_value(v: Any) -> float | None:
    if getattr(v, "nvmlReturn", 1) != 0:
        return None
    kind = v.valueType
    attr = {
        pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
        pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    }.get(kind, "uiVal")
    return float(getattr(v.value, attr))


class NvmlSource(GpuSource):
    """Every visible GPU (or a chosen subset) read through NVML at wall-clock time."""

    source_name = "nvml"
    vendor = NVIDIA
    gpus: list[NvmlGpu]

    def __init__(self, gpus: Sequence[int] | None = None) -> None:
        self._session = nvml_session()
        self._session.__enter__()
        try:
            count = int(pynvml.nvmlDeviceGetCount())
            chosen = list(range(count)) if gpus is None else list(gpus)
            bad = [g for g in chosen if not 0 <= g < count]
            if bad:
                raise DeviceError(f"no GPU {bad[0]} (this host has {count}: 0-{count - 1})")
            if not chosen:
                raise DeviceError("no NVIDIA GPU visible to NVML")
            self.gpus = [NvmlGpu(i) for i in chosen]
            instant, _ = self.gpus[0].power_fields_w()
        except BaseException:
            self.close()
            raise
        self.power_semantics = (
            "instant" if instant is not None else usage_semantics(self.gpus[0].name())
        )
        self.host = socket.gethostname()
        self._devices = [
            DeviceInfo(
                index=g.index,
                name=g.name(),
                uuid=g.uuid(),
                nameplate_w=g.default_power_limit_w(),
                power_limit_w=g.power_limit_w(),
            )
            for g in self.gpus
        ]

    def devices(self) -> list[DeviceInfo]:
        """Return the GPUs being read."""
        return self._devices

    def read_now(self, elapsed_s: float) -> Readings:
        """Return one reading per GPU; unsupported readings are NaN."""
        per_gpu = [_read(g) for g in self.gpus]
        return {
            key: np.array([np.nan if r[key] is None else r[key] for r in per_gpu], dtype=float)
            for key in per_gpu[0]
        }

    def read_power(self, elapsed_s: float) -> Readings:
        """Return power (as ``read_now`` reads it) and the energy counter alone."""
        power, energy = [], []
        for g in self.gpus:
            instant, _ = g.power_fields_w()
            power.append(instant if instant is not None else g.power_usage_w())
            e = g.energy_j()
            energy.append(np.nan if e is None else e)
        return {"power_w": np.array(power, dtype=float), "energy_j": np.array(energy)}

    def extra_metadata(self) -> dict[str, object]:
        """Return the driver version and the NVML field used for power_w."""
        driver = None
        with contextlib.suppress(pynvml.NVMLError):
            raw = pynvml.nvmlSystemGetDriverVersion()
            driver = raw.decode() if isinstance(raw, bytes) else raw
        return {
            "driver": driver,
            "power_field": "NVML_FI_DEV_POWER_INSTANT"
            if self.power_semantics == "instant"
            else "nvmlDeviceGetPowerUsage",
        }

    def close(self) -> None:
        """Shut NVML down."""
        if self._session is not None:
            self._session.__exit__(None, None, None)
            self._session = None  # type: ignore[assignment]


def _read(g: NvmlGpu) -> dict[str, float | None]:
    """Return one GPU's readings, named as the canonical columns (None: not supported)."""
    instant, average = g.power_fields_w()
    usage = g.power_usage_w()
    sm, mem = g.clocks_mhz()
    util, mem_util = g.utilization_pct()
    return {
        "power_w": instant if instant is not None else usage,
        "power_instant_w": instant,
        "power_avg_w": average if average is not None else usage,
        "energy_j": g.energy_j(),
        "sm_clock_mhz": sm,
        "mem_clock_mhz": mem,
        "gpu_util": util,
        "mem_util": mem_util,
        "temp_c": g.temperature_c(),
        "power_limit_w": g.enforced_power_limit_w(),
        "clock_event_reasons": g.clock_event_reasons(),
    }
