"""Operational emissions of a trace: energy per clock hour times grid carbon intensity (the
intensities themselves: powerkit.econ.intensity, whose names are also importable from here).

A constant intensity (an annual average) or an hourly series aligned to the trace's hours
(time-varying accounting, compared with the series' own average). Embodied carbon is out of
scope.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from powerkit.analysis.info import trace_info
from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.cells.grid import RawSeries
from powerkit.cells.steps import series_steps
from powerkit.core.documents import Document, read_document
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import format_energy
from powerkit.econ.intensity import (
    REGION_COLUMNS,
    Intensity,
    RegionList,
    list_regions,
    parse_intensity,
    read_intensity_csv,
    regional_intensity,
)
from powerkit.engine import LOCAL, Engine, reduce
from powerkit.trace.model import Trace

if TYPE_CHECKING:
    from powerkit.econ.economics import EconReport

__all__ = [
    "REGION_COLUMNS",
    "CarbonOptions",
    "CarbonReport",
    "Intensity",
    "RegionList",
    "carbon_from_doc",
    "carbon_intensity",
    "carbon_of",
    "check_carbon",
    "hourly_energy",
    "list_regions",
    "parse_intensity",
    "read_carbon",
    "read_intensity_csv",
    "regional_intensity",
    "run_carbon",
    "scenario_carbon",
]


@dataclass
class HourlyEnergy:
    """Energy of every series of a trace per UTC clock hour (hour starts in epoch seconds)."""

    hours_s: np.ndarray
    kwh: np.ndarray
    fill: str = "none"
    coverage: float | None = None  # present (or filled) 0.5 s cells / cells, as `info` counts
    power_semantics: str = "unknown"


def hourly_energy(trace: Trace, fill: FillPolicy = NO_FILL, engine: Engine = LOCAL) -> HourlyEnergy:
    """Integrate power per clock hour: the steps ``info`` integrates (the same gap rule and
    ``--fill``, powerkit/cells/steps.py), each counted in the hour of its midpoint. One
    series at a time."""
    nominal = trace.meta.interval_s

    def add(acc: dict[int, float], s: RawSeries) -> None:
        steps = series_steps(s, nominal, fill)
        energy = steps.energy_j
        energy[np.isnan(energy)] = 0.0  # steps not integrated hold no energy
        # The clock hour of each step's midpoint; times are sorted, so hours only grow.
        hour = (s.t_us[1:] - s.steps_us // 2) // 3_600_000_000
        if hour.size == 0:
            return
        starts = np.flatnonzero(np.r_[True, hour[1:] != hour[:-1]])
        sums = np.add.reduceat(energy, starts)
        for h, joules in zip((hour[starts] * 3600).tolist(), sums.tolist(), strict=True):
            acc[h] = acc.get(h, 0.0) + joules

    def merge(a: dict[int, float], b: dict[int, float]) -> dict[int, float]:
        for h, joules in b.items():
            a[h] = a.get(h, 0.0) + joules
        return a

    totals = reduce(trace, dict, add, merge, engine=engine)
    if not totals:
        raise BadInputError(f"{trace.origin}: no energy to account (fewer than two samples)")
    hours = np.array(sorted(totals), dtype=np.int64)
    kwh = np.array([totals[h] for h in hours.tolist()], dtype=np.float64) / 3.6e6
    info = trace_info(trace, fill, engine=engine)
    return HourlyEnergy(hours, kwh, str(fill), info.coverage, info.power_semantics)


@dataclass(frozen=True)
class CarbonReport(Document):
    """What ``powerkit carbon --trace`` reports; emissions in kg CO2e."""

    COMMAND: ClassVar[str] = "carbon"

    mode: str  # "constant" or "hourly"
    energy_kwh: float
    hours: int
    first_hour: str
    intensity_g_per_kwh: float  # the energy-weighted intensity applied
    emissions_kg: float
    source: str = ""  # where the intensity came from
    average_intensity_g_per_kwh: float | None = None  # hourly: the series' mean
    emissions_at_average_kg: float | None = None
    difference_kg: float | None = None  # time-varying minus average accounting
    difference_share: float | None = None
    fill: str = "none"  # the gap fill the energy was integrated with
    coverage: float | None = None  # of the trace, as `info` counts it (with the fill)
    power_semantics: str = "unknown"
    #: the facility's power usage effectiveness applied: the emissions are of the trace's
    #: (GPU) energy times it; 1 (the default) counts the GPUs' energy alone
    pue: float = 1.0

    def rows(self) -> list[tuple[str, str]]:
        """The figures as labelled lines; with an hourly series, the comparison with its
        average."""
        facility = (
            "GPU energy alone (PUE 1: give --pue for the facility's)"
            if self.pue == 1
            else f"x PUE {self.pue:g} = {format_energy(self.energy_kwh * self.pue * 3.6e6)} at "
            "the facility"
        )
        span = f"within {self.hours} clock hour" + ("s" if self.hours != 1 else "")
        rows = [
            ("energy", f"{format_energy(self.energy_kwh * 3.6e6)} {span}, {facility}"),
            ("intensity applied", f"{self.intensity_g_per_kwh:,.1f} g CO2e/kWh ({self.source})"),
            ("emissions", f"{_mass(self.emissions_kg)} CO2e"),
        ]
        if self.mode == "hourly":
            share = self.difference_share
            rows += [
                (
                    "at the series' average",
                    f"{self.emissions_at_average_kg or 0:,.3f} kg CO2e "
                    f"({self.average_intensity_g_per_kwh or 0:,.1f} g/kWh)",
                ),
                (
                    "time-varying minus average",
                    f"{self.difference_kg or 0:+,.3f} kg"
                    + ("" if share is None else f" ({100 * share:+.1f} %)"),
                ),
            ]
        return rows


def _mass(kg: float) -> str:
    """Emissions for a person to read: g, kg or t by magnitude."""
    if abs(kg) >= 1000:
        return f"{kg / 1000:,.3g} t" if abs(kg) < 1e5 else f"{kg / 1000:,.0f} t"
    return f"{kg:.3g} kg" if abs(kg) >= 1 else f"{kg * 1000:.3g} g"


def carbon_of(
    energy: HourlyEnergy,
    *,
    intensity: float | None = None,
    hourly: dict[int, float] | None = None,
    source: str = "",
    pue: float = 1.0,
) -> CarbonReport:
    """Emissions of ``energy`` at a constant ``intensity`` or an ``hourly`` series (g/kWh),
    the facility's overhead counted by ``pue`` (each hour's energy times it)."""
    if not (math.isfinite(pue) and 1 <= pue <= 10):
        raise BadInputError(f"{option('pue')} {pue:g}: a facility's PUE, from 1 to 10")
    total = float(energy.kwh.sum())
    first = datetime.fromtimestamp(int(energy.hours_s[0]), UTC).isoformat()
    if hourly is None:
        if intensity is None or intensity < 0:
            raise BadInputError(
                f"give an intensity (e.g. {option('intensity')} 250g/kWh) or "
                f"{option('intensity-csv')}"
            )
        return CarbonReport(
            "constant",
            total,
            energy.hours_s.size,
            first,
            intensity,
            total * pue * intensity / 1000,
            source,
            fill=energy.fill,
            coverage=energy.coverage,
            power_semantics=energy.power_semantics,
            pue=pue,
        )
    missing = [int(h) for h in energy.hours_s if int(h) not in hourly]
    if missing:
        when = datetime.fromtimestamp(missing[0], UTC).isoformat()
        raise BadInputError(
            f"the intensity CSV has no value for {len(missing)} hour(s) of the trace, "
            f"first {when} (gaps are not filled)"
        )
    per_hour = np.array([hourly[int(h)] for h in energy.hours_s])
    grams = float((energy.kwh * per_hour).sum()) * pue
    average = float(np.mean(list(hourly.values())))
    at_average = total * pue * average / 1000
    return CarbonReport(
        mode="hourly",
        energy_kwh=total,
        hours=energy.hours_s.size,
        first_hour=first,
        intensity_g_per_kwh=grams / (total * pue) if total > 0 else average,
        emissions_kg=grams / 1000,
        source=source,
        fill=energy.fill,
        coverage=energy.coverage,
        power_semantics=energy.power_semantics,
        pue=pue,
        average_intensity_g_per_kwh=average,
        emissions_at_average_kg=at_average,
        difference_kg=grams / 1000 - at_average,
        difference_share=(grams / 1000 - at_average) / at_average if at_average > 0 else None,
    )


@dataclass(frozen=True)
class ScenarioCarbon(Document):
    """What ``powerkit carbon --econ`` reports: emissions per year of an ``econ`` scenario
    (and of the controller's energy saving)."""

    COMMAND: ClassVar[str] = "carbon"

    annual_energy_mwh: float
    intensity_g_per_kwh: float
    source: str
    emissions_t_per_year: float
    control_saved_t_per_year: float | None = None

    def rows(self) -> list[tuple[str, str]]:
        """The yearly figures as labelled lines."""
        rows = [
            ("energy per year", f"{self.annual_energy_mwh:,.0f} MWh"),
            ("intensity", f"{self.intensity_g_per_kwh:,.1f} g CO2e/kWh ({self.source})"),
            ("emissions per year", f"{self.emissions_t_per_year:,.0f} t CO2e"),
        ]
        if self.control_saved_t_per_year is not None:
            saved = f"{self.control_saved_t_per_year:,.0f} t CO2e/year"
            rows.append(("saved by the controller", saved))
        return rows


def scenario_carbon(econ: EconReport, g_per_kwh: float, source: str) -> ScenarioCarbon:
    """Tonnes CO2e per year of an ``econ`` result at an annual average intensity."""
    saved = (econ.control or {}).get("energy_saved_mwh_per_year")
    # MWh x g/kWh = kg; / 1000 = t
    return ScenarioCarbon(
        annual_energy_mwh=econ.annual_energy_mwh,
        intensity_g_per_kwh=g_per_kwh,
        source=source,
        emissions_t_per_year=econ.annual_energy_mwh * g_per_kwh / 1000,
        control_saved_t_per_year=None if saved is None else saved * g_per_kwh / 1000,
    )


def read_carbon(path: str | Path) -> CarbonReport | ScenarioCarbon:
    """The ``carbon --json`` document in ``path`` (:func:`carbon_from_doc`)."""
    return carbon_from_doc(read_document(path, "carbon"), str(path))


def carbon_from_doc(doc: Any, where: str) -> CarbonReport | ScenarioCarbon:
    """A ``carbon --json`` document: of a trace (``carbon --trace``) or of an econ scenario
    (``carbon --econ``, the one with ``emissions_t_per_year``)."""
    scenario = isinstance(doc, dict) and "emissions_t_per_year" in doc
    return (ScenarioCarbon if scenario else CarbonReport).from_doc(doc, where)


@dataclass(frozen=True)
class CarbonOptions:
    """What ``powerkit carbon`` is given besides the trace: the intensity, one of ``region``,
    ``intensity`` and ``intensity_csv``; an ``econ`` document instead of a trace.

    Attributes:
        econ: ``econ --json`` output: emissions per year of its scenario (no trace then).
        region: a bundled annual average, a country or a US eGRID subregion (``--region``).
        intensity: a constant, as written (``250g/kWh``; ``--intensity``).
        intensity_csv: hourly ``timestamp,g/kWh`` rows (``--intensity-csv``; a trace only).
        fill: gap fill on the grid (``--fill``; default none).
        engine: where the per-series work runs (``--engine``; default local).
        pue: the facility's PUE the trace's energy is multiplied by (``--pue``; 1: the GPUs'
            energy alone, said in the output); an econ scenario carries its own.
    """

    econ: Path | None = None
    region: str | None = None
    intensity: str | None = None
    intensity_csv: Path | None = None
    fill: FillPolicy = NO_FILL
    engine: Engine = LOCAL
    pue: float = 1.0


def check_carbon(has_trace: bool, opts: CarbonOptions) -> None:
    """Refuse, before any reading, what ``carbon`` cannot account: a trace and an econ document
    together (or neither), anything but exactly one intensity, an hourly one for a year."""
    if has_trace == (opts.econ is not None):
        raise BadInputError(f"give one of {option('trace')} or {option('econ')}")
    if opts.econ is not None and opts.pue != 1:
        raise BadInputError(
            f"{option('pue')} applies to a trace: an econ scenario's energy has its own PUE"
        )
    if opts.econ is not None and opts.intensity_csv is not None:
        raise BadInputError(
            f"{option('econ')} is a yearly figure: give {option('region')} or {option('intensity')}"
        )
    given = (opts.region, opts.intensity, opts.intensity_csv)
    if sum(x is not None for x in given) != 1:
        raise BadInputError(
            f"give one of {option('region')} (e.g. germany), {option('intensity')} (e.g. "
            f"250g/kWh) or {option('intensity-csv')}"
        )


def carbon_intensity(opts: CarbonOptions) -> tuple[float | None, dict[int, float] | None, str]:
    """(g/kWh constant, or hourly g/kWh by epoch hour, and where it came from) of ``opts``."""
    if opts.region is not None:
        known = regional_intensity(opts.region)
        return known.g_per_kwh, None, f"{known.name} {known.year}: {known.source}"
    if opts.intensity is not None:
        return parse_intensity(opts.intensity), None, "given (command line)"
    assert opts.intensity_csv is not None
    return None, read_intensity_csv(opts.intensity_csv), f"hourly ({opts.intensity_csv})"


def run_carbon(trace: Trace | None, opts: CarbonOptions) -> CarbonReport | ScenarioCarbon:
    """What ``powerkit carbon`` reports: the emissions of ``trace`` (energy per clock hour ×
    the intensity), or, with ``opts.econ`` and no trace, of the econ scenario per year."""
    check_carbon(trace is not None, opts)
    grams, hourly, source = carbon_intensity(opts)
    if opts.econ is not None:
        assert grams is not None
        from powerkit.econ import economics

        return scenario_carbon(economics.EconReport.read(opts.econ), grams, source)
    assert trace is not None
    energy = hourly_energy(trace, opts.fill, engine=opts.engine)
    return carbon_of(energy, intensity=grams, hourly=hourly, source=source, pue=opts.pue)
