"""The report's controller section: power against budget over time, one line per arm."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from powerkit.control.train import EvalReport
from powerkit.report.page import Figure, Section
from powerkit.units import format_value

__all__ = ["control_section"]

_MAX_POINTS = 3000


def control_section(report: EvalReport, gpus: int) -> Section:
    """Return the evaluation section: the arms table and power vs budget per arm."""
    fig = go.Figure()
    for arm in dict.fromkeys(e.arm for e in report.episodes):
        episode = next(e for e in report.episodes if e.arm == arm and e.times_s is not None)
        assert episode.times_s is not None and episode.power_w is not None
        step = max(1, episode.times_s.size // _MAX_POINTS)
        # 30 s means: what a feed protected on 30 s averages sees
        kernel = np.ones(60) / 60
        smooth = np.convolve(episode.power_w / gpus, kernel, mode="same")
        fig.add_trace(
            go.Scattergl(
                x=(episode.times_s[::step] - episode.times_s[0]) / 3600,
                y=smooth[::step],
                mode="lines",
                name=arm,
                line={"width": 1},
            )
        )
    fig.add_hline(
        y=report.budget_w,
        line_dash="dash",
        line_color="red",
        annotation_text=f"budget {report.budget_w:g} W",
    )
    fig.update_layout(
        height=420,
        xaxis_title="hours",
        yaxis_title="power per GPU (W, 30 s mean)",
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    header = [
        "arm",
        "violations 0.5 s",
        "violations 30 s",
        "tokens",
        "tokens/MWh",
        "Wh per 1k tokens",
    ]
    rows = [
        [
            a.arm,
            format_value(100 * a.violation_rate_0_5s["mean"], ".2f") + "%",
            format_value(100 * a.violation_rate_30s["mean"], ".2f") + "%",
            format_value(a.tokens["mean"], ",.0f"),
            format_value(a.tokens_per_mwh["mean"], ",.0f"),
            format_value(a.wh_per_1k_tokens["mean"], ".3f"),
        ]
        for a in report.arms
    ]
    return Section(
        title=f"Controllers: {report.preset}, knob {report.knob}, budget {report.budget_w:g} W",
        intro=(
            f"{report.seeds} seed(s) of {report.horizon_s / 3600:g} h each; static safe holds "
            f"{report.knob}={report.static_safe} (largest setting under a "
            f"{100 * report.target:g} % violation target on the training conditions)."
        ),
        tables=[(header, rows)],
        figures=[
            Figure(
                fig,
                "Power per GPU (30 s means) against the budget over the first "
                "seed, one line per arm.",
            )
        ],
    )
