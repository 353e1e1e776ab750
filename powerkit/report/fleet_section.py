"""The report's fleet section: fleet power at each window, and the CDF of window means."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from powerkit.analysis.fleet import FleetReport, FleetTimeline, FleetWindow
from powerkit.cells.rolling import PrefixSums, rolling
from powerkit.core.errors import option
from powerkit.core.units import format_span, format_value
from powerkit.report.page import Figure, Section

__all__ = ["fleet_section", "fleet_summary_section"]

_MAX_POINTS = 4000


def _windowed(timeline: FleetTimeline, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (hours since the start, rolling mean W; NaN where incomplete)."""
    pos = rolling(PrefixSums(timeline.power_w, timeline.present), cells, timeline.grid_s)
    means = pos.means if pos.all_complete else np.where(pos.complete, pos.means, np.nan)
    hours = (np.arange(means.size) + cells) * timeline.grid_s / 3600
    return hours, means


def fleet_section(report: FleetReport, timeline: FleetTimeline) -> Section:
    """Return the oversubscription section: a summary table and two captioned figures."""
    plate = report.fleet_nameplate_w
    over_time = go.Figure()
    cdf = go.Figure()
    for w in report.windows:
        hours, means = _windowed(timeline, w.cells)
        if means.size == 0:
            continue
        step = max(1, means.size // _MAX_POINTS)
        over_time.add_trace(
            go.Scattergl(
                x=hours[::step],
                y=means[::step] / plate,
                mode="lines",
                name=w.window,
                line={"width": 1},
            )
        )
        fractions = np.sort(means[~np.isnan(means)] / plate)
        pick = np.linspace(0, fractions.size - 1, min(fractions.size, _MAX_POINTS)).astype(int)
        cdf.add_trace(
            go.Scatter(
                x=fractions[pick], y=(pick + 1) / fractions.size, mode="lines", name=w.window
            )
        )
    for fig, x_title, y_title in (
        (over_time, "hours since the start", "fleet power / nameplate"),
        (cdf, "window mean / fleet nameplate", "share of windows"),
    ):
        fig.update_layout(
            height=380,
            margin={"l": 60, "r": 20, "t": 50, "b": 40},
            xaxis_title=x_title,
            yaxis_title=y_title,
            legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        )
    if report.capacity_w is not None:
        over_time.add_hline(
            y=report.capacity_w / plate,
            line_dash="dash",
            line_color="red",
            annotation_text="capacity",
        )
        cdf.add_vline(x=report.capacity_w / plate, line_dash="dash", line_color="red")
    draw = "the first random draw" if report.compose == "random" else f"{report.compose} start"
    return Section(
        title=f"Fleet: {report.gpus} GPUs, {report.compose} composition",
        intro=(
            f"Fleet nameplate {plate / 1e3:.1f} kW over {format_span(report.horizon_s)} "
            f"horizon; {report.draws} draw(s), seed {report.seed}." + _coverage_note(report)
        ),
        tables=[_windows_table(report.windows, report.capacity_w)],
        figures=[
            Figure(over_time, f"Fleet power as a share of nameplate at each window ({draw})."),
            Figure(
                cdf,
                "Cumulative distribution of window means against fleet nameplate: "
                "how much of the time the fleet needs each share of its nameplate.",
            ),
        ],
    )


def _windows_table(
    windows: list[FleetWindow], capacity_w: float | None = None
) -> tuple[list[str], list[list[str]]]:
    """The peaks table, one row a window; with a capacity, the share of positions over it,
    as the terminal shows."""
    header = [
        "window",
        "peak W",
        "peak / nameplate",
        "p50",
        "p95",
        "max",
        "safe oversub.",
        "complete positions",
    ]
    if capacity_w is not None:
        header.append(f"over {capacity_w / 1e3:,.1f} kW")
    rows = [
        [
            w.window if w.peak_w is not None else f"{w.window} (no complete position)",
            format_value(w.peak_w, ".0f"),
            format_value(w.peak_fraction, ".3f"),
            format_value(w.peak_fraction_p50, ".3f"),
            format_value(w.peak_fraction_p95, ".3f"),
            format_value(w.peak_fraction_max, ".3f"),
            format_value(w.safe_oversubscription, ".2f"),
            format_value(w.coverage, ".1%"),
            *([format_value(w.capacity_violation_rate, ".2%")] if capacity_w is not None else []),
        ]
        for w in windows
    ]
    return header, rows


def _coverage_note(report: FleetReport) -> str:
    """The sentences on fill, fleet coverage and empty windows."""
    empty = [w.window for w in report.windows if w.peak_w is None]
    notes = (
        f" Fill {report.fill}; the fleet is whole (every member present) in "
        f"{format_value(report.coverage, '.1%')} of its cells."
        if report.coverage is not None
        else ""
    )
    if empty:
        notes += (
            f" No complete position at {', '.join(empty)}: no peak can be stated there "
            f"(see {option('fill')} in docs/oversub.md)."
        )
    return notes


def fleet_summary_section(report: FleetReport) -> Section:
    """The oversubscription section from an ``oversub --json`` document (no time series in
    it): the peaks table and the peak share of nameplate per window (p50, p95, max over
    draws)."""
    windows = report.windows
    plate = report.fleet_nameplate_w
    names = [w.window for w in windows]
    fig = go.Figure(
        [
            go.Bar(x=names, y=[getattr(w, key) for w in windows], name=label)
            for key, label in (
                ("peak_fraction_p50", "p50 over draws"),
                ("peak_fraction_p95", "p95 over draws"),
                ("peak_fraction_max", "max over draws"),
            )
        ]
    )
    if report.capacity_w is not None:
        fig.add_hline(
            y=report.capacity_w / plate,
            line_dash="dash",
            line_color="red",
            annotation_text="capacity",
        )
    fig.update_layout(
        height=360,
        barmode="group",
        xaxis_title="window",
        yaxis_title="fleet peak / nameplate",
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
    )
    members = ", ".join(f"{m.path} x{m.count}" for m in report.members)
    return Section(
        title=f"Fleet: {report.gpus} GPUs, {report.compose} composition",
        intro=(
            f"Fleet nameplate {plate / 1e3:.1f} kW; {report.draws} draw(s), "
            f"margin {100 * report.margin:g} %. Members: {members or '-'}." + _coverage_note(report)
        ),
        tables=[_windows_table(windows, report.capacity_w)],
        figures=[
            Figure(
                fig,
                "The fleet's peak window mean as a share of its nameplate, per window: "
                "the median, p95 and worst over the random draws.",
            )
        ],
    )
