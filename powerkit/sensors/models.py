"""The sensor models: how a reading of ``power_w`` relates to the power the GPU drew.

Every model is three durations (docs/trust.md, docs/trace-format.md):

- ``averaging_s`` (A): a reading is the mean of the last A seconds of what the sensor
  measured (0: a point);
- ``window_s`` (W) and ``period_s`` (P): the sensor measures only the last W seconds of each
  update period P and holds its reading until the next update (W = P or 0: all of the time).

Sources: NVML's header (nvml.h, ``nvmlDeviceGetPowerUsage``: "On Ampere (except GA100) or
newer GPUs, the API returns power averaged over 1 sec interval. On GA100 and older
architectures, instantaneous power is returned"; ``NVML_FI_DEV_POWER_AVERAGE``: "averaged over
1 sec interval"; ``NVML_FI_DEV_POWER_INSTANT``: "Current GPU power";
``nvmlDeviceGetTotalEnergyConsumption``: "in millijoules (mJ)") and Yang, Adamek and Armour,
"Part-time Power Measurements: nvidia-smi's Lack of Attention" (arXiv 2312.02741): "on the
A100 and H100 GPUs only 25% of the runtime is sampled for power consumption".
"""

from __future__ import annotations

from dataclasses import dataclass

from powerkit.core.errors import BadInputError, option

__all__ = ["COUNTER", "SENSORS", "EnergyCounter", "Sensor", "get_sensor", "sensor_of"]

_NVML = "NVML API reference (nvml.h, nvmlDeviceGetPowerUsage, NVML_FI_DEV_POWER_AVERAGE/INSTANT)"
_PART_TIME = "Yang, Adamek and Armour, arXiv 2312.02741 (25 % of the runtime sampled on A100, H100)"


@dataclass(frozen=True)
class Sensor:
    """A power sensor (see the module docstring)."""

    name: str
    description: str
    averaging_s: float = 0.0
    window_s: float = 0.0
    period_s: float = 0.0
    source: str = ""

    @property
    def part_time(self) -> bool:
        """Whether the sensor measures only part of each update period."""
        return 0 < self.window_s < self.period_s

    @property
    def seen_share(self) -> float:
        """The share of the runtime the sensor measures (1: all of it)."""
        return self.window_s / self.period_s if self.part_time else 1.0

    @property
    def blind_s(self) -> float:
        """The longest stretch a reading can miss entirely: a part-time sensor's unmeasured
        part of each period (0 for a sensor that sees all of the time)."""
        return self.period_s - self.window_s if self.part_time else 0.0

    @property
    def span_s(self) -> float:
        """How far back a reading reaches: the averaging, or one period, whichever is
        longer."""
        return max(self.averaging_s, self.period_s)


@dataclass(frozen=True)
class EnergyCounter:
    """The cumulative energy counter: ``resolution_j`` per count, updated every
    ``update_s`` (a reading holds the energy at its last update)."""

    resolution_j: float = 0.001
    update_s: float = 0.1
    source: str = (
        "NVML nvmlDeviceGetTotalEnergyConsumption (millijoules); the update period is not "
        "documented: 100 ms assumed (the power sensor's period on A100 and H100)"
    )


#: NVML's energy counter
COUNTER = EnergyCounter()

SENSORS: dict[str, Sensor] = {
    s.name: s
    for s in (
        Sensor("instant", "the power at the moment of the reading", source=_NVML),
        Sensor(
            "average_1s",
            "the mean power over the last 1 s, continuously",
            averaging_s=1.0,
            source=_NVML,
        ),
        Sensor(
            "a100-power.draw",
            "the mean power over 25 ms of every 100 ms, held until the next update "
            "(A100 power.draw)",
            window_s=0.025,
            period_s=0.1,
            source=_PART_TIME,
        ),
        Sensor(
            "h100-power.draw",
            "the mean of the last 1 s of 25 ms-of-100 ms windows, updated every 100 ms "
            "(H100 power.draw: NVML's 1 s average of a part-time sensor)",
            averaging_s=1.0,
            window_s=0.025,
            period_s=0.1,
            source=f"{_NVML}; {_PART_TIME}",
        ),
    )
}

#: the sensor each trace semantics stands for (``nvml_usage``, unknown GPU: the 1 s average,
#: the wider of NVML's two meanings; ``amd_socket``: a point reading)
_BY_SEMANTICS = {
    "instant": "instant",
    "sim_instant": "instant",
    "amd_socket": "instant",
    "average_1s": "average_1s",
    "nvml_usage": "average_1s",
}


def get_sensor(name: str) -> Sensor:
    """The sensor called ``name``; a one-line error lists them."""
    try:
        return SENSORS[name]
    except KeyError:
        raise BadInputError(f"{option('sensor')} {name!r}: one of {', '.join(SENSORS)}") from None


def sensor_of(semantics: str, gpu_name: str | None = None) -> Sensor | None:
    """The sensor a trace's ``power_semantics`` stands for, or None where it is not known
    (``unknown``, ``mixed``). An instantaneous reading of NVML's power usage on an A100 or an
    H100 (``power.draw``) is the part-time sensor of that GPU (arXiv 2312.02741), as is
    NVML's 1 s average on an H100."""
    if semantics in SENSORS and SENSORS[semantics].part_time:
        return SENSORS[semantics]
    name = _BY_SEMANTICS.get(semantics)
    if name is None:
        return None
    upper = (gpu_name or "").upper()
    if semantics in ("instant", "nvml_usage") and "A100" in upper:
        return SENSORS["a100-power.draw"]
    if semantics in ("average_1s", "nvml_usage") and "H100" in upper:
        return SENSORS["h100-power.draw"]
    return SENSORS[name]
