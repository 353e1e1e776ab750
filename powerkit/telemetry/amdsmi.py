"""AMD Instinct GPUs through amd-smi's Python library: the only module that touches ``amdsmi``.

Tests replace the module attribute ``amdsmi`` here with a fake, as they do NVML's. The library
ships with ROCm (``/opt/rocm/share/amd_smi``) and as the ``amdsmi`` package on PyPI (install the
version matching the ROCm on the host: ``pip install 'powerkit[amd]'``).

Units as the library gives them: power in W (``amdsmi_get_power_info``'s ``current_socket_power``,
the socket's current power on MI300 and later, else ``average_socket_power``, the firmware's
1 s average); the energy counter in ticks of ``counter_resolution`` µJ; clocks in MHz; the power
cap in µW on bare metal, in W under a virtualization host (the struct's own documentation): read
by magnitude, since no GPU's cap lies between 100 kW and 0.1 W. This module returns W, J, MHz.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Sequence
from typing import Any

from powerkit.core.errors import DeviceError, NotPermittedError
from powerkit.telemetry.gpu import AMD, GpuControl, GpuSource, chosen_gpus, library_session

try:  # the library prints to stdout, or fails with OSError, where ROCm is missing
    with contextlib.redirect_stdout(None):
        import amdsmi
except Exception:
    amdsmi = None

__all__ = ["AmdGpu", "AmdSmiSource", "amdsmi_session"]

#: amd-smi's status codes (amdsmi_wrapper.AMDSMI_STATUS_*) that mean "not permitted"
_NO_PERMISSION = {10}
#: a cap value above this is in µW (bare metal), below in W (a virtualization host)
_MICROWATT_FLOOR = 1e5


def _lib() -> Any:
    if amdsmi is None:
        raise DeviceError(
            "amd-smi's Python library is not available (install ROCm's amdsmi package, e.g. "
            "pip install 'powerkit[amd]', matching the host's ROCm)"
        )
    return amdsmi


def _error_code(exc: Exception) -> int | None:
    getter = getattr(exc, "get_error_code", None)
    return getter() if callable(getter) else getattr(exc, "err_code", None)


def _map_error(exc: Exception, what: str) -> DeviceError:
    if _error_code(exc) in _NO_PERMISSION:
        return NotPermittedError(f"{what}: not permitted (run as root)")
    return DeviceError(f"{what}: {exc}")


def amdsmi_session() -> contextlib.AbstractContextManager[None]:
    """Initialize amd-smi for the duration of the block; errors become DeviceError."""
    lib = _lib()
    return library_session(
        lib.amdsmi_init,
        lib.amdsmi_shut_down,
        lib.AmdSmiException,
        "amd-smi is not available ({}); is amdgpu loaded?",
    )


def _number(value: Any) -> float | None:
    """A reading as a float; None for amd-smi's ``N/A`` (or any other text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _watts(value: Any) -> float | None:
    """A power-cap field in W (µW on bare metal, W under a virtualization host)."""
    number = _number(value)
    if number is None:
        return None
    return number / 1e6 if number > _MICROWATT_FLOOR else number


class AmdGpu(GpuControl):
    """One AMD GPU: one method per reading or control, each in SI units."""

    vendor = AMD

    def __init__(self, index: int) -> None:
        lib = _lib()
        self.index = index
        try:
            handles = lib.amdsmi_get_processor_handles()
        except lib.AmdSmiException as exc:
            raise _map_error(exc, f"AMD GPU {index}") from None
        if not 0 <= index < len(handles):
            raise DeviceError(f"no AMD GPU {index} (this host has {len(handles)})")
        self.handle = handles[index]

    def _call(self, fn_name: str, *args: Any) -> Any:
        lib = _lib()
        try:
            return getattr(lib, fn_name)(self.handle, *args)
        except lib.AmdSmiException as exc:
            raise _map_error(exc, f"AMD GPU {self.index}: {fn_name}") from None

    def _maybe(self, fn_name: str, *args: Any) -> Any:
        """Return the reading, or None when this GPU does not support it."""
        lib = _lib()
        try:
            return getattr(lib, fn_name)(self.handle, *args)
        except lib.AmdSmiException:
            return None

    def name(self) -> str:
        """Return the marketing name, e.g. ``AMD Instinct MI300X``."""
        info = self._maybe("amdsmi_get_gpu_asic_info") or {}
        return str(info.get("market_name") or "AMD GPU")

    def uuid(self) -> str | None:
        """Return the GPU's UUID."""
        value = self._maybe("amdsmi_get_gpu_device_uuid")
        return None if value is None else str(value)

    def power_w(self) -> tuple[float | None, float | None]:
        """Return (current, averaged) socket power in W, each None where not reported."""
        info = self._maybe("amdsmi_get_power_info") or {}
        return _number(info.get("current_socket_power")), _number(info.get("average_socket_power"))

    def energy_j(self) -> float | None:
        """Return the energy accumulator in J (ticks x resolution; amd-smi 6.2 renamed the
        field ``power`` to ``energy_accumulator``)."""
        count = self._maybe("amdsmi_get_energy_count")
        if not count:
            return None
        ticks = _number(count.get("energy_accumulator", count.get("power")))
        resolution = _number(count.get("counter_resolution"))
        return None if ticks is None or resolution is None else ticks * resolution * 1e-6

    def _clock(self, kind: str) -> dict[str, Any]:
        return self._maybe("amdsmi_get_clock_info", getattr(_lib().AmdSmiClkType, kind)) or {}

    def clocks_mhz(self) -> tuple[float | None, float | None]:
        """Return (graphics clock, memory clock) in MHz (``clk``; ``cur_clk`` before 6.1)."""
        gfx, mem = self._clock("GFX"), self._clock("MEM")
        return (
            _number(gfx.get("clk", gfx.get("cur_clk"))),
            _number(mem.get("clk", mem.get("cur_clk"))),
        )

    def utilization_pct(self) -> tuple[float | None, float | None]:
        """Return (graphics, memory controller) activity in percent."""
        busy = self._maybe("amdsmi_get_gpu_activity") or {}
        return _number(busy.get("gfx_activity")), _number(busy.get("umc_activity"))

    def temperature_c(self) -> float | None:
        """Return the hotspot (junction) temperature in degrees C."""
        lib = _lib()
        value = self._maybe(
            "amdsmi_get_temp_metric",
            lib.AmdSmiTemperatureType.HOTSPOT,
            lib.AmdSmiTemperatureMetric.CURRENT,
        )
        return _number(value)

    def _cap(self) -> dict[str, Any]:
        return self._call("amdsmi_get_power_cap_info")

    def power_limit_w(self) -> float | None:
        """Return the power cap in force, in W."""
        info = self._maybe("amdsmi_get_power_cap_info") or {}
        return _watts(info.get("power_cap"))

    def default_power_limit_w(self) -> float | None:
        """Return the default power cap (the board's, the nameplate) in W."""
        info = self._maybe("amdsmi_get_power_cap_info") or {}
        return _watts(info.get("default_power_cap", info.get("power_cap_default")))

    def power_limit_range_w(self) -> tuple[float, float]:
        """Return the (min, max) settable power cap in W."""
        info = self._cap()
        lo, hi = _watts(info.get("min_power_cap")), _watts(info.get("max_power_cap"))
        if lo is None or hi is None:
            raise DeviceError(f"AMD GPU {self.index}: amd-smi gives no power cap range")
        return lo, hi

    def set_power_limit_w(self, watts: float) -> None:
        """Set the power cap in W (sensor 0; amd-smi takes µW); NotPermittedError if refused."""
        self._call("amdsmi_set_power_cap", 0, round(watts * 1e6))

    def sm_clock_range_mhz(self) -> tuple[float, float]:
        """Return the graphics clock's (min, max) in MHz."""
        info = self._clock("GFX")
        lo, hi = _number(info.get("min_clk")), _number(info.get("max_clk"))
        if lo is None or hi is None:
            raise DeviceError(f"AMD GPU {self.index}: amd-smi gives no graphics clock range")
        return lo, hi

    def lock_sm_clock_mhz(self, mhz: float) -> None:
        """Hold the graphics clock at ``mhz`` (a range of one value); NotPermittedError if
        refused."""
        self._call("amdsmi_set_gpu_clk_range", round(mhz), round(mhz), _lib().AmdSmiClkType.GFX)

    def reset_locked_clocks(self) -> None:
        """Give the clocks back to the driver (performance level ``auto``)."""
        self._call("amdsmi_set_gpu_perf_level", _lib().AmdSmiDevPerfLevel.AUTO)


class AmdSmiSource(GpuSource):
    """Every visible AMD GPU (or a chosen subset) read through amd-smi at wall-clock time."""

    source_name = "amdsmi"
    vendor = AMD
    gpus: list[AmdGpu]

    def __init__(self, gpus: Sequence[int] | None = None) -> None:
        self._enter(amdsmi_session())
        try:
            lib = _lib()
            try:
                count = len(lib.amdsmi_get_processor_handles())
            except lib.AmdSmiException as exc:
                raise DeviceError(f"amd-smi lists no GPU ({exc})") from None
            self.gpus = [AmdGpu(i) for i in chosen_gpus(gpus, count, "AMD GPU visible to amd-smi")]
            current, _ = self.gpus[0].power_w()
        except BaseException:
            self.close()
            raise
        # MI300 and later report the socket's current power; earlier Instinct GPUs a 1 s average
        self.power_semantics = "amd_socket" if current is not None else "average_1s"
        self.host = socket.gethostname()
        self._describe()

    def read_gpu(self, gpu: GpuControl) -> dict[str, float | None]:
        """One GPU's readings, named as the canonical columns (None: not supported)."""
        assert isinstance(gpu, AmdGpu)
        current, average = gpu.power_w()
        sm, mem = gpu.clocks_mhz()
        util, mem_util = gpu.utilization_pct()
        return {
            "power_w": _power(gpu, current, average),
            "power_instant_w": current,
            "power_avg_w": average,
            "energy_j": gpu.energy_j(),
            "sm_clock_mhz": sm,
            "mem_clock_mhz": mem,
            "gpu_util": util,
            "mem_util": mem_util,
            "temp_c": gpu.temperature_c(),
            "power_limit_w": gpu.power_limit_w(),
        }

    def read_gpu_power(self, gpu: GpuControl) -> tuple[float, float | None]:
        """The socket's power (current, else average) and the energy accumulator."""
        assert isinstance(gpu, AmdGpu)
        return _power(gpu, *gpu.power_w()), gpu.energy_j()

    def extra_metadata(self) -> dict[str, object]:
        """Return the driver version and the amd-smi field used for power_w."""
        info = self.gpus[0]._maybe("amdsmi_get_gpu_driver_info") or {}
        return {
            "driver": info.get("driver_version"),
            "power_field": "current_socket_power"
            if self.power_semantics == "amd_socket"
            else "average_socket_power",
        }


def _power(g: AmdGpu, current: float | None, average: float | None) -> float:
    power = current if current is not None else average
    if power is None:
        raise DeviceError(f"AMD GPU {g.index}: amd-smi reports no socket power")
    return power
