"""``powerkit utility``: a trace or a composed fleet, scaled to a site, against a utility's spec,
with what-if remedies and the cheapest combination that passes.

The fleet is ``oversub``'s composition (same members, same grid, one draw). At ``site_mw`` the
fleet is replicated k = max(1, round(site W / fleet nameplate)) times: ``aligned`` replicas add
the fleet's series k times over (one synchronous job: the worst case); ``random`` replicas are
k copies each shifted by a seeded uniform offset (independent jobs). Remedies act on the site
series (a site-wide floor, ramp limit, fill or battery), with the site's nameplate.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from powerkit.analysis.fleet import compose_fleet
from powerkit.analysis.members import FleetMember
from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.trace.model import Trace
from powerkit.utility.metrics import SwingMetrics, swing_metrics
from powerkit.utility.mitigate import Mitigation, apply
from powerkit.utility.spec import RuleResult, Spec, judge

__all__ = ["MitigationResult", "UtilityReport", "site_series", "utility_report"]

YEAR_S = 365 * 86_400.0


@dataclass
class MitigationResult:
    name: str
    parameters: dict[str, float | None]
    residual: SwingMetrics
    extra_energy_j: float  # over the series, at site scale
    extra_mwh_per_year: float
    extra_usd_per_year: float | None
    slowdown_pct: float
    storage_kwh: float | None
    storage_kw: float | None
    passes: bool | None = field(default=None, metadata={"key": "pass"})
    spec: list[RuleResult] = field(default_factory=list)
    note: str | None = None
    #: the hardware (or software) knob that implements the remedy, per GPU
    knob: str = ""
    #: the site's power after the remedy (figures; not in the JSON)
    power_w: np.ndarray | None = field(default=None, repr=False, metadata={"doc": False})


@dataclass
class UtilityReport:
    members: list[FleetMember]
    compose: str
    gpus: int
    fleet_nameplate_w: float | None  # None: unknown, and nothing asked needed it
    replicas: int
    site_nameplate_w: float | None
    power_semantics: str
    fleet: SwingMetrics
    site: SwingMetrics
    spec_name: str | None = None
    spec: list[RuleResult] = field(default_factory=list)
    mitigations: list[MitigationResult] = field(default_factory=list)
    cheapest: str | None = None
    price_usd_per_kwh: float | None = None
    warnings: list[str] = field(default_factory=list)
    #: the site's power over time, before and after each remedy (figures; not in the JSON)
    series: dict[str, np.ndarray] = field(default_factory=dict, repr=False)


def site_series(
    power: np.ndarray, present: np.ndarray, replicas: int, compose: str, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The site's power: ``replicas`` copies of the fleet, aligned or at random offsets."""
    if compose != "random" or replicas == 1:
        return power * replicas, present
    rng = np.random.default_rng(seed + 1)
    total = np.zeros_like(power)
    ok = np.ones_like(present)
    for o in rng.integers(0, power.size, replicas).tolist():
        total += np.roll(power, o)
        ok &= np.roll(present, o)
    return total, ok


def utility_report(
    traces: list[tuple[Trace, int]],
    *,
    grid_s: float,
    compose: str = "aligned",
    seed: int = 0,
    site_mw: float | None = None,
    spec: Spec | None = None,
    mitigations: list[Mitigation] | None = None,
    nameplate_w: float | None = None,
    fill: FillPolicy = NO_FILL,
    price_usd_per_kwh: float | None = None,
    on_step: Callable[[str], None] | None = None,
) -> UtilityReport:
    """Return the grid metrics of the fleet and the site, the spec, and each remedy."""
    step = on_step or (lambda note: None)
    # the nameplate scales the site and sizes remedies; ramps, ranges and bands do without it
    needs_plate = site_mw is not None or bool(mitigations)
    fleet_report, timeline = compose_fleet(
        traces,
        [grid_s],
        compose="random" if compose == "random" else "aligned",
        draws=1,
        seed=seed,
        nameplate_w=nameplate_w,
        grid_s=grid_s,
        fill=fill,
        nameplate_required=needs_plate,
    )
    step("composed the fleet")
    known = math.isfinite(fleet_report.fleet_nameplate_w)
    plate = fleet_report.fleet_nameplate_w if known else None
    replicas = 1 if site_mw is None or plate is None else max(1, round(site_mw * 1e6 / plate))
    semantics = resolved_semantics_of(fleet_report.members)
    power, present = timeline.power_w, timeline.present
    # the fleet's clock: its cell 0 is where the first trace's first cell begins (members are
    # aligned at their own first cells; for one trace, its own clock)
    grid_us = round(grid_s * 1e6)
    start_s = traces[0][0].span_us()[0] // grid_us * grid_us / 1e6
    fleet = swing_metrics(power, grid_s, present=present, semantics=semantics, start_s=start_s)
    site_power, site_present = site_series(power, present, replicas, compose, seed)
    site = swing_metrics(
        site_power, grid_s, present=site_present, semantics=semantics, start_s=start_s
    )
    _site_figures(fleet, site)
    step("measured the fleet and the site")
    report = UtilityReport(
        fleet_report.members,
        compose,
        fleet_report.gpus,
        plate,
        replicas,
        None if plate is None else plate * replicas,
        semantics,
        fleet,
        site,
        price_usd_per_kwh=price_usd_per_kwh,
        warnings=list(fleet_report.warnings) + fleet.notes,
    )
    report.series["site"] = site_power
    if spec is not None:
        report.spec_name = spec.name
        report.spec = judge(spec, site)
    if not mitigations:
        return report

    def passes(p: np.ndarray) -> bool:
        if spec is None:
            return True
        measured = swing_metrics(p, grid_s, semantics=semantics, start_s=start_s)
        return all(r.passed for r in judge(spec, measured))

    # each remedy alone, then each pair (in the order given: the second acts on the first's
    # output), so that the cheapest passing combination can be named
    combos = [(m,) for m in mitigations] + list(itertools.combinations(mitigations, 2))
    filled = np.where(site_present, site_power, site_power[site_present].mean())
    assert report.site_nameplate_w is not None  # remedies asked for it (needs_plate)
    for combo in combos:
        result = _apply_combo(
            combo,
            filled,
            grid_s,
            report.site_nameplate_w,
            passes,
            semantics,
            spec,
            price_usd_per_kwh,
            start_s,
        )
        gpu_plate = report.site_nameplate_w / (report.gpus * report.replicas)
        result.knob = "; ".join(m.knob(gpu_plate) for m in combo)
        report.mitigations.append(result)
        assert result.power_w is not None
        report.series[result.name] = result.power_w
        step(f"what-if {result.name}")
    passing = [r for r in report.mitigations if r.passes]
    if passing:
        report.cheapest = min(passing, key=lambda r: (r.extra_energy_j, r.storage_kwh or 0)).name
    return report


def resolved_semantics_of(members: list[FleetMember]) -> str:
    found = {m.power_semantics for m in members}
    return found.pop() if len(found) == 1 else "mixed"


def _site_figures(fleet: SwingMetrics, site: SwingMetrics) -> None:
    """The fleet's metrics carry the site's MW figures (from the site series itself)."""
    for f_r, s_r in zip(fleet.ramps, site.ramps, strict=True):
        f_r.site_mw_per_s = s_r.site_mw_per_s
    for f_d, s_d in zip(fleet.dynamic_range, site.dynamic_range, strict=True):
        f_d.site_mw = s_d.site_mw
    for f_b, s_b in zip(fleet.bands, site.bands, strict=True):
        f_b.site_peak_amplitude_mw = s_b.site_peak_amplitude_mw
    if fleet.dominant is not None and site.dominant is not None:
        fleet.dominant.site_amplitude_mw = site.dominant.site_amplitude_mw


def _apply_combo(
    combo: tuple[Mitigation, ...],
    p: np.ndarray,
    dt: float,
    nameplate_w: float,
    passes: Callable[[np.ndarray], bool],
    semantics: str,
    spec: Spec | None,
    price: float | None,
    start_s: float,
) -> MitigationResult:
    power = p
    extra, slowdown = 0.0, 0.0
    kwh = kw = None
    notes = []
    params: dict[str, float | None] = {}
    for m in combo:
        applied = apply(power, dt, nameplate_w, m, passes=passes)
        power = applied.power_w
        extra += applied.extra_energy_j
        slowdown += applied.slowdown_pct
        params[m.kind] = m.value
        if applied.storage_kwh is not None:
            kwh, kw = applied.storage_kwh, applied.storage_kw
            params["storage_window_s"] = applied.window_s
        if applied.note:
            notes.append(applied.note)
    residual = swing_metrics(power, dt, semantics=semantics, start_s=start_s)
    duration = p.size * dt
    per_year = extra / duration * YEAR_S / 3.6e9  # MWh per year
    result = MitigationResult(
        "+".join(m.label for m in combo),
        params,
        residual,
        extra,
        per_year,
        None if price is None else per_year * 1000 * price,
        slowdown,
        kwh,
        kw,
        note="; ".join(notes) or None,
        power_w=power,
    )
    if spec is not None:
        result.spec = judge(spec, residual)
        result.passes = all(r.passed for r in result.spec)
    return result
