"""The report's windowed-violations section, from ``powerkit windows --json``."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from powerkit.errors import BadInputError
from powerkit.report.page import MARGIN, Figure, Section
from powerkit.units import format_value

__all__ = ["windows_section"]


def windows_section(doc: dict[str, Any]) -> Section:
    """Return the section: violations per window length against the budget."""
    try:
        budget = float(doc["budget_w"])
        windows = doc["windows"]
        names = [str(w["window"]) for w in windows]
        rates = [100 * float(w["violation_rate"]) for w in windows]
        rows = [
            [
                str(w["window"]),
                f"{w['violations']:,} / {w['positions']:,}",
                format_value(100 * w["violation_rate"], ".3f") + "%",
                format_value(w["max_mean_w"], ".1f"),
                format_value(w["excess_energy_j"] / 1e3, ".2f"),
                format_value(w.get("longest_violation_s"), ".1f"),
            ]
            for w in windows
        ]
    except (KeyError, TypeError, ValueError):
        raise BadInputError("not a `windows --json` document (windows missing)") from None
    fig = go.Figure(go.Bar(x=names, y=rates, text=[f"{r:.2f} %" for r in rates]))
    fig.update_layout(
        height=320,
        xaxis_title="window",
        yaxis_title="window positions over budget (%)",
        margin=MARGIN,
    )
    header = ["window", "violations", "rate", "max mean W", "excess kJ", "longest s"]
    return Section(
        title=f"Windows: budget {budget:g} W ({doc.get('mode', '?')}, per {doc.get('scope', '?')})",
        intro=(
            f"How often the mean power of {doc.get('trace') or 'the trace'} over each window "
            f"length exceeds the budget (fill {doc.get('fill', 'none')}, coverage "
            f"{format_value(doc.get('coverage'), '.1%')})."
        ),
        tables=[(header, rows)],
        figures=[Figure(fig, f"Share of window positions whose mean exceeds {budget:g} W.")],
    )
