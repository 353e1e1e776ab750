"""The report's capping section, from ``powerkit cap --json``: the throughput lost and the time
over the limit against the oversubscription ratio (or the limit), per policy; from a run just
made (``cap --html``), also the tightest feed over time: the fleet's power against it, the
GPUs under a cap and each job's throughput."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from powerkit.cap.document import CAP_COLUMNS, CapReport
from powerkit.core.tables import cells, headers
from powerkit.core.units import format_duration
from powerkit.report.page import MARGIN, Figure, Section

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
        over.add_trace(
            go.Scatter(
                x=x, y=[100 * r.over_limit_share for r in runs], mode="lines+markers", name=policy
            )
        )
    axis = "oversubscription ratio (nameplate ÷ feed)" if by_ratio else "limit (kW)"
    for fig, title in ((lost, "throughput lost (%)"), (over, "time over the limit (%)")):
        fig.update_layout(height=340, margin=MARGIN, xaxis_title=axis, yaxis_title=title)
    figures = [
        Figure(lost, "Throughput lost to caps against the feed, per policy."),
        Figure(
            over,
            "Share of the time the fleet's power was over the limit before the caps "
            "acted, per policy.",
        ),
        *_timelines(report),
    ]
    return Section(
        title=f"Capping: {report.gpus} GPUs, {report.compose}, {len(policies)} policies",
        intro=(
            f"From {source or 'a cap run'}: {report.summary()}. Throughput lost is the share of "
            "the GPUs' time at their jobs' reference speed (docs/cap.md)."
        ),
        tables=[(headers(CAP_COLUMNS), cells(CAP_COLUMNS, report.runs))],
        figures=figures,
    )


def _timelines(report: CapReport) -> list[Figure]:
    """Over time, at the tightest feed: the fleet's power against the limit, the GPUs under a
    cap, and each job's throughput, per policy (a run held in memory: a document read back
    has no timeline)."""
    runs = [r for r in report.runs if r.timeline is not None]
    if not runs:
        return []
    tightest = min(r.limit_w for r in runs)
    runs = [r for r in runs if r.limit_w == tightest]
    power, gpus, kept = go.Figure(), go.Figure(), go.Figure()
    first = runs[0].timeline
    assert first is not None
    hours = np.arange(first.capped_w.size) * first.span_s / 3600
    power.add_trace(
        go.Scatter(x=hours, y=first.uncapped_w / 1e3, name="uncapped", line={"color": "lightgray"})
    )
    power.add_trace(
        go.Scatter(
            x=hours, y=first.limit_w / 1e3, name="limit", line={"color": "black", "dash": "dash"}
        )
    )
    for r in runs:
        t = r.timeline
        assert t is not None
        power.add_trace(go.Scatter(x=hours, y=t.capped_w / 1e3, name=r.policy))
        gpus.add_trace(go.Scatter(x=hours, y=100 * t.capped_gpus, name=r.policy))
        for job, share in t.kept.items():
            kept.add_trace(go.Scatter(x=hours, y=100 * share, name=f"{r.policy}: {job}"))
    labels = (
        (power, "fleet power (kW, highest in each span)"),
        (gpus, "GPUs under a cap (%)"),
        (kept, "throughput kept (% of reference)"),
    )
    for fig, title in labels:
        fig.update_layout(
            height=340, margin=MARGIN, xaxis_title="hours from the start", yaxis_title=title
        )
    span = format_duration(first.span_s)
    feed = f"the tightest feed ({tightest / 1e3:,.1f} kW)"
    out = [
        Figure(
            power,
            f"The fleet's power against {feed}, uncapped and under each "
            f"policy: the highest of each {span}.",
        ),
        Figure(gpus, f"Share of the GPUs under a cap at {feed}, per policy ({span} means)."),
    ]
    if any(r.timeline is not None and r.timeline.kept for r in runs):
        out.append(
            Figure(
                kept,
                f"Each job's throughput as a share of its reference speed at "
                f"{feed}, per policy ({span} means).",
            )
        )
    return out
