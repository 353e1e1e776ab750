"""What a trace's ``power_w`` means: instantaneous, or averaged over a period (and which).

NVML's ``nvmlDeviceGetPowerUsage`` (what nvidia-smi's ``power.draw``, ``nvidia-smi dmon``'s
``pwr`` and DCGM's ``DCGM_FI_DEV_POWER_USAGE`` report) returns "power averaged over 1 sec
interval" on Ampere (except GA100) or newer GPUs, and instantaneous power on GA100 and older
architectures (NVML API reference, nvmlDeviceGetPowerUsage). ``NVML_FI_DEV_POWER_INSTANT``,
nvidia-smi's ``power.draw.instant`` and DCGM's ``DCGM_FI_DEV_POWER_USAGE_INSTANT`` are
instantaneous; ``power.draw.average`` is the 1 s average. A window shorter than the averaging
period cannot see transients shorter than that period, so analyses warn about it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from powerkit.core.units import format_duration
from powerkit.sensors import SENSORS, Sensor, sensor_of
from powerkit.trace.schema import TraceMeta

__all__ = [
    "SEMANTICS",
    "averaging_s",
    "averaging_warning",
    "resolved_semantics",
    "series_sensors",
    "usage_semantics",
]

SEMANTICS = {
    "instant": "instantaneous board power",
    "average_1s": "board power averaged over the last 1 s",
    "nvml_usage": "NVML power usage: a 1 s average on Ampere (except GA100) and newer GPUs, "
    "instantaneous on GA100 and older; the GPU model is unknown",
    "sim_instant": "simulated instantaneous board power",
    "amd_socket": "AMD socket power: the current (instantaneous) reading where the GPU reports "
    "one (MI300 and later), else the firmware's average",
    "unknown": "not recorded by the source",
    "mixed": "differs between the inputs that were merged",
    # the part-time sensors of powerkit.sensors (a simulated recording through one of them)
    **{s.name: s.description for s in SENSORS.values() if s.part_time},
}

# GPU names whose NVML power usage is instantaneous: GA100 (A100, A30, A800) and older
# architectures (Volta, Turing, Pascal, Maxwell, Kepler, Fermi).
_INSTANT_USAGE = re.compile(
    r"\b(A100|A30|A800|V100|TITAN|T4|T10|P100|P40|P4|P6000|K80|K40|M60|M40|GTX|RTX 20\d\d|"
    r"Quadro RTX|TESLA [KMP]\d+)",
    re.IGNORECASE,
)
# Ampere (GA10x) and newer: A10, A16, A2, A40, RTX 30xx/40xx/50xx, RTX A-series, L4/L40,
# Hopper (H100, H200, H800, GH200), Blackwell (B100, B200, GB200).
_AVERAGED_USAGE = re.compile(
    r"\b(A10G?|A16|A2|A40|A4000|A4500|A5000|A5500|A6000|RTX [345]0\d\d|RTX \d+ Ada|L4|L40S?|"
    r"H100|H200|H800|H20|GH200|B100|B200|GB200|B300|GB300|RTX PRO)\b",
    re.IGNORECASE,
)


def usage_semantics(gpu_name: str | None) -> str:
    """Return the semantics of NVML power usage on the GPU called ``gpu_name``."""
    if not gpu_name:
        return "nvml_usage"
    if _INSTANT_USAGE.search(gpu_name):
        return "instant"
    if _AVERAGED_USAGE.search(gpu_name):
        return "average_1s"
    return "nvml_usage"


def resolved_semantics(meta: TraceMeta) -> str:
    """Return the trace's power semantics, resolved through its GPU model where it can be."""
    if meta.power_semantics != "nvml_usage":
        return meta.power_semantics
    kinds = {usage_semantics(name) for name in meta.gpu_names()}
    if not meta.gpu_names() or any(g.name is None for g in meta.gpus):
        kinds.add("nvml_usage")
    return kinds.pop() if len(kinds) == 1 else "nvml_usage"


def averaging_s(semantics: str) -> float | None:
    """Return the averaging period (s) of a power field, or None when it is instantaneous.

    Unknown NVML usage counts as possibly averaged over 1 s (the sensor it stands for,
    :func:`powerkit.sensors.sensor_of`).
    """
    sensor = sensor_of(semantics)
    return (sensor.averaging_s or None) if sensor is not None else None


def series_sensors(meta: TraceMeta) -> Callable[[str, int], Sensor | None]:
    """The sensor behind each series' power, by (host, gpu): the trace's resolved semantics
    read for that GPU's model (:func:`powerkit.sensors.sensor_of`; None: not known)."""
    semantics = resolved_semantics(meta)
    names = {(g.host, g.gpu): g.name for g in meta.gpus}

    def sensor(host: str, gpu: int) -> Sensor | None:
        return sensor_of(semantics, names.get((host, gpu)))

    return sensor


def averaging_warning(semantics: str, windows_s: list[float], what: str) -> str | None:
    """Return one warning line when a window is shorter than the power field's averaging."""
    period = averaging_s(semantics)
    if period is None:
        return None
    short = [w for w in windows_s if w < period - 1e-9]
    if not short:
        return None
    maybe = "may be" if semantics == "nvml_usage" else "is"
    names = ", ".join(format_duration(w) for w in short)
    return (
        f"{what}: power {maybe} a {format_duration(period)} average ({SEMANTICS[semantics]}); "
        f"windows {names} are shorter and understate transients"
    )
