"""The ``utility --json`` document: the figures of a fleet as the utility sees it, each
remedy's, and the series the report draws, decimated over the whole trace."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerkit.utility.analysis import UtilityReport

__all__ = ["utility_doc"]

#: the points a figure's series is decimated to (bucket means over the whole trace)
_FIGURE_POINTS = 2000


def _metrics_doc(m: Any) -> dict[str, Any]:
    doc = {k: v for k, v in dataclasses.asdict(m).items() if k != "psd"}
    return doc


def utility_doc(report: UtilityReport) -> dict[str, Any]:
    """The ``utility --json`` document (``figures`` holds decimated series for ``report``)."""
    fleet = _metrics_doc(report.fleet)
    doc: dict[str, Any] = {
        "members": report.members, "compose": report.compose, "gpus": report.gpus,
        "fleet_nameplate_w": report.fleet_nameplate_w, "replicas": report.replicas,
        "site_nameplate_w": report.site_nameplate_w, "site_mean_w": report.site.mean_w,
        "power_semantics": report.power_semantics, **fleet,
        "spec_name": report.spec_name,
        "spec": [_rule_doc(r) for r in report.spec],
        "mitigations": [
            {"name": m.name, "parameters": m.parameters, "residual": _metrics_doc(m.residual),
             "extra_energy_j": m.extra_energy_j, "extra_mwh_per_year": m.extra_mwh_per_year,
             "extra_usd_per_year": m.extra_usd_per_year, "slowdown_pct": m.slowdown_pct,
             "storage_kwh": m.storage_kwh, "storage_kw": m.storage_kw, "pass": m.passes,
             "spec": [_rule_doc(r) for r in m.spec], "note": m.note}
            for m in report.mitigations
        ],
        "cheapest": report.cheapest, "price_usd_per_kwh": report.price_usd_per_kwh,
        "warnings": report.warnings,
    }  # fmt: skip
    doc["figures"] = _figures(report)
    return doc


def _rule_doc(r: Any) -> dict[str, Any]:
    return {"rule": r.rule, "limit": r.limit, "unit": r.unit, "value": r.value,
            "pass": r.passed, "margin": r.margin, "note": r.note}  # fmt: skip


def _buckets(size: int, points: int) -> np.ndarray:
    """Edges of ``points`` buckets covering all ``size`` values (the last ones included)."""
    return np.linspace(0, size, min(points, size) + 1).round().astype(np.int64)


def _decimate(x: np.ndarray, edges: np.ndarray) -> list[float]:
    """The mean of each bucket between ``edges`` (every value in one)."""
    if edges.size - 1 == x.size:
        return x.tolist()
    return (np.add.reduceat(x, edges[:-1]) / np.diff(edges)).tolist()


def _figures(report: UtilityReport) -> dict[str, Any]:
    """Site power (as measured and after each remedy) as bucket means over the whole series,
    and the PSD; each bucket is drawn at its start."""
    dt = report.site.dt_s
    n = next(iter(report.series.values())).size
    edges = _buckets(n, _FIGURE_POINTS)
    f, density = report.site.psd if report.site.psd is not None else (np.empty(0), np.empty(0))
    keep = f > 0
    spectrum = _buckets(int(keep.sum()), 4000)
    return {
        "time_s": (edges[:-1] * dt).tolist(),
        "site_w": {name: _decimate(p, edges) for name, p in report.series.items()},
        "psd_hz": _decimate(f[keep], spectrum),
        "psd_w2_per_hz": _decimate(density[keep], spectrum),
    }
