"""The report's carbon section, from ``powerkit carbon --json`` (a trace or an econ scenario)."""

from __future__ import annotations

import plotly.graph_objects as go

from powerkit.econ.carbon import CarbonReport, ScenarioCarbon
from powerkit.report.page import MARGIN, Figure, Section

__all__ = ["carbon_section"]


def carbon_section(result: CarbonReport | ScenarioCarbon) -> Section:
    """Return the carbon section: the figures, and the accounting compared where it can be."""
    intensity, source = result.intensity_g_per_kwh, result.source
    if isinstance(result, ScenarioCarbon):
        rows = [
            ["energy per year", f"{result.annual_energy_mwh:,.0f} MWh"],
            ["emissions per year", f"{result.emissions_t_per_year:,.1f} t CO2e"],
        ]
        if result.control_saved_t_per_year is not None:
            saved = result.control_saved_t_per_year
            rows.append(["saved by the controller", f"{saved:,.1f} t CO2e/year"])
        bars = {"emissions per year": result.emissions_t_per_year}
        unit = "t CO2e per year"
    else:
        rows = [
            ["energy", f"{result.energy_kwh:,.3f} kWh over {result.hours} hour(s)"],
            ["emissions", f"{result.emissions_kg:,.3f} kg CO2e"],
        ]
        hourly = result.mode == "hourly"
        bars = {"time-varying" if hourly else "emissions": result.emissions_kg}
        unit = "kg CO2e"
        if hourly and result.emissions_at_average_kg is not None:
            at_average = result.emissions_at_average_kg
            rows.append(["at the series' average", f"{at_average:,.3f} kg CO2e"])
            bars["at the average"] = at_average
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
