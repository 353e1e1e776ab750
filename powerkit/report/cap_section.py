"""The report's capping section, from ``powerkit cap --json``: the throughput lost and the time
over the limit against the oversubscription ratio (or the limit), per policy."""

from __future__ import annotations

import plotly.graph_objects as go

from powerkit.cap.replay import CAP_COLUMNS, CapReport
from powerkit.report.page import MARGIN, Figure, Section
from powerkit.tables import cells, headers

__all__ = ["cap_section"]


def cap_section(report: CapReport, source: str = "") -> Section:
    """Return the section: two figures along the ratios (or the limits) and the runs' table."""
    by_ratio = all(r.ratio is not None for r in report.runs)
    policies = list(dict.fromkeys(r.policy for r in report.runs))
    lost, over = go.Figure(), go.Figure()
    for policy in policies:
        runs = [r for r in report.runs if r.policy == policy]
        x = [r.ratio if by_ratio else r.limit_w / 1e3 for r in runs]
        y = [None if r.lost_share is None else 100 * r.lost_share for r in runs]
        lost.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=policy))
        over.add_trace(go.Scatter(x=x, y=[100 * r.over_limit_share for r in runs],
                                  mode="lines+markers", name=policy))  # fmt: skip
    axis = "oversubscription ratio (nameplate ÷ feed)" if by_ratio else "limit (kW)"
    for fig, title in ((lost, "throughput lost (%)"), (over, "time over the limit (%)")):
        fig.update_layout(height=340, margin=MARGIN, xaxis_title=axis, yaxis_title=title)
    return Section(
        title=f"Capping: {report.gpus} GPUs, {report.compose}, {len(policies)} policies",
        intro=(
            f"From {source or 'a cap run'}: {report.summary()}. Throughput lost is the share of "
            "the GPUs' time at their jobs' reference speed (docs/cap.md)."
        ),
        tables=[(headers(CAP_COLUMNS), cells(CAP_COLUMNS, report.runs))],
        figures=[
            Figure(lost, "Throughput lost to caps against the feed, per policy."),
            Figure(
                over,
                "Share of the time the fleet's power was over the limit before the "
                "caps acted, per policy.",
            ),
        ],
    )
