"""The report's economics section, from ``powerkit econ --json``: figures, assumptions, and the
provisioned power today against with oversubscription."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from powerkit.econ.economics import econ_rows
from powerkit.errors import BadInputError
from powerkit.report.page import MARGIN, Figure, Section

__all__ = ["econ_section"]


def econ_section(doc: dict[str, Any]) -> Section:
    """Return the economics section of an ``econ --json`` document."""
    try:
        today, oversub = (
            float(doc["provisioned_kw_nameplate"]),
            float(doc["provisioned_kw_oversub"]),
        )
        rows = [list(row) for row in econ_rows(doc)]
        assumptions = [
            [name, f"{a['value']:g} {a['unit']}", str(a["source"])]
            for name, a in doc["assumptions"].items()
        ]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise BadInputError("not an `econ --json` document (figures missing)") from None
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
        title=f"Economics: {doc['gpus']:,} GPUs",
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
