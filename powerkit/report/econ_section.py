"""The report's economics section, from ``powerkit econ --json``: figures, assumptions, and the
provisioned power today against with oversubscription."""

from __future__ import annotations

import plotly.graph_objects as go

from powerkit.econ.economics import EconReport, assumption_rows, econ_rows
from powerkit.report.page import MARGIN, Figure, Section

__all__ = ["econ_section"]


def econ_section(report: EconReport) -> Section:
    """Return the economics section of an ``econ`` result."""
    today, oversub = report.provisioned_kw_nameplate, report.provisioned_kw_oversub
    rows = [list(row) for row in econ_rows(report)]
    assumptions = [list(row) for row in assumption_rows(report)]
    fig = go.Figure(
        go.Bar(
            x=["today (nameplate)", "with oversubscription"],
            y=[today, oversub],
            text=[f"{today:,.0f} kW", f"{oversub:,.0f} kW"],
        )
    )
    fig.update_layout(
        height=320,
        yaxis_title="provisioned facility power (kW)",
        margin=MARGIN,
    )
    return Section(
        title=f"Economics: {report.gpus:,} GPUs",
        intro="Every figure per year where it says so; each assumption with its source below.",
        tables=[(["figure", "value"], rows), (["assumption", "value", "source"], assumptions)],
        figures=[
            Figure(
                fig,
                "Facility power provisioned for these GPUs at nameplate and at the fleet's "
                "measured peak plus margin.",
            )
        ],
    )
