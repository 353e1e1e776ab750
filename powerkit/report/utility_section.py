"""The report's utility section, from ``powerkit utility --json``: site power with and without each
remedy, the spectrum with the utility bands shaded, and the spec."""

from __future__ import annotations

import plotly.graph_objects as go

from powerkit.core.units import format_value
from powerkit.report.page import MARGIN, Figure, Section
from powerkit.utility.document import UtilityDocument

__all__ = ["utility_section"]


def utility_section(doc: UtilityDocument, source: str = "") -> Section:
    """Return the section for one ``utility --json`` document."""
    t, series = doc.figures.time_s, doc.figures.site_w
    f, psd = doc.figures.psd_hz, doc.figures.psd_w2_per_hz
    bands, rules, remedies = doc.fleet.bands, doc.spec, doc.mitigations
    dominant = doc.fleet.dominant
    hz = None if dominant is None else dominant.frequency_hz
    mw = None if dominant is None else dominant.site_amplitude_mw
    power = go.Figure()
    for name, values in series.items():
        label = "site, as measured" if name == "site" else name
        power.add_trace(
            go.Scatter(
                x=t[: len(values)],
                y=[v / 1e6 for v in values],
                mode="lines",
                name=label,
                line={"width": 1},
            )
        )
    power.update_layout(
        height=360, margin=MARGIN, xaxis_title="time (s)", yaxis_title="site power (MW)"
    )
    spectrum = go.Figure(go.Scatter(x=f, y=psd, mode="lines", name="PSD"))
    colours = ("rgba(31,119,180,0.12)", "rgba(255,127,14,0.12)", "rgba(44,160,44,0.12)")
    for b, colour in zip(bands, colours, strict=False):
        if b.resolved:
            top = b.clipped_to_hz or b.high_hz
            spectrum.add_vrect(
                x0=b.low_hz,
                x1=top,
                fillcolor=colour,
                line_width=0,
                annotation_text=f"{b.low_hz:g}-{b.high_hz:g} Hz",
                annotation_position="top left",
            )
    spectrum.update_layout(
        height=360,
        margin=MARGIN,
        xaxis_title="frequency (Hz)",
        yaxis_title="power spectral density (W²/Hz)",
    )
    spectrum.update_xaxes(type="log")
    spectrum.update_yaxes(type="log")
    tables = []
    if rules:
        tables.append(
            (
                ["rule", "limit", "value", "margin", "verdict"],
                [
                    [
                        r.rule,
                        f"{r.limit:g} {r.unit}",
                        format_value(r.value, ",.3f"),
                        format_value(r.margin, ",.3f"),
                        "pass" if r.passed else "fail",
                    ]
                    for r in rules
                ],
            )
        )
    if remedies:
        tables.append(
            (
                ["what-if", "extra MWh/yr", "USD/yr", "slowdown %", "storage kWh", "spec"],
                [
                    [
                        m.name,
                        format_value(m.extra_mwh_per_year, ",.1f"),
                        format_value(m.extra_usd_per_year, ",.0f"),
                        format_value(m.slowdown_pct, ".2f"),
                        format_value(m.storage_kwh, ",.1f"),
                        "-" if m.passes is None else ("pass" if m.passes else "fail"),
                    ]
                    for m in remedies
                ],
            )
        )
    return Section(
        title=f"Grid: {doc.gpus} GPUs x {doc.replicas} replica(s), {doc.compose}",
        intro=(
            f"From {source or 'a grid run'}: site power with its swings as the utility sees them. "
            f"Dominant frequency {format_value(hz, '.4f')} Hz, "
            f"amplitude {format_value(mw, ',.2f')} MW at "
            f"site scale; cheapest remedy that passes: {doc.cheapest or 'none'}."
        ),
        tables=tables,
        figures=[
            Figure(
                power, "Site power over time, as measured and after each remedy (bucket means)."
            ),
            Figure(
                spectrum,
                "Power spectral density of the site's power (Welch); the shaded "
                "bands are the ones utilities limit.",
            ),
        ],
    )
