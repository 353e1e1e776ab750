"""The report's carbon section, from ``powerkit carbon --json`` (a trace or an econ scenario)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from powerkit.errors import BadInputError
from powerkit.report.page import MARGIN, Figure, Section

__all__ = ["carbon_section"]


def carbon_section(doc: dict[str, Any]) -> Section:
    """Return the carbon section: the figures, and the accounting compared where it can be."""
    try:
        intensity, source = float(doc["intensity_g_per_kwh"]), str(doc["source"])
        if "emissions_t_per_year" in doc:  # an econ scenario
            rows = [
                ["energy per year", f"{float(doc['annual_energy_mwh']):,.0f} MWh"],
                ["emissions per year", f"{float(doc['emissions_t_per_year']):,.1f} t CO2e"],
            ]
            if doc.get("control_saved_t_per_year") is not None:
                saved = float(doc["control_saved_t_per_year"])
                rows.append(["saved by the controller", f"{saved:,.1f} t CO2e/year"])
            bars = {"emissions per year": float(doc["emissions_t_per_year"])}
            unit = "t CO2e per year"
        else:
            rows = [
                ["energy", f"{float(doc['energy_kwh']):,.3f} kWh over {doc['hours']} hour(s)"],
                ["emissions", f"{float(doc['emissions_kg']):,.3f} kg CO2e"],
            ]
            bars = {
                "time-varying" if doc["mode"] == "hourly" else "emissions": float(
                    doc["emissions_kg"]
                )
            }
            unit = "kg CO2e"
            if doc["mode"] == "hourly":
                at_average = float(doc["emissions_at_average_kg"])
                rows.append(["at the series' average", f"{at_average:,.3f} kg CO2e"])
                bars["at the average"] = at_average
    except (KeyError, TypeError, ValueError):
        raise BadInputError("not a `carbon --json` document (figures missing)") from None
    rows.insert(0, ["intensity", f"{intensity:,.1f} g CO2e/kWh ({source})"])
    fig = go.Figure(go.Bar(x=list(bars), y=list(bars.values())))
    fig.update_layout(height=300, yaxis_title=f"emissions ({unit})", margin=MARGIN)
    caption = (
        "Emissions with the hourly intensity against the same energy at the series' average."
        if len(bars) > 1
        else "Operational emissions at the intensity above (embodied carbon not included)."
    )
    return Section(
        title="Carbon",
        intro="Operational emissions: energy times grid carbon intensity.",
        tables=[(["figure", "value"], rows)],
        figures=[Figure(fig, caption)],
    )
