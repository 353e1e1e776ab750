"""A fake ``pynvml`` for tests: the real module's signatures (autospec), replayed readings.

Patch it in at the one seam, ``powerkit.telemetry.nvml.pynvml``::

    fake = FakeNvml(gpus=2)
    monkeypatch.setattr(powerkit.telemetry.nvml, "pynvml", fake.module)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pynvml as real

# constants, ctypes structs and struct versions (``nvmlPowerSmoothingState_v1``) stay real
_CONSTANTS = [
    n
    for n in dir(real)
    if n.startswith(("NVML_", "c_nvml"))
    or (n.startswith("nvml") and isinstance(getattr(real, n), int))
]
_ERRORS = [n for n in dir(real) if n.startswith("NVMLError")]


class FakeNvml:
    """Replays a power profile (mW per GPU per call) through an autospecced pynvml."""

    def __init__(
        self,
        gpus: int = 2,
        *,
        name: str = "NVIDIA H100 80GB HBM3",
        profile_mw: list[list[int]] | None = None,
        fields: bool = True,
        energy: bool = True,
        fail_init: bool = False,
        permit_limits: bool = True,
        autospec: bool = True,
        shared: Path | None = None,
    ) -> None:
        self.gpus = gpus
        self.name = name
        self.profile = profile_mw or [
            [100_000 + 50_000 * g + 1000 * k for k in range(50)] for g in range(gpus)
        ]
        self.calls = [0] * gpus
        self.energy_mj = [1_000_000 * (g + 1) for g in range(gpus)]
        self.limits_mw: list[int] | _SharedList = [700_000] * gpus
        self.locked_mhz: list[int | None] | _SharedList = [None] * gpus  # None: unlocked
        if shared is not None:  # the GPUs' settings outlive the process, as a real GPU's do
            self.limits_mw = _SharedList(shared, "limits_mw", [700_000] * gpus)
            self.locked_mhz = _SharedList(shared, "locked_mhz", [None] * gpus)
        self.fields, self.energy, self.permit_limits = fields, energy, permit_limits
        self.initialized = False
        # autospec checks every call against the real signatures (tests); a plain namespace
        # costs nothing per call (benchmarks of the recorder's own overhead).
        m = mock.create_autospec(real, spec_set=False) if autospec else _Namespace()
        for const in _CONSTANTS:
            setattr(m, const, getattr(real, const))
        for err in _ERRORS:
            setattr(m, err, getattr(real, err))

        def init() -> None:
            if fail_init:
                raise real.NVMLError_LibraryNotFound()
            self.initialized = True

        m.nvmlInit.side_effect = init
        m.nvmlShutdown.side_effect = lambda: setattr(self, "initialized", False)
        m.nvmlDeviceGetCount.side_effect = lambda: self.gpus
        m.nvmlDeviceGetHandleByIndex.side_effect = self._handle
        m.nvmlDeviceGetPowerUsage.side_effect = self._power
        m.nvmlDeviceGetFieldValues.side_effect = self._fields
        m.nvmlDeviceGetTotalEnergyConsumption.side_effect = self._energy
        m.nvmlDeviceGetClockInfo.side_effect = lambda h, kind: (
            1980 if kind == real.NVML_CLOCK_SM else 2619
        )
        m.nvmlDeviceGetUtilizationRates.side_effect = lambda h: SimpleNamespace(gpu=97, memory=40)
        m.nvmlDeviceGetTemperature.side_effect = lambda h, sensor: 61
        m.nvmlDeviceGetPowerManagementLimit.side_effect = lambda h: self.limits_mw[h.index]
        m.nvmlDeviceGetEnforcedPowerLimit.side_effect = lambda h: self.limits_mw[h.index]
        # clocks-event reasons per GPU (a bit field; tests set them), the throttle-reasons
        # name of older drivers answering the same
        self.reasons = [0] * gpus
        m.nvmlDeviceGetCurrentClocksEventReasons.side_effect = lambda h: self.reasons[h.index]
        m.nvmlDeviceGetCurrentClocksThrottleReasons.side_effect = lambda h: self.reasons[h.index]
        m.nvmlDeviceGetPowerManagementDefaultLimit.side_effect = lambda h: 700_000
        m.nvmlDeviceGetPowerManagementLimitConstraints.side_effect = lambda h: (200_000, 700_000)
        m.nvmlDeviceSetPowerManagementLimit.side_effect = self._set_limit
        m.nvmlDeviceGetSupportedMemoryClocks.side_effect = lambda h: [2619, 1593]
        m.nvmlDeviceGetSupportedGraphicsClocks.side_effect = lambda h, mem: list(
            range(1980, 344, -15)
        )
        m.nvmlDeviceSetGpuLockedClocks.side_effect = self._lock
        m.nvmlDeviceResetGpuLockedClocks.side_effect = self._unlock
        m.nvmlSystemGetDriverVersion.side_effect = lambda: "550.54.15"
        # Blackwell's power smoothing (None: the GPU has none), per GPU: on/off, the active
        # preset profile, and each profile's [ramp up mW/s, ramp down mW/s, floor % TGP]
        self.smoothing: list[dict[str, Any]] | None = None
        self.power_profiles: list[int] | None = None  # enforced workload power profile bits
        self.mig: list[list[tuple[int, str]]] | None = None  # per GPU: (GI id, profile name)
        m.nvmlDevicePowerSmoothingUpdatePresetProfileParam.side_effect = self._smoothing_param
        m.nvmlDevicePowerSmoothingActivatePresetProfile.side_effect = self._smoothing_activate
        m.nvmlDevicePowerSmoothingSetState.side_effect = self._smoothing_state
        m.nvmlDeviceWorkloadPowerProfileGetCurrentProfiles.side_effect = self._profiles
        m.nvmlDeviceGetMigMode.side_effect = self._mig_mode
        m.nvmlDeviceGetMaxMigDeviceCount.side_effect = lambda h: 7
        m.nvmlDeviceGetMigDeviceHandleByIndex.side_effect = self._mig_handle
        m.nvmlDeviceGetGpuInstanceId.side_effect = lambda h: self.mig[h.index][h.mig][0]  # type: ignore[index]
        m.nvmlDeviceGetName.side_effect = lambda h: (
            self.name if not hasattr(h, "mig") else f"{self.name} MIG {self.mig[h.index][h.mig][1]}"  # type: ignore[index]
        )
        m.nvmlDeviceGetUUID.side_effect = lambda h: (
            f"GPU-fake-{h.index}" if not hasattr(h, "mig") else f"MIG-fake-{h.index}-{h.mig}"
        )
        self.module = m

    def blackwell(self) -> FakeNvml:
        """These GPUs with Blackwell's power smoothing, off, preset profile 0 active (ramp up
        250 W/s, ramp down 100 W/s, floor 60 %; NVML: mW/s), and workload power profile 0."""
        self.smoothing = [
            {"enabled": False, "profile": 0, "profiles": [[250_000.0, 100_000.0, 60.0]]}
            for _ in range(self.gpus)
        ]
        self.power_profiles = [0]
        return self

    def _smoothing_gpu(self, handle: SimpleNamespace) -> dict[str, Any]:
        if self.smoothing is None:
            raise real.NVMLError_NotSupported()
        if not self.permit_limits:
            raise real.NVMLError_NoPermission()
        return self.smoothing[handle.index]

    def _smoothing_param(self, handle: SimpleNamespace, ref: Any) -> None:
        s, p = self._smoothing_gpu(handle), ref._obj
        assert p.version == real.nvmlPowerSmoothingProfile_v1
        slots = {
            real.NVML_POWER_SMOOTHING_PROFILE_PARAM_RAMP_UP_RATE: 0,
            real.NVML_POWER_SMOOTHING_PROFILE_PARAM_RAMP_DOWN_RATE: 1,
            real.NVML_POWER_SMOOTHING_PROFILE_PARAM_PERCENT_TMP_FLOOR: 2,
        }
        slot = slots[p.paramId]
        # the setter takes rates in W/s; the field values answer mW/s (nvml.h)
        s["profiles"][p.profileId][slot] = p.value * (1000 if slot < 2 else 1)

    def _smoothing_activate(self, handle: SimpleNamespace, ref: Any) -> None:
        self._smoothing_gpu(handle)["profile"] = ref._obj.profileId

    def _smoothing_state(self, handle: SimpleNamespace, ref: Any) -> None:
        assert ref._obj.version == real.nvmlPowerSmoothingState_v1
        self._smoothing_gpu(handle)["enabled"] = ref._obj.state == real.NVML_FEATURE_ENABLED

    def _profiles(self, handle: SimpleNamespace, ref: Any) -> int:
        if self.power_profiles is None:
            raise real.NVMLError_NotSupported()
        for bit in self.power_profiles:
            ref._obj.enforcedProfilesMask.mask[bit // 32] |= 1 << (bit % 32)
        return 0

    def _mig_mode(self, handle: SimpleNamespace) -> list[int]:
        if self.mig is None:
            raise real.NVMLError_NotSupported()
        on = int(bool(self.mig[handle.index]))
        return [on, on]

    def _mig_handle(self, handle: SimpleNamespace, k: int) -> SimpleNamespace:
        if self.mig is None or k >= len(self.mig[handle.index]):
            raise real.NVMLError_NotFound()
        return SimpleNamespace(index=handle.index, mig=k)

    def _handle(self, index: int) -> SimpleNamespace:
        if not 0 <= index < self.gpus:
            raise real.NVMLError_InvalidArgument()
        return SimpleNamespace(index=index)

    def _next_mw(self, index: int) -> int:
        series = self.profile[index]
        value = series[self.calls[index] % len(series)]
        self.calls[index] += 1
        return value

    def _power(self, handle: SimpleNamespace) -> int:
        return self._next_mw(handle.index)

    def _fields(self, handle: SimpleNamespace, ids: list[int]) -> list[SimpleNamespace]:
        if not self.fields:
            raise real.NVMLError_NotSupported()
        mw = self.profile[handle.index][self.calls[handle.index] % len(self.profile[handle.index])]
        out = []
        for requested in ids:
            fid, scope = requested if isinstance(requested, tuple) else (requested, 0)
            smoothing = self._smoothing_field(handle.index, fid, scope)
            if smoothing is not None:
                out.append(smoothing)
                continue
            value = mw + (0 if fid == real.NVML_FI_DEV_POWER_INSTANT else -500)
            out.append(
                SimpleNamespace(
                    fieldId=fid,
                    nvmlReturn=0,
                    valueType=real.NVML_VALUE_TYPE_UNSIGNED_INT,
                    value=SimpleNamespace(uiVal=value),
                )
            )
        return out

    def _smoothing_field(self, gpu: int, fid: int, scope: int) -> SimpleNamespace | None:
        """A power-smoothing field's value (NOT_SUPPORTED without smoothing); None for others."""
        ids = {
            real.NVML_FI_PWR_SMOOTHING_ENABLED: "enabled",
            real.NVML_FI_PWR_SMOOTHING_ACTIVE_PRESET_PROFILE: "profile",
            real.NVML_FI_PWR_SMOOTHING_PROFILE_RAMP_UP_RATE: 0,
            real.NVML_FI_PWR_SMOOTHING_PROFILE_RAMP_DOWN_RATE: 1,
            real.NVML_FI_PWR_SMOOTHING_PROFILE_PERCENT_TMP_FLOOR: 2,
        }
        if fid not in ids:
            return None
        if self.smoothing is None:
            return SimpleNamespace(fieldId=fid, nvmlReturn=real.NVML_ERROR_NOT_SUPPORTED)
        s, key = self.smoothing[gpu], ids[fid]
        value = float(s[key] if isinstance(key, str) else s["profiles"][scope][key])
        return SimpleNamespace(
            fieldId=fid,
            nvmlReturn=0,
            valueType=real.NVML_VALUE_TYPE_DOUBLE,
            value=SimpleNamespace(dVal=value),
        )

    def _energy(self, handle: SimpleNamespace) -> int:
        if not self.energy:
            raise real.NVMLError_NotSupported()
        self.energy_mj[handle.index] += 50_000
        return self.energy_mj[handle.index]

    def _lock(self, handle: SimpleNamespace, lo: int, hi: int) -> None:
        if not self.permit_limits:
            raise real.NVMLError_NoPermission()
        assert lo == hi
        self.locked_mhz[handle.index] = lo

    def _unlock(self, handle: SimpleNamespace) -> None:
        if not self.permit_limits:
            raise real.NVMLError_NoPermission()
        self.locked_mhz[handle.index] = None

    def _set_limit(self, handle: SimpleNamespace, mw: int) -> None:
        if not self.permit_limits:
            raise real.NVMLError_NoPermission()
        self.limits_mw[handle.index] = mw


class _SharedList:
    """A list kept in a JSON file (one key of it), read and written under a file lock, so that
    several processes see one GPU's settings."""

    def __init__(self, path: Path, key: str, initial: list[Any]) -> None:
        self.path, self.key = Path(path), key
        with self._locked() as state:
            state.setdefault(key, initial)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = json.loads(self.path.read_text()) if self.path.exists() else {}
            yield state
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(state))
            tmp.replace(self.path)  # readers outside the lock never see half a file

    def _list(self) -> list[Any]:
        with self._locked() as state:
            return list(state[self.key])

    def __getitem__(self, i: int) -> Any:
        return self._list()[i]

    def __setitem__(self, i: int, value: Any) -> None:
        with self._locked() as state:
            state[self.key][i] = value

    def __eq__(self, other: object) -> bool:
        return self._list() == other

    def __len__(self) -> int:
        return len(self._list())

    def __repr__(self) -> str:
        return repr(self._list())


class _Namespace(SimpleNamespace):
    """Module stand-in whose functions are plain attributes with a ``side_effect`` setter."""

    def __getattr__(self, name: str) -> SimpleNamespace:
        holder = _Callable()
        setattr(self, name, holder)
        return holder


class _Callable(SimpleNamespace):
    side_effect: object = None

    def __call__(self, *args: object) -> object:
        return self.side_effect(*args)  # type: ignore[operator]
