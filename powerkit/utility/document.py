"""The ``utility --json`` document: the figures of a fleet as the utility sees it, each
remedy's, and the series the report draws, decimated over the whole trace."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from powerkit.analysis.members import FleetMember
from powerkit.core.documents import Document, from_plain
from powerkit.core.schemas import field_properties
from powerkit.core.tables import Column
from powerkit.utility.analysis import MitigationResult, UtilityReport
from powerkit.utility.metrics import SwingMetrics
from powerkit.utility.spec import RuleResult

__all__ = ["Figures", "UtilityDocument", "site_unit", "utility_document", "utility_tables"]

#: the points a figure's series is decimated to (bucket means over the whole trace)
_FIGURE_POINTS = 2000


@dataclass(frozen=True)
class Figures:
    """The series the report draws, decimated over the whole trace: site power (as measured,
    ``site``, and after each remedy) per bucket start, and the PSD."""

    time_s: list[float]
    site_w: dict[str, list[float]]
    psd_hz: list[float]
    psd_w2_per_hz: list[float]


@dataclass(frozen=True)
class UtilityDocument(Document):
    """What ``powerkit utility`` reports: the fleet's metrics (flat in the document, as
    ``dt_s``, ``ramps``, ``bands``...), the site, the spec judged, each remedy, the figures."""

    COMMAND: ClassVar[str] = "utility"

    members: list[FleetMember]
    compose: str
    gpus: int
    fleet_nameplate_w: float | None
    replicas: int
    site_nameplate_w: float | None
    site_mean_w: float
    power_semantics: str
    fleet: SwingMetrics
    spec_name: str | None
    spec: list[RuleResult]
    mitigations: list[MitigationResult]
    cheapest: str | None
    price_usd_per_kwh: float | None
    warnings: list[str]
    figures: Figures

    @classmethod
    def schema_body(cls, defs: dict[str, Any]) -> dict[str, Any]:
        """The schema of :meth:`body` (docs/schemas/): the fleet's metrics flat among the
        fields."""
        properties, required = field_properties(cls, defs)
        fleet, fleet_required = field_properties(SwingMetrics, defs)
        del properties["fleet"]
        required = [k for k in required if k != "fleet"] + fleet_required
        return {"properties": {**properties, **fleet}, "required": required}

    def body(self) -> dict[str, Any]:
        """The fields, the fleet's metrics flat among them (after ``power_semantics``)."""
        plain = super().body()
        fleet = plain.pop("fleet")
        keys = list(plain)
        at = keys.index("power_semantics") + 1
        return {**{k: plain[k] for k in keys[:at]}, **fleet, **{k: plain[k] for k in keys[at:]}}

    @classmethod
    def from_body(cls, doc: dict[str, Any]) -> UtilityDocument:
        """The document's fields, the fleet's metrics gathered from among them."""
        metrics = {f.name for f in dataclasses.fields(SwingMetrics)}
        plain = {k: v for k, v in doc.items() if k not in metrics}
        plain["fleet"] = {k: v for k, v in doc.items() if k in metrics}
        return from_plain(cls, plain, "document")


def site_unit(doc: UtilityDocument) -> tuple[float, str]:
    """(factor from MW, unit) for site figures: MW, kW under 1 MW, W under 10 kW (a small
    fleet's swings are not 0.00 MW)."""
    plate = doc.site_nameplate_w or doc.site_mean_w  # (the mean: nameplate unknown)
    return (1.0, "MW") if plate >= 1e6 else (1e3, "kW") if plate >= 1e4 else (1e6, "W")


def _verdict(passed: bool | None) -> str:
    return "-" if passed is None else ("pass" if passed else "fail")


def utility_tables(doc: UtilityDocument) -> list[tuple[tuple[Column, ...], list[Any]]]:
    """The tables of ``powerkit utility``, each (columns, rows): ramps, dynamic range, bands,
    the spec judged (when one was given) and the remedies (when any were tried)."""
    k, unit = site_unit(doc)

    def bands_flag(b: Any) -> str:
        if not b.resolved:
            return "not resolved"
        if b.clipped_to_hz:
            return f"to {b.clipped_to_hz:g} Hz"
        return "averaged" if b.attenuated else ""

    def range_note(r: Any) -> str:
        return r.note or (f"from {r.resolution_s:g} s cells" if r.resolution_s > 1 else "")

    tables: list[tuple[tuple[Column, ...], list[Any]]] = [
        (
            (
                Column("ramp over", lambda r: f"{r.interval_s:g} s", key=True),
                Column("max W", "max_w", ",.0f"),
                Column("% of mean", "max_pct_of_mean", ".1f"),
                Column(f"site {unit}/s", "site_mw_per_s", ",.2f", scale=k),
            ),
            doc.fleet.ramps,
        ),
        (
            (
                Column("range within", lambda r: f"{r.period_s:g} s", key=True),
                Column("max W", "max_w", ",.0f"),
                Column("% of mean", "max_pct_of_mean", ".1f"),
                Column(f"site {unit}", "site_mw", ",.2f", scale=k),
                Column("periods", lambda r: f"{r.periods} (+{r.partial_periods} partial)"),
                Column("", range_note, text=True),
            ),
            doc.fleet.dynamic_range,
        ),
        (
            (
                Column("band Hz", lambda b: f"{b.low_hz:g}-{b.high_hz:g}", key=True),
                Column("variance", "variance_share", ".1f", "%", scale=100),
                Column("peak W", "peak_amplitude_w", ",.0f"),
                Column(f"site {unit}", "site_peak_amplitude_mw", ",.3f", scale=k),
                Column("", bands_flag, text=True),
            ),
            doc.fleet.bands,
        ),
    ]
    if doc.spec:
        tables.append(
            (
                (
                    Column("rule", "rule", key=True),
                    Column("limit", lambda r: f"{r.limit:g} {r.unit}"),
                    Column("value", "value", ",.3f"),
                    Column("margin", "margin", ",.3f"),
                    Column("", lambda r: "pass" if r.passed else "FAIL " + r.note, text=True),
                ),
                doc.spec,
            )
        )
    if doc.mitigations:
        tables.append(
            (
                (
                    Column("what-if", "name", key=True),
                    Column("extra MWh/yr", "extra_mwh_per_year", ",.1f"),
                    Column("USD/yr", "extra_usd_per_year", ",.0f"),
                    Column("slowdown", "slowdown_pct", ".2f", "%"),
                    Column("storage kWh", "storage_kwh", ",.1f"),
                    Column("kW", "storage_kw", ",.0f"),
                    Column("spec", lambda m: _verdict(m.passes)),
                    Column("knob", "knob", text=True),
                ),
                doc.mitigations,
            )
        )
    return tables


def utility_document(report: UtilityReport) -> UtilityDocument:
    """The ``utility --json`` document of ``report`` (with the figures' decimated series)."""
    return UtilityDocument(
        members=report.members,
        compose=report.compose,
        gpus=report.gpus,
        fleet_nameplate_w=report.fleet_nameplate_w,
        replicas=report.replicas,
        site_nameplate_w=report.site_nameplate_w,
        site_mean_w=report.site.mean_w,
        power_semantics=report.power_semantics,
        fleet=report.fleet,
        spec_name=report.spec_name,
        spec=report.spec,
        mitigations=report.mitigations,
        cheapest=report.cheapest,
        price_usd_per_kwh=report.price_usd_per_kwh,
        warnings=report.warnings,
        figures=_figures(report),
    )


def _buckets(size: int, points: int) -> np.ndarray:
    """Edges of ``points`` buckets covering all ``size`` values (the last ones included)."""
    return np.linspace(0, size, min(points, size) + 1).round().astype(np.int64)


def _decimate(x: np.ndarray, edges: np.ndarray) -> list[float]:
    """The mean of each bucket between ``edges`` (every value in one)."""
    if edges.size - 1 == x.size:
        return x.tolist()
    return (np.add.reduceat(x, edges[:-1]) / np.diff(edges)).tolist()


def _figures(report: UtilityReport) -> Figures:
    """Site power (as measured and after each remedy) as bucket means over the whole series,
    and the PSD; each bucket is drawn at its start."""
    dt = report.site.dt_s
    n = next(iter(report.series.values())).size
    edges = _buckets(n, _FIGURE_POINTS)
    f, density = report.site.psd if report.site.psd is not None else (np.empty(0), np.empty(0))
    keep = f > 0
    spectrum = _buckets(int(keep.sum()), 4000)
    return Figures(
        time_s=(edges[:-1] * dt).tolist(),
        site_w={name: _decimate(p, edges) for name, p in report.series.items()},
        psd_hz=_decimate(f[keep], spectrum),
        psd_w2_per_hz=_decimate(density[keep], spectrum),
    )
