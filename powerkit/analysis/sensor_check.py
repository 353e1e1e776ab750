"""``info --sensor-check``: what a log's own readings say about the sensor that produced them,
next to what its power semantics claim (docs/trust.md).

Per series:

- *held readings*: the share of steps where the reading did not change; where most did not,
  the sensor updates less often than the logger reads it, every (median run of equal
  readings) × (median step) seconds;
- *roughness*: the mean change between consecutive readings over the mean change across
  about 1 s (k steps, k = 1 s / the median step; the changed readings of a held log). A point
  reading of a busy GPU changes about as much from one reading to the next as across a second
  (roughness near 1 for noise, ≥ 0.3 for steps); a 1 s average changes by a small part of
  it. Below 0.2: averaged; from 0.35: a point; between: unclear (design note 169 has the
  values the simulator's sensors and real logs give). Only for steps
  of at most 0.25 s (k ≥ 4) and series of at least 20 changes;
- *counter against power*: where the series carries a usable energy counter, its energy
  against the energy integrated from power with the interval the sensor gives it
  (powerkit.sensors.bounds): outside it is a finding (a wrong sensor claim, a counter that
  lags, or readings that miss the power).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from powerkit.cells.fill import NO_FILL
from powerkit.cells.grid import RawSeries
from powerkit.cells.steps import counter_of, series_steps
from powerkit.core.tables import Column
from powerkit.sensors import Sensor
from powerkit.sensors.bounds import power_bounds

__all__ = [
    "AVERAGED_BELOW",
    "POINT_FROM",
    "SENSOR_COLUMNS",
    "SensorCheck",
    "SeriesSensor",
    "sensor_check_of",
    "series_sensor",
]

#: roughness below which readings look averaged, and from which they look like points
AVERAGED_BELOW = 0.2
POINT_FROM = 0.35
_MIN_CHANGES = 20


@dataclass(frozen=True)
class SeriesSensor:
    """One series' sensor, as its readings show it."""

    host: str
    gpu: int
    claimed: str  # the sensor the semantics stand for ("unknown": none)
    held_share: float  # steps with an unchanged reading / steps
    update_s: float | None  # the sensor's update period, where readings are held
    roughness: float | None
    looks: str  # "point", "averaged", "unclear" or "not measurable"
    counter_energy_j: float | None = None
    power_energy_j: float | None = None
    power_low_j: float | None = None
    power_high_j: float | None = None
    counter_inside: bool | None = None
    findings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SensorCheck:
    """``info --sensor-check``: every series' sensor, and the findings over all of them."""

    power_semantics: str
    series: list[SeriesSensor]
    findings: list[str]


#: the table ``info --sensor-check`` prints
SENSOR_COLUMNS = (
    Column("GPU", lambda s: f"{s.host}:{s.gpu}", key=True),
    Column("claimed", "claimed", text=True),
    Column("held", "held_share", ".0%"),
    Column("update s", "update_s", ".3g"),
    Column("roughness", "roughness", ".2f"),
    Column("looks", "looks", text=True),
    Column("counter kJ", "counter_energy_j", ",.2f", scale=1e-3),
    Column("power kJ", "power_energy_j", ",.2f", scale=1e-3),
    Column("low kJ", "power_low_j", ",.2f", scale=1e-3),
    Column("high kJ", "power_high_j", ",.2f", scale=1e-3),
)


def _roughness(p: np.ndarray, step_s: float) -> float | None:
    k = round(1.0 / step_s) if step_s > 0 else 0
    if step_s > 0.25 or k < 4 or p.size < max(_MIN_CHANGES, 2 * k):
        return None
    across = float(np.mean(np.abs(p[k:] - p[:-k])))
    if across <= 0:
        return None
    return float(np.mean(np.abs(np.diff(p)))) / across


def series_sensor(s: RawSeries, sensor: Sensor | None) -> SeriesSensor:
    """One series' check against the ``sensor`` its trace claims (see the module
    docstring)."""
    claimed = sensor.name if sensor is not None else "unknown"
    p, t = s.power_w, s.t_us / 1e6
    dt = np.diff(t)
    step = float(np.median(dt)) if dt.size else 0.0
    same = np.diff(p) == 0
    held = float(same.mean()) if same.size else 0.0
    update = None
    changed = p
    if held >= 0.5 and not same.all():
        runs = np.diff(np.flatnonzero(np.concatenate(([True], ~same, [True]))))
        update = float(np.median(runs)) * step
        changed = p[np.concatenate(([True], ~same))]
    rough = _roughness(changed, update or step)
    looks = "not measurable"
    if rough is not None:
        looks = (
            "averaged" if rough < AVERAGED_BELOW else "point" if rough >= POINT_FROM else "unclear"
        )
    findings = []
    if sensor is not None and looks in ("averaged", "point"):
        claims_average = sensor.averaging_s > 0
        if claims_average != (looks == "averaged"):
            findings.append(
                f"host={s.host} gpu={s.gpu}: the readings look like {looks} readings "
                f"(roughness {rough:.2f}) but the trace says {claimed} "
                f"({'an average' if claims_average else 'a point'}); give --power-semantics"
            )
    if sensor is not None and sensor.part_time and update is None and step < 0.9 * sensor.period_s:
        findings.append(
            f"host={s.host} gpu={s.gpu}: {claimed} updates every {sensor.period_s:g} s, but "
            f"readings {step:g} s apart change at almost every step"
        )
    out = SeriesSensor(s.host, s.gpu, claimed, held, update, rough, looks, findings=findings)
    counter = counter_of(s)
    if counter is None or sensor is None:
        return out
    steps = series_steps(s, None, NO_FILL)
    integrated = ~np.isnan(steps.energy_j)
    energy = float(np.nansum(steps.energy_j))
    low, high = power_bounds(sensor, t, p, integrated, energy)
    counted = float(np.maximum(np.diff(counter), 0).sum())
    inside = bool(low <= counted <= high)
    if not inside:
        findings.append(
            f"host={s.host} gpu={s.gpu}: the energy counter ({counted:,.0f} J) lies outside "
            f"what the power gives under {claimed} ({energy:,.0f} J, {low:,.0f} to "
            f"{high:,.0f} J): the sensor claim, the counter or the readings are off"
        )
    return SeriesSensor(
        s.host,
        s.gpu,
        claimed,
        held,
        update,
        rough,
        looks,
        counted,
        energy,
        low,
        high,
        inside,
        findings,
    )


def sensor_check_of(semantics: str, series: list[SeriesSensor]) -> SensorCheck:
    """The check of a trace of ``semantics`` from its series' checks (in (host, gpu) order;
    ``info`` makes them in its own scan: :func:`powerkit.analysis.info.trace_info`)."""
    return SensorCheck(semantics, series, [f for s in series for f in s.findings])
