"""The report's controller section: power against budget over time, one line per arm."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
import plotly.graph_objects as go

from powerkit.control.train import EvalReport
from powerkit.errors import BadInputError
from powerkit.report.page import MARGIN, Figure, Section
from powerkit.units import format_value

__all__ = ["control_section", "control_summary_section"]

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
    return Section(
        title=f"Controllers: {report.preset}, knob {report.knob}, budget {report.budget_w:g} W",
        intro=(
            f"{report.seeds} seed(s) of {report.horizon_s / 3600:g} h each; static safe holds "
            f"{report.knob}={report.static_safe} (largest setting under a "
            f"{100 * report.target:g} % violation target on the training conditions)."
        ),
        tables=[_arms_table([asdict(a) for a in report.arms])],
        figures=[
            Figure(
                fig,
                "Power per GPU (30 s means) against the budget over the first "
                "seed, one line per arm.",
            )
        ],
    )


_HEADER = ["arm", "violations 0.5 s", "violations 30 s", "tokens", "tokens/MWh", "Wh per 1k tokens"]


def _arms_table(arms: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The arms table: means over seeds of each arm's summary (``asdict(ArmResult)``)."""
    rows = [
        [
            a["arm"],
            format_value(100 * a["violation_rate_0_5s"]["mean"], ".2f") + "%",
            format_value(100 * a["violation_rate_30s"]["mean"], ".2f") + "%",
            format_value(a["tokens"]["mean"], ",.0f"),
            format_value(a["tokens_per_mwh"]["mean"], ",.0f"),
            format_value(a["wh_per_1k_tokens"]["mean"], ".3f"),
        ]
        for a in arms
    ]
    return _HEADER, rows


def control_summary_section(doc: dict[str, Any]) -> Section:
    """The evaluation section from ``control eval --json`` output (no time series in it):
    the arms table, violations per arm and tokens per MWh per arm."""
    try:
        arms = doc["arms"]
        names = [a["arm"] for a in arms]
        table = _arms_table(arms)
        title = f"Controllers: {doc['preset'] or doc['env']}, knob {doc['knob']}"
        budget = float(doc["budget_w"])
    except (KeyError, TypeError, ValueError):
        raise BadInputError("not a `control eval --json` document (arms missing)") from None
    violations = go.Figure(
        [
            go.Bar(
                x=names,
                y=[100 * a[key]["mean"] for a in arms],
                error_y={"type": "data", "array": [100 * (a[key].get("std") or 0) for a in arms]},
                name=label,
            )
            for key, label in (("violation_rate_0_5s", "0.5 s"), ("violation_rate_30s", "30 s"))
        ]
    )
    violations.update_layout(
        height=340,
        barmode="group",
        yaxis_title="windows over budget (%)",
        margin=MARGIN,
    )
    means = [float(a["tokens_per_mwh"]["mean"]) for a in arms]
    spreads = [float(a["tokens_per_mwh"].get("std") or 0) for a in arms]
    reference = next((m for n, m in zip(names, means, strict=True) if n == "uncontrolled"), None)
    labels = [f"{100 * (m / reference - 1):+.1f} %" if reference else f"{m:,.0f}" for m in means]
    efficiency = go.Figure(
        go.Bar(
            x=names,
            y=means,
            error_y={"type": "data", "array": spreads},
            text=labels,
            textposition="outside",
        )
    )
    # The arms differ by a few per cent: an axis from zero would hide the differences.
    low = min(m - s for m, s in zip(means, spreads, strict=True))
    high = max(m + s for m, s in zip(means, spreads, strict=True))
    pad = 0.15 * (high - low) or 0.05 * abs(high) or 1.0
    efficiency.update_layout(
        height=340,
        yaxis_title="tokens per MWh",
        yaxis_range=[max(0.0, low - pad), high + pad],
        margin=MARGIN,
    )
    return Section(
        title=f"{title}, budget {budget:g} W",
        intro=(
            f"{doc.get('seeds', '?')} seed(s) of {float(doc.get('horizon_s', 0)) / 3600:g} h "
            f"each; static safe holds {doc['knob']}={doc.get('static_safe_setting')}."
        ),
        tables=[table],
        figures=[
            Figure(violations, "Share of 0.5 s and 30 s windows over budget per arm (mean ± sd)."),
            Figure(
                efficiency,
                "Tokens per MWh per arm (mean ± sd over seeds), labelled with the change "
                "against the uncontrolled arm; the axis starts near the data, not at zero.",
            ),
        ],
    )
