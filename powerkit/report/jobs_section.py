"""The report's jobs section, from ``powerkit jobs --json``: whose energy it was, over time
and by job."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative

from powerkit.core.units import format_energy, format_value
from powerkit.jobs.report import JobsReport
from powerkit.report.page import MARGIN, Figure, Section

__all__ = ["jobs_section"]

#: the jobs the bar chart and the table show (the document holds every one)
SHOWN = 30
PALETTE = qualitative.Plotly


def jobs_section(report: JobsReport, source: str = "") -> Section:
    """The section: the fleet's energy split, the attributed energy per group and hour
    (stacked), and the largest jobs as a sorted bar coloured by account."""
    figures = []
    top = report.jobs[:SHOWN][::-1]  # (the largest at the top of a horizontal bar chart)
    accounts = sorted({j.account or "(none)" for j in top})
    groups = report.timeline.groups if report.timeline is not None else []
    keys = sorted({*accounts, *(g.key or "(none)" for g in groups)})
    colour = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}  # (one key, one colour)
    if report.timeline is not None and groups:
        t = report.timeline
        over_time = go.Figure(
            [
                go.Bar(
                    x=t.hour_starts,
                    y=[e / 3.6e6 for e in g.energy_j],
                    name=g.key or "(none)",
                    marker_color=colour[g.key or "(none)"],
                )
                for g in groups
            ]
        )
        over_time.update_layout(
            barmode="stack", height=360, yaxis_title="energy (kWh)", margin=MARGIN
        )
        figures.append(
            Figure(over_time, f"The jobs' energy per UTC clock hour, stacked by {t.by}.")
        )
    bars = go.Figure(
        [
            go.Bar(
                y=[j.job for j in top if (j.account or "(none)") == a],
                x=[j.energy_j / 3.6e6 for j in top if (j.account or "(none)") == a],
                orientation="h",
                name=a,
                marker_color=colour[a],
            )
            for a in accounts
        ]
    )
    bars.update_layout(
        height=max(300, 22 * len(top) + 80),
        xaxis_title="energy (kWh)",
        yaxis={"categoryorder": "array", "categoryarray": [j.job for j in top]},
        margin=MARGIN,
    )
    figures.append(
        Figure(bars, f"The {len(top)} jobs that used the most energy, coloured by account.")
    )
    rows = [
        [
            j.job,
            j.user or "-",
            j.account or "-",
            format_value(j.gpu_hours, ",.1f"),
            format_energy(j.energy_j),
            format_value(j.coverage, ".1%"),
            format_value(j.mean_power_w, ".0f"),
        ]
        for j in report.jobs[:SHOWN]
    ]
    split = (
        f"The fleet used {format_energy(report.total_j)}: jobs "
        f"{format_energy(report.attributed_j)}, GPUs no job held "
        f"{format_energy(report.unattributed_j)}"
    )
    return Section(
        title=f"Jobs ({len(report.jobs):,}, from {report.source})"
        + (f": {source}" if source else ""),
        intro=split + ".",
        figures=figures,
        tables=[(["job", "user", "account", "GPU-h", "energy", "coverage", "W/GPU"], rows)],
    )
