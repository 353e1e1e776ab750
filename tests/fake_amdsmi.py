"""A fake ``amdsmi`` for tests: amd-smi's Python names and return shapes (ROCm 6.2+), replayed
readings, settable caps and clocks.

Patch it in at the one seam, ``powerkit.telemetry.amdsmi.amdsmi``::

    fake = FakeAmdSmi(gpus=2)
    monkeypatch.setattr(powerkit.telemetry.amdsmi, "amdsmi", fake.module)

The real library is not installed where the suite runs (it needs ROCm); the fake keeps its
calling conventions: every per-GPU call takes a handle from ``amdsmi_get_processor_handles``,
errors are ``AmdSmiLibraryException`` with amd-smi's status codes, unsupported readings are
``"N/A"``, the power-cap struct is in µW (bare metal) or W (a virtualization host).
"""

from __future__ import annotations

import enum
from types import SimpleNamespace
from typing import Any

NOT_SUPPORTED, NO_PERM, NOT_INIT = 2, 10, 32


class AmdSmiException(Exception):
    """amd-smi's base exception."""


class AmdSmiLibraryException(AmdSmiException):
    """A library call that failed, with its status code."""

    def __init__(self, code: int) -> None:
        super().__init__(f"amd-smi status {code}")
        self.err_code = code

    def get_error_code(self) -> int:
        """The status code (amdsmi_wrapper.AMDSMI_STATUS_*)."""
        return self.err_code


class AmdSmiClkType(enum.IntEnum):
    SYS = 0
    GFX = 0
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4


class AmdSmiTemperatureType(enum.IntEnum):
    EDGE = 0
    HOTSPOT = 1
    VRAM = 2


class AmdSmiTemperatureMetric(enum.IntEnum):
    CURRENT = 0


class AmdSmiDevPerfLevel(enum.IntEnum):
    AUTO = 0
    LOW = 1
    HIGH = 2
    MANUAL = 3


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class FakeAmdSmi:
    """Replays socket power (W per GPU per call) through amd-smi's Python names."""

    def __init__(
        self,
        gpus: int = 2,
        *,
        name: str = "AMD Instinct MI300X",
        profile_w: list[list[float]] | None = None,
        current: bool = True,
        cap_unit: float = 1e6,
        fail_init: bool = False,
        permit: bool = True,
    ) -> None:
        self.gpus, self.name = gpus, name
        self.profile = profile_w or [[300.0 + 50 * g + k for k in range(50)] for g in range(gpus)]
        self.calls = [0] * gpus
        self.current, self.cap_unit, self.permit = current, cap_unit, permit
        self.caps_w = [750.0] * gpus
        self.gfx_range: list[tuple[int, int] | None] = [None] * gpus  # None: auto
        self.perf_level = [AmdSmiDevPerfLevel.AUTO] * gpus
        self.energy_ticks = [1_000_000 * (g + 1) for g in range(gpus)]
        #: how far the accumulator moves at each read (a test makes it fall, or leap)
        self.energy_step = 65_536.0
        self.initialized = False
        self.fail_init = fail_init
        m = SimpleNamespace(
            AmdSmiException=AmdSmiException,
            AmdSmiLibraryException=AmdSmiLibraryException,
            AmdSmiClkType=AmdSmiClkType,
            AmdSmiTemperatureType=AmdSmiTemperatureType,
            AmdSmiTemperatureMetric=AmdSmiTemperatureMetric,
            AmdSmiDevPerfLevel=AmdSmiDevPerfLevel,
        )
        for fn in (
            "amdsmi_init",
            "amdsmi_shut_down",
            "amdsmi_get_processor_handles",
            "amdsmi_get_gpu_asic_info",
            "amdsmi_get_gpu_device_uuid",
            "amdsmi_get_power_info",
            "amdsmi_get_energy_count",
            "amdsmi_get_clock_info",
            "amdsmi_get_gpu_activity",
            "amdsmi_get_temp_metric",
            "amdsmi_get_power_cap_info",
            "amdsmi_set_power_cap",
            "amdsmi_set_gpu_clk_range",
            "amdsmi_set_gpu_perf_level",
            "amdsmi_get_gpu_driver_info",
        ):
            setattr(m, fn, getattr(self, fn))
        self.module = m

    def _gpu(self, handle: Any) -> int:
        if not self.initialized:
            raise AmdSmiLibraryException(NOT_INIT)
        assert isinstance(handle, _Handle), f"not a processor handle: {handle!r}"
        return handle.index

    def _allowed(self) -> None:
        if not self.permit:
            raise AmdSmiLibraryException(NO_PERM)

    def amdsmi_init(self, flags: int = 0) -> None:
        if self.fail_init:
            raise AmdSmiLibraryException(34)  # AMDSMI_STATUS_DRIVER_NOT_LOADED
        self.initialized = True

    def amdsmi_shut_down(self) -> None:
        self.initialized = False

    def amdsmi_get_processor_handles(self) -> list[_Handle]:
        if not self.initialized:
            raise AmdSmiLibraryException(NOT_INIT)
        return [_Handle(i) for i in range(self.gpus)]

    def amdsmi_get_gpu_asic_info(self, handle: Any) -> dict[str, Any]:
        self._gpu(handle)
        return {"market_name": self.name, "vendor_id": 0x1002, "device_id": 0x74A1}

    def amdsmi_get_gpu_device_uuid(self, handle: Any) -> str:
        return f"fake-amd-{self._gpu(handle)}"

    def amdsmi_get_power_info(self, handle: Any) -> dict[str, Any]:
        g = self._gpu(handle)
        series = self.profile[g]
        watts = series[self.calls[g] % len(series)]
        self.calls[g] += 1
        return {
            "current_socket_power": int(watts) if self.current else "N/A",
            "average_socket_power": int(watts) - 2,
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "power_limit": int(self.caps_w[g]),
        }

    def amdsmi_get_energy_count(self, handle: Any) -> dict[str, Any]:
        g = self._gpu(handle)
        self.energy_ticks[g] += self.energy_step
        return {
            "energy_accumulator": self.energy_ticks[g],
            "counter_resolution": 15.3,
            "timestamp": 0,
        }

    def amdsmi_get_clock_info(self, handle: Any, clk_type: AmdSmiClkType) -> dict[str, Any]:
        g = self._gpu(handle)
        if clk_type == AmdSmiClkType.MEM:
            return {
                "clk": 1300,
                "min_clk": 900,
                "max_clk": 1300,
                "clk_locked": False,
                "clk_deep_sleep": "N/A",
            }
        locked = self.gfx_range[g]
        return {
            "clk": locked[0] if locked else 2100,
            "min_clk": 500,
            "max_clk": 2100,
            "clk_locked": locked is not None,
            "clk_deep_sleep": "N/A",
        }

    def amdsmi_get_gpu_activity(self, handle: Any) -> dict[str, Any]:
        self._gpu(handle)
        return {"gfx_activity": 93, "umc_activity": 41, "mm_activity": "N/A"}

    def amdsmi_get_temp_metric(self, handle: Any, sensor: Any, metric: Any) -> int:
        self._gpu(handle)
        assert sensor == AmdSmiTemperatureType.HOTSPOT and metric == AmdSmiTemperatureMetric.CURRENT
        return 71

    def amdsmi_get_power_cap_info(self, handle: Any) -> dict[str, Any]:
        g = self._gpu(handle)
        u = self.cap_unit
        return {
            "power_cap": round(self.caps_w[g] * u),
            "default_power_cap": round(750 * u),
            "dpm_cap": 2100,
            "min_power_cap": round(200 * u),
            "max_power_cap": round(750 * u),
        }

    def amdsmi_set_power_cap(self, handle: Any, sensor_ind: int, cap: int) -> None:
        g = self._gpu(handle)
        self._allowed()
        assert sensor_ind == 0 and isinstance(cap, int)
        watts = cap / 1e6  # the setter takes µW whatever the struct's unit
        if not 200 <= watts <= 750:
            raise AmdSmiLibraryException(1)  # AMDSMI_STATUS_INVAL
        self.caps_w[g] = watts

    def amdsmi_set_gpu_clk_range(self, handle: Any, lo: int, hi: int, clk_type: Any) -> None:
        g = self._gpu(handle)
        self._allowed()
        assert clk_type == AmdSmiClkType.GFX and isinstance(lo, int) and isinstance(hi, int)
        self.gfx_range[g] = (lo, hi)
        self.perf_level[g] = AmdSmiDevPerfLevel.MANUAL

    def amdsmi_set_gpu_perf_level(self, handle: Any, level: AmdSmiDevPerfLevel) -> None:
        g = self._gpu(handle)
        self._allowed()
        self.perf_level[g] = level
        if level == AmdSmiDevPerfLevel.AUTO:
            self.gfx_range[g] = None

    def amdsmi_get_gpu_driver_info(self, handle: Any) -> dict[str, Any]:
        self._gpu(handle)
        return {"driver_name": "amdgpu", "driver_version": "6.8.5"}
