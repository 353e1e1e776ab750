"""The report's controller section: power against budget over time, one panel per arm."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from powerkit.cells.rolling import PrefixSums, exceeds, rolling
from powerkit.control.evaluate import ArmResult, Episode
from powerkit.control.judge import EvalReport
from powerkit.core.units import format_value
from powerkit.report.page import MARGIN, Figure, Section

__all__ = ["control_section", "control_summary_section"]

_MAX_POINTS = 3000  # per panel of the whole-run view
_WINDOW_S = 30.0  # the mean a feed protected on 30 s averages sees
_ZOOM_S = 3600.0
_PANEL_PX = 130


def _per_gpu(episode: Episode, gpus: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seconds from the start, power per GPU per sample, and its trailing 30 s mean (NaN for
    the first 30 s): the windows code's rolling mean on the episode's 0.5 s grid."""
    assert episode.times_s is not None and episode.power_w is not None
    seconds = episode.times_s - episode.times_s[0]
    per_gpu = episode.power_w / gpus
    grid = float(np.median(np.diff(seconds))) if seconds.size > 1 else 0.5
    n = max(1, round(_WINDOW_S / grid))
    means = rolling(PrefixSums(per_gpu, np.ones(per_gpu.size, dtype=bool)), n, grid).means
    mean30 = np.full(per_gpu.size, np.nan)
    mean30[n - 1 :] = means
    return seconds, per_gpu, mean30


def _worst_hour(seconds: np.ndarray, mean30: np.ndarray, budget_w: float) -> float:
    """Start (s) of the hour, on whole hours from the start, with the most 30 s means over the
    budget (the first hour when none is over)."""
    over = exceeds(np.nan_to_num(mean30, nan=-np.inf), budget_w)
    hours = (seconds // _ZOOM_S).astype(np.int64)
    counts = np.bincount(hours, weights=over.astype(float))
    return float(np.argmax(counts)) * _ZOOM_S


def _panels(arms: list[str], titles: list[str]) -> go.Figure:
    fig = make_subplots(
        rows=len(arms),
        cols=1,
        shared_xaxes=True,
        subplot_titles=titles,
        vertical_spacing=min(0.06, 0.3 / max(1, len(arms))),
    )
    fig.update_yaxes(matches="y", title_text="W per GPU")
    fig.update_layout(
        height=_PANEL_PX * len(arms) + 90, showlegend=False, margin={**MARGIN, "t": 40}
    )
    return fig


def control_section(report: EvalReport, gpus: int) -> Section:
    """Return the evaluation section: the arms table, then power against the budget per arm
    (one panel each, shared axes) over the whole first seed and over its worst hour."""
    arms = list(dict.fromkeys(e.arm for e in report.episodes))
    first = {
        arm: next(e for e in report.episodes if e.arm == arm and e.times_s is not None)
        for arm in arms
    }
    series = {arm: _per_gpu(first[arm], gpus) for arm in arms}
    palette = qualitative.Plotly
    colour = {arm: palette[i % len(palette)] for i, arm in enumerate(arms)}  # same in both views
    rates = {a.arm: a.violation_rate_30s["mean"] for a in report.arms}
    titles = [
        f"{arm}: {format_value(100 * rates[arm], '.2f')} % of 30 s windows over budget"
        if arm in rates
        else arm
        for arm in arms
    ]
    whole = _panels(arms, titles)
    for row, arm in enumerate(arms, start=1):
        seconds, _, mean30 = series[arm]
        step = max(1, seconds.size // _MAX_POINTS)
        whole.add_trace(
            go.Scattergl(
                x=seconds[::step] / 3600,
                y=mean30[::step],
                mode="lines",
                name=arm,
                line={"width": 1, "color": colour[arm]},
            ),
            row=row,
            col=1,
        )
        whole.add_hline(y=report.budget_w, line_dash="dash", line_color="red", row=row, col=1)
    whole.update_xaxes(title_text="hours since start", row=len(arms), col=1)
    figures = [
        Figure(
            whole,
            f"Power per GPU (trailing 30 s means, W) against the {report.budget_w:g} W budget "
            "(dashed) over the first seed, one panel per arm, shared axes; each panel's title "
            "gives the arm's share of 30 s windows over budget (mean over seeds).",
        )
    ]
    reference = "uncontrolled" if "uncontrolled" in series else arms[0]
    seconds, _, mean30 = series[reference]
    if seconds.size and seconds[-1] > _ZOOM_S:
        start = _worst_hour(seconds, mean30, report.budget_w)
        zoom = _panels(arms, arms)
        for row, arm in enumerate(arms, start=1):
            seconds, raw, mean30 = series[arm]
            inside = (seconds >= start) & (seconds < start + _ZOOM_S)
            minutes = (seconds[inside] - start) / 60
            zoom.add_trace(
                go.Scattergl(
                    x=minutes,
                    y=raw[inside],
                    mode="lines",
                    line={"width": 0.6, "color": "#bbb"},
                    name=f"{arm} 0.5 s",
                ),
                row=row,
                col=1,
            )
            zoom.add_trace(
                go.Scattergl(
                    x=minutes,
                    y=mean30[inside],
                    mode="lines",
                    line={"width": 1.4, "color": colour[arm]},
                    name=f"{arm} 30 s",
                ),
                row=row,
                col=1,
            )
            zoom.add_hline(y=report.budget_w, line_dash="dash", line_color="red", row=row, col=1)
        zoom.update_xaxes(
            title_text=f"minutes from hour {start / 3600:g} of the run", row=len(arms), col=1
        )
        figures.append(
            Figure(
                zoom,
                f"The hour {start / 3600:g}-{start / 3600 + 1:g} h, where the {reference} arm "
                "has the most 30 s windows over budget: power per GPU at 0.5 s (grey) and its "
                "trailing 30 s mean (colour), W, one panel per arm, shared axes.",
            )
        )
    return Section(
        title=f"Controllers: {report.preset}, knob {report.knob}, budget {report.budget_w:g} W",
        intro=(
            f"{report.seeds} seed(s) of {report.horizon_s / 3600:g} h each; static safe holds "
            f"{report.knob}={report.static_safe} (largest setting under a "
            f"{100 * report.target:g} % violation target on the training conditions)."
        ),
        tables=[_arms_table(report.arms)],
        figures=figures,
    )


_HEADER = ["arm", "violations 0.5 s", "violations 30 s", "tokens", "tokens/MWh", "Wh per 1k tokens"]


def _arms_table(arms: list[ArmResult]) -> tuple[list[str], list[list[str]]]:
    """The arms table: means over seeds of each arm's summary."""
    rows = [
        [
            a.arm,
            format_value(100 * a.violation_rate_0_5s["mean"], ".2f") + "%",
            format_value(100 * a.violation_rate_30s["mean"], ".2f") + "%",
            format_value(a.tokens["mean"], ",.0f"),
            format_value(a.tokens_per_mwh["mean"], ",.0f"),
            format_value(a.wh_per_1k_tokens["mean"], ".3f"),
        ]
        for a in arms
    ]
    return _HEADER, rows


def control_summary_section(report: EvalReport) -> Section:
    """The evaluation section from a ``control eval --json`` document (no time series in it):
    the arms table, violations per arm and tokens per MWh per arm."""
    arms = report.arms
    names = [a.arm for a in arms]
    table = _arms_table(arms)
    title = f"Controllers: {report.preset or report.env}, knob {report.knob}"
    budget = report.budget_w
    violations = go.Figure(
        [
            go.Bar(
                x=names,
                y=[100 * getattr(a, key)["mean"] for a in arms],
                error_y={
                    "type": "data",
                    "array": [100 * (getattr(a, key).get("std") or 0) for a in arms],
                },
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
    means = [a.tokens_per_mwh["mean"] for a in arms]
    spreads = [a.tokens_per_mwh.get("std") or 0.0 for a in arms]
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
            f"{report.seeds} seed(s) of {report.horizon_s / 3600:g} h "
            f"each; static safe holds {report.knob}={report.static_safe}."
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
