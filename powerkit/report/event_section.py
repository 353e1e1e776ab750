"""The report's curtailment-event section, from ``utility event --json``: the certificate a
program's reviewer reads (criteria, figures, the inputs' fingerprints) and the plot they
want: measured power, the baseline, the committed level and the response window."""

from __future__ import annotations

import plotly.graph_objects as go

from powerkit.core.units import format_duration, format_energy, format_value
from powerkit.report.page import MARGIN, Figure, Section
from powerkit.utility.certificate import EventReport, power_3g

__all__ = ["event_section"]


def event_section(doc: EventReport, source: str = "") -> Section:
    """The section of one event's certificate."""
    kw = [None if p is None else p / 1e3 for p in doc.plot_power_w]
    base = [None if b is None else b / 1e3 for b in doc.plot_baseline_w]
    share = doc.committed_w / doc.baseline_w if doc.baseline_w else 0.0
    target = [None if b is None else b * (1 - share) for b in base]
    fig = go.Figure(
        [
            go.Scatter(x=doc.plot_t_s, y=kw, name="measured", line={"width": 1}),
            go.Scatter(x=doc.plot_t_s, y=base, name="baseline", line={"dash": "dash"}),
            go.Scatter(
                x=doc.plot_t_s, y=target, name="baseline − commitment", line={"dash": "dot"}
            ),
        ]
    )
    fig.add_vrect(x0=0, x1=doc.duration_s, fillcolor="lightgreen", opacity=0.15, line_width=0)
    fig.add_vrect(x0=0, x1=doc.respond_within_s, fillcolor="orange", opacity=0.25, line_width=0)
    fig.update_layout(
        height=380,
        xaxis_title="time from the event's start (s)",
        yaxis_title="fleet power (kW)",
        margin=MARGIN,
    )
    verdict = "passed" if doc.passed else "not passed"
    figures = [
        ["start", doc.start],
        ["length", format_duration(doc.duration_s)],
        [
            "commitment",
            f"{doc.commit} ({power_3g(doc.committed_w)} on average)",
        ],
        [
            "baseline",
            f"{doc.baseline_method}: {power_3g(doc.baseline_w)} on average",
        ],
        ["response", "never" if doc.response_s is None else format_duration(doc.response_s)],
        ["intervals met", format_value(doc.met_share, ".1%")],
        ["shortfall", format_energy(doc.shortfall_j)],
        ["performance factor", format_value(doc.performance_factor, ".3f")],
        ["rebound", format_value(doc.rebound_w, ",.0f") + " W"],
        ["coverage", format_value(doc.coverage, ".1%")],
    ]
    criteria = [[c.name, "pass" if c.passed else "FAIL", c.detail] for c in doc.criteria]
    inputs = [
        [f.path, format_value(f.bytes, ","), f.sha256 or "-", f"{f.samples:,}", f"{f.coverage:.1%}"]
        for f in doc.inputs
    ]
    return Section(
        title=f"Curtailment event at {doc.start}: {verdict}" + (f" ({source})" if source else ""),
        intro="Measured against the baseline, per metering interval, as a program's meter judges.",
        tables=[
            (["criterion", "", "detail"], criteria),
            (["figure", "value"], figures),
            (["input", "bytes", "SHA-256", "samples", "coverage of the event"], inputs),
        ],
        figures=[
            Figure(
                fig,
                "Fleet power around the event (shaded green; the response window orange), the "
                "baseline and the level the commitment asks for.",
            )
        ],
    )
