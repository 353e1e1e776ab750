"""The report's economics section, from ``powerkit econ --json``: figures, assumptions, and the
provisioned power today against with oversubscription."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from powerkit.errors import BadInputError
from powerkit.report.page import Figure, Section

__all__ = ["econ_section"]


def econ_section(doc: dict[str, Any]) -> Section:
    """Return the economics section of an ``econ --json`` document."""
    try:
        today, oversub = (
            float(doc["provisioned_kw_nameplate"]),
            float(doc["provisioned_kw_oversub"]),
        )
        rows = [
            ["window judged", str(doc["window"])],
            [
                "fleet peak + margin",
                f"{100 * doc['peak_fraction']:.1f} % + {100 * doc['margin']:.0f} %",
            ],
            ["GPUs x TDP", f"{doc['gpus']:,} x {doc['gpu_tdp_w']:.0f} W"],
            ["provisioned today (facility)", f"{today:,.0f} kW"],
            ["provisioned with oversubscription", f"{oversub:,.0f} kW"],
            ["GPUs within the same feed", f"{doc['gpus_deployable_same_feed']:,}"],
            [
                "capex avoided",
                f"${doc['avoided_capex_usd']:,.0f} "
                f"(${doc['avoided_capex_usd_per_year']:,.0f}/year)",
            ],
            [
                "energy per year",
                f"{doc['annual_energy_mwh']:,.0f} MWh (${doc['annual_energy_cost_usd']:,.0f})",
            ],
        ]
        assumptions = [
            [name, f"{a['value']:g} {a['unit']}", str(a["source"])]
            for name, a in doc["assumptions"].items()
        ]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise BadInputError("not an `econ --json` document (figures missing)") from None
    control = doc.get("control") or {}
    if control.get("tokens_per_mwh_change") is not None:
        rows.append(
            [
                "controller",
                f"{100 * control['tokens_per_mwh_change']:+.1f} % tokens/MWh vs uncontrolled; "
                f"{control.get('energy_saved_mwh_per_year') or 0:,.0f} MWh/year at the same tokens",
            ]
        )
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
        margin={"l": 60, "r": 20, "t": 30, "b": 40},
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
