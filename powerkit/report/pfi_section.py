"""The PFI pages: normalized cap curves per job; allocation policies against the cut."""

from __future__ import annotations

import plotly.graph_objects as go

from powerkit.core.tables import cells, headers
from powerkit.pfi.allocate import AllocationResult
from powerkit.pfi.index import PFI_COLUMNS, PfiResult, pfi_text
from powerkit.report.page import MARGIN, Figure, Section

__all__ = ["allocate_section", "compute_section"]


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def _scaled(share: float | None) -> float | None:
    return None if share is None else 100 * share


def compute_section(results: list[PfiResult]) -> Section:
    """Each job's throughput against power, both as shares of the reference run."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="linear (PFI 1)", line={"dash": "dot"})
    )
    for r in results:
        pts = sorted(r.points, key=lambda p: float(p["power_w"]))
        fig.add_trace(
            go.Scatter(
                x=[float(p["power_w"]) / r.p_max_w for p in pts],
                y=[float(p["tokens_per_s"]) / r.t_max for p in pts],
                mode="lines+markers",
                name=f"{r.job} (PFI {pfi_text(r.pfi)})",
            )
        )
    lo = min([float(p["power_w"]) / r.p_max_w for r in results for p in r.points] + [1.0])
    fig.update_layout(
        height=460,
        xaxis_title="power / reference power",
        yaxis_title="throughput / reference throughput",
        xaxis_range=[max(0.0, lo - 0.05), 1.02],
        margin=MARGIN,
    )
    rows = cells(PFI_COLUMNS, results)
    return Section(
        "Power flexibility (PFI)",
        "Above the dotted line a job keeps more of its speed than it gives up in power: "
        "capping it first costs the least throughput.",
        [Figure(fig, "Throughput against power under each cap, as shares of the reference run")],
        [(headers(PFI_COLUMNS), rows)],
    )


def allocate_section(result: AllocationResult) -> Section:
    """Gap recovered and throughput per policy across the cut levels."""
    cuts = [100 * c.cut for c in result.cuts]
    gap = go.Figure()
    share = go.Figure()
    for policy in result.policies:
        gap.add_trace(
            go.Scatter(
                x=cuts,
                y=[_scaled(c.gap_recovered[policy]) for c in result.cuts],
                mode="lines+markers",
                name=policy,
            )
        )
        share.add_trace(
            go.Scatter(
                x=cuts,
                y=[
                    100 * c.tokens_per_s[policy] / result.uncapped_tokens_per_s for c in result.cuts
                ],
                mode="lines+markers",
                name=policy,
            )
        )
    gap.update_layout(
        height=380, xaxis_title="cut (%)", yaxis_title="gap recovered (%)", margin=MARGIN
    )
    share.update_layout(
        height=380,
        xaxis_title="cut (%)",
        yaxis_title="throughput (% of uncapped)",
        margin=MARGIN,
    )
    header = ["cut", *[f"{p} tok/s" for p in result.policies]]
    header += [f"{p} gap" for p in result.policies]
    rows = []
    for c in result.cuts:
        row = [f"{100 * c.cut:g}%"]
        row += [f"{c.tokens_per_s[p]:,.0f}" for p in result.policies]
        row += [_pct(c.gap_recovered[p]) for p in result.policies]
        rows.append(row)
    return Section(
        "Sharing a power cut",
        f"{result.workloads} synthetic workloads of {result.jobs_per_workload} jobs drawn from "
        "the measured curves (seed "
        f"{result.seed}); gap recovered = share of the throughput between equal-weight "
        "capping and the oracle that a policy wins back.",
        [
            Figure(gap, "Share of the equal-to-oracle throughput gap each policy recovers"),
            Figure(share, "Workload throughput under each policy, % of uncapped"),
        ],
        [(header, rows)],
    )
