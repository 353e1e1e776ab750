"""NVIDIA GPUs through NVML: the only module in powerkit that touches ``pynvml``.

Tests replace the module attribute ``pynvml`` here with a fake; nothing else sees NVML.
Units: NVML reports power in mW, energy in mJ, clocks in MHz; this module returns W, J, MHz.
"""

from __future__ import annotations

import contextlib
import ctypes
import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pynvml

from powerkit.core.errors import BadInputError, DeviceError, NotPermittedError
from powerkit.telemetry.gpu import NVIDIA, GpuControl, GpuSource, chosen_gpus, library_session
from powerkit.trace.semantics import usage_semantics

__all__ = ["NvmlGpu", "NvmlSource", "Smoothing", "nvml_session", "open_gpus"]


#: the clocks-event reasons call, and its name on drivers before r535
_REASONS_FN, _THROTTLE_FN = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)


def _map_error(exc: Exception, what: str) -> DeviceError:
    no_permission = getattr(pynvml, "NVMLError_NoPermission", ())
    if no_permission and isinstance(exc, no_permission):
        return NotPermittedError(f"{what}: not permitted (run as root or enable persistence)")
    return DeviceError(f"{what}: {exc}")


def nvml_session() -> contextlib.AbstractContextManager[None]:
    """Initialize NVML for the duration of the block; errors become DeviceError."""
    return library_session(
        pynvml.nvmlInit,
        pynvml.nvmlShutdown,
        pynvml.NVMLError,
        "NVML is not available ({}); is the NVIDIA driver loaded?",
    )


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
        self._reasons_fn = _REASONS_FN

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
        return _text(self._call("nvmlDeviceGetName"))

    def uuid(self) -> str | None:
        """Return the GPU UUID."""
        value = self._maybe("nvmlDeviceGetUUID")
        return None if value is None else _text(value)

    def power_usage_w(self) -> float:
        """Return nvmlDeviceGetPowerUsage in W (a 1 s average on Ampere and newer).

        Command line equivalent: ``nvidia-smi --query-gpu=power.draw``."""
        return float(self._call("nvmlDeviceGetPowerUsage")) / 1000.0

    def power_fields_w(self) -> tuple[float | None, float | None]:
        """Return (instantaneous, averaged) power in W from NVML field values, if offered.

        Command line equivalent:
        ``nvidia-smi --query-gpu=power.draw.instant,power.draw.average``."""
        if not self._fields_ok:
            return None, None
        out = self._fields([pynvml.NVML_FI_DEV_POWER_INSTANT, pynvml.NVML_FI_DEV_POWER_AVERAGE])
        if out is None or (out[0] is None and out[1] is None):
            self._fields_ok = False  # old driver: stop asking every tick
            return None, None
        return (
            None if out[0] is None else out[0] / 1000.0,
            None if out[1] is None else out[1] / 1000.0,
        )

    def energy_j(self) -> float | None:
        """Return the total energy counter in J since the driver loaded (Volta and newer).

        Command line equivalent: ``nvidia-smi --query-gpu=total_energy_consumption`` (mJ)."""
        value = self._maybe("nvmlDeviceGetTotalEnergyConsumption")
        return None if value is None else float(value) / 1000.0

    def clocks_mhz(self) -> tuple[float | None, float | None]:
        """Return (SM clock, memory clock) in MHz.

        Command line equivalent: ``nvidia-smi --query-gpu=clocks.sm,clocks.mem``."""
        sm = self._maybe("nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_SM)
        mem = self._maybe("nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_MEM)
        return (None if sm is None else float(sm), None if mem is None else float(mem))

    def utilization_pct(self) -> tuple[float | None, float | None]:
        """Return (GPU, memory) utilization in percent over the driver's sample period.

        Command line equivalent: ``nvidia-smi --query-gpu=utilization.gpu,utilization.memory``."""
        rates = self._maybe("nvmlDeviceGetUtilizationRates")
        if rates is None:
            return None, None
        return float(rates.gpu), float(rates.memory)

    def temperature_c(self) -> float | None:
        """Return the GPU core temperature in degrees C.

        Command line equivalent: ``nvidia-smi --query-gpu=temperature.gpu``."""
        value = self._maybe("nvmlDeviceGetTemperature", pynvml.NVML_TEMPERATURE_GPU)
        return None if value is None else float(value)

    def power_limit_w(self) -> float | None:
        """Return the power limit set (the management limit: what a change puts back), in W.

        Command line equivalent: ``nvidia-smi --query-gpu=power.limit``."""
        value = self._maybe("nvmlDeviceGetPowerManagementLimit")
        return None if value is None else float(value) / 1000.0

    def enforced_power_limit_w(self) -> float | None:
        """Return the limit the driver enforces (every limiter applied; the sample's
        ``power_limit_w``), in W: the management limit where the driver has no other.

        Command line equivalent: ``nvidia-smi --query-gpu=enforced.power.limit``."""
        value = self._maybe("nvmlDeviceGetEnforcedPowerLimit")
        return self.power_limit_w() if value is None else float(value) / 1000.0

    def clock_event_reasons(self) -> int | None:
        """Return the clocks-event (throttle) reasons bit field now (nvml.h
        ``nvmlClocksEventReason*``; powerkit.analysis.limits names the bits); older drivers
        answer the same bits as throttle reasons."""
        value = self._maybe(self._reasons_fn)
        if value is None and self._reasons_fn == _REASONS_FN:  # an older driver: ask it so
            self._reasons_fn = _THROTTLE_FN  # from now on (not two calls every tick)
            value = self._maybe(self._reasons_fn)
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

    def _fields(self, ids: list[Any]) -> list[float | None] | None:
        """Field values (ids, or (id, scope) pairs); None when the driver knows none of them."""
        try:
            values = pynvml.nvmlDeviceGetFieldValues(self.handle, ids)
        except pynvml.NVMLError:
            return None
        return [_field_value(v) for v in values]

    def smoothing(self) -> Smoothing | None:
        """Return the power-smoothing state (Blackwell and later, driver 570+): on or off, the
        active preset profile and its ramp rates and floor; None where driver or GPU lacks it."""
        state = self._fields(
            [
                pynvml.NVML_FI_PWR_SMOOTHING_ENABLED,
                pynvml.NVML_FI_PWR_SMOOTHING_ACTIVE_PRESET_PROFILE,
            ]
        )
        if state is None or state[0] is None or state[1] is None:
            return None
        profile = int(state[1])
        params = self._fields([(field, profile) for field in _SMOOTHING_FIELDS])
        if params is None or any(v is None for v in params):
            return None
        up, down, floor = (float(v) for v in params)  # type: ignore[arg-type]
        return Smoothing(bool(state[0]), profile, up / 1000.0, down / 1000.0, floor)

    def set_smoothing(self, s: Smoothing) -> None:
        """Write ``s``'s ramp rates and floor into its preset profile, activate the profile and
        switch smoothing on or off; NotPermittedError when refused (root is needed)."""
        try:
            self._set_smoothing(s)
        except NotPermittedError:
            raise NotPermittedError(
                "setting power smoothing is not permitted: run as root (or with CAP_SYS_ADMIN)"
            ) from None

    def _set_smoothing(self, s: Smoothing) -> None:
        for param, value in (
            # (the setter takes W/s; the field values read back are in mW/s: nvml.h)
            (pynvml.NVML_POWER_SMOOTHING_PROFILE_PARAM_RAMP_UP_RATE, s.ramp_up_w_per_s),
            (pynvml.NVML_POWER_SMOOTHING_PROFILE_PARAM_RAMP_DOWN_RATE, s.ramp_down_w_per_s),
            (pynvml.NVML_POWER_SMOOTHING_PROFILE_PARAM_PERCENT_TMP_FLOOR, s.floor_pct),
        ):
            self._call(
                "nvmlDevicePowerSmoothingUpdatePresetProfileParam",
                ctypes.byref(_profile_param(s.profile, param, value)),
            )
        self._call(
            "nvmlDevicePowerSmoothingActivatePresetProfile",
            ctypes.byref(_profile_param(s.profile, 0, 0.0)),
        )
        state = pynvml.c_nvmlPowerSmoothingState_v1_t()
        state.version = pynvml.nvmlPowerSmoothingState_v1
        state.state = pynvml.NVML_FEATURE_ENABLED if s.enabled else pynvml.NVML_FEATURE_DISABLED
        self._call("nvmlDevicePowerSmoothingSetState", ctypes.byref(state))

    def power_profiles(self) -> list[str] | None:
        """Return the workload power profiles the driver enforces (Blackwell: ``max_p``,
        ``llm_training``, ...); None where driver or GPU lacks them."""
        current = pynvml.c_nvmlWorkloadPowerProfileCurrentProfiles_v1_t()
        current.version = pynvml.nvmlWorkloadPowerProfileCurrentProfiles_v1
        if (
            self._maybe("nvmlDeviceWorkloadPowerProfileGetCurrentProfiles", ctypes.byref(current))
            is None
        ):
            return None
        words = list(current.enforcedProfilesMask.mask)
        return [name for bit, name in _PROFILE_NAMES.items() if words[bit // 32] >> (bit % 32) & 1]

    def mig_instances(self) -> list[dict[str, object]]:
        """Return the MIG instances of this GPU (GPU-instance id, UUID, name); none where MIG
        is off or unsupported. Power stays the physical GPU's: NVML reads no power per
        instance."""
        mode = self._maybe("nvmlDeviceGetMigMode")
        if not mode or mode[0] != pynvml.NVML_DEVICE_MIG_ENABLE:
            return []
        out: list[dict[str, object]] = []
        for k in range(int(self._maybe("nvmlDeviceGetMaxMigDeviceCount") or 0)):
            mig = self._maybe("nvmlDeviceGetMigDeviceHandleByIndex", k)
            if mig is None:
                continue
            with contextlib.suppress(pynvml.NVMLError):
                name, uuid = pynvml.nvmlDeviceGetName(mig), pynvml.nvmlDeviceGetUUID(mig)
                out.append(
                    {
                        "id": int(pynvml.nvmlDeviceGetGpuInstanceId(mig)),
                        "profile": _text(name),
                        "uuid": _text(uuid),
                    }
                )
        return out


@dataclass(frozen=True)
class Smoothing:
    """A GPU's power-smoothing setting: on or off, its preset profile, ramp-up and ramp-down
    rates in W/s (NVML's field values give mW/s, its setter takes W/s) and floor in % of the
    board's TGP."""

    enabled: bool
    profile: int
    ramp_up_w_per_s: float
    ramp_down_w_per_s: float
    floor_pct: float

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Smoothing:
        """A journaled setting back as a Smoothing (a hand-edited journal is one line)."""
        try:
            return cls(**settings)
        except TypeError as exc:
            raise BadInputError(f"cap journal: not a power-smoothing setting ({exc})") from None


_SMOOTHING_FIELDS = (
    pynvml.NVML_FI_PWR_SMOOTHING_PROFILE_RAMP_UP_RATE,
    pynvml.NVML_FI_PWR_SMOOTHING_PROFILE_RAMP_DOWN_RATE,
    pynvml.NVML_FI_PWR_SMOOTHING_PROFILE_PERCENT_TMP_FLOOR,
)
#: workload power profile bit -> name (nvml.h NVML_POWER_PROFILE_*)
_PROFILE_NAMES = {
    getattr(pynvml, n): n.removeprefix("NVML_POWER_PROFILE_").lower()
    for n in dir(pynvml)
    if n.startswith("NVML_POWER_PROFILE_") and "OPERATION" not in n and not n.endswith("_MAX")
}


def _profile_param(profile: int, param: int, value: float) -> Any:
    struct = pynvml.c_nvmlPowerSmoothingProfile_v1_t()
    struct.version = pynvml.nvmlPowerSmoothingProfile_v1
    struct.profileId, struct.paramId, struct.value = profile, param, value
    return struct


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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


def open_gpus(gpus: Sequence[int] | None = None) -> list[NvmlGpu]:
    """The chosen GPUs (indices; None: all) in an open NVML session; DeviceError for an index
    the host does not have, or no GPU."""
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except pynvml.NVMLError as exc:
        raise _map_error(exc, "NVML") from None
    return [NvmlGpu(i) for i in chosen_gpus(gpus, count, "NVIDIA GPU visible to NVML")]


class NvmlSource(GpuSource):
    """Every visible GPU (or a chosen subset) read through NVML at wall-clock time."""

    source_name = "nvml"
    vendor = NVIDIA
    gpus: list[NvmlGpu]

    def __init__(self, gpus: Sequence[int] | None = None) -> None:
        self._enter(nvml_session())
        try:
            self.gpus = open_gpus(gpus)
            instant, _ = self.gpus[0].power_fields_w()
        except BaseException:
            self.close()
            raise
        self.power_semantics = (
            "instant" if instant is not None else usage_semantics(self.gpus[0].name())
        )
        self.host = socket.gethostname()
        self._describe()

    def read_gpu(self, gpu: GpuControl) -> dict[str, float | None]:
        """One GPU's readings, named as the canonical columns (None: not supported)."""
        assert isinstance(gpu, NvmlGpu)
        instant, average = gpu.power_fields_w()
        usage = gpu.power_usage_w()
        sm, mem = gpu.clocks_mhz()
        util, mem_util = gpu.utilization_pct()
        reasons = gpu.clock_event_reasons()
        return {
            "power_w": instant if instant is not None else usage,
            "power_instant_w": instant,
            "power_avg_w": average if average is not None else usage,
            "energy_j": gpu.energy_j(),
            "sm_clock_mhz": sm,
            "mem_clock_mhz": mem,
            "gpu_util": util,
            "mem_util": mem_util,
            "temp_c": gpu.temperature_c(),
            "power_limit_w": gpu.enforced_power_limit_w(),
            "clock_event_reasons": None if reasons is None else float(reasons),
        }

    def read_gpu_power(self, gpu: GpuControl) -> tuple[float, float | None]:
        """Power (the instantaneous field, else the power usage) and the energy counter."""
        assert isinstance(gpu, NvmlGpu)
        instant, _ = gpu.power_fields_w()
        return (instant if instant is not None else gpu.power_usage_w()), gpu.energy_j()

    def extra_metadata(self) -> dict[str, object]:
        """Return the driver version and the NVML field used for power_w."""
        driver = None
        with contextlib.suppress(pynvml.NVMLError):
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        extra: dict[str, object] = {
            "driver": driver,
            "power_field": "NVML_FI_DEV_POWER_INSTANT"
            if self.power_semantics == "instant"
            else "nvmlDeviceGetPowerUsage",
        }
        # MIG instances, power smoothing and power profiles, where the GPUs have them
        mig = [
            {"host": self.host, "gpu": g.index, "instances": found}
            for g in self.gpus
            if (found := g.mig_instances())
        ]
        if mig:
            extra["mig_instances"] = mig
        smoothing = {str(g.index): asdict(s) for g in self.gpus if (s := g.smoothing()) is not None}
        if smoothing:
            extra["power_smoothing"] = smoothing
        profiles = {str(g.index): p for g in self.gpus if (p := g.power_profiles()) is not None}
        if profiles:
            extra["power_profiles"] = profiles
        return extra
