"""The report's sweep section: power heatmap, power vs throughput, authority bars."""

from __future__ import annotations

import plotly.graph_objects as go

from powerkit.core.tables import cells, headers
from powerkit.core.units import format_value
from powerkit.report.page import MARGIN, Figure, Section
from powerkit.sweep.authority import SweepReport
from powerkit.sweep.optimal import OPTIMAL_COLUMNS

__all__ = ["pareto_front", "sweep_section"]


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Return the (power, throughput) points no other point beats on both (less power, more
    throughput), sorted by power."""
    front: list[tuple[float, float]] = []
    for power, tokens in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or tokens > front[-1][1]:
            front.append((power, tokens))
    return front


def _label(row: object, knobs: list[str]) -> str:
    return ", ".join(f"{k}={getattr(row, k):g}" for k in knobs if getattr(row, k) is not None)


def sweep_section(report: SweepReport, varied: list[str]) -> Section:
    """Return the sweep section for the knobs the sweep varied."""
    rows = [r for r in report.points if r.mean_power_w is not None]
    figures = []
    if len(varied) >= 2:
        x_knob, y_knob = varied[0], varied[1]
        xs = sorted({getattr(r, x_knob) for r in rows})
        ys = sorted({getattr(r, y_knob) for r in rows})
        z = [
            [
                next(
                    (
                        r.mean_power_w
                        for r in rows
                        if getattr(r, x_knob) == x and getattr(r, y_knob) == y
                    ),
                    None,
                )
                for x in xs
            ]
            for y in ys
        ]
        heat = go.Figure(
            go.Heatmap(x=[str(x) for x in xs], y=[str(y) for y in ys], z=z, colorbar={"title": "W"})
        )
        heat.update_layout(
            height=380,
            xaxis_title=x_knob,
            yaxis_title=y_knob,
            margin=MARGIN,
        )
        figures.append(
            Figure(
                heat,
                f"Mean power per GPU over the {x_knob} × {y_knob} grid (other knobs as swept).",
            )
        )
    with_tokens = [r for r in rows if r.tokens_per_s]
    if with_tokens:
        scatter = go.Figure(
            go.Scatter(
                x=[r.mean_power_w for r in with_tokens],
                y=[r.tokens_per_s for r in with_tokens],
                mode="markers",
                text=[_label(r, varied) for r in with_tokens],
                name="settings",
                error_x={"array": [r.mean_power_w_std or 0 for r in with_tokens]},
            )
        )
        front = pareto_front([(r.mean_power_w, r.tokens_per_s) for r in with_tokens])  # type: ignore[misc]
        scatter.add_trace(
            go.Scatter(
                x=[p for p, _ in front], y=[t for _, t in front], mode="lines", name="Pareto front"
            )
        )
        scatter.update_layout(
            height=380,
            xaxis_title="mean power per GPU (W)",
            yaxis_title="tokens/s",
            margin=MARGIN,
        )
        figures.append(
            Figure(
                scatter,
                "Power against throughput per setting; the line joins "
                "the settings no other beats on both.",
            )
        )
    measured = [(a, a.swing) for a in report.authority if a.swing is not None]
    if measured:
        upper = [100 * (a.swing_ci[1] - swing) if a.swing_ci else 0 for a, swing in measured]
        lower = [100 * (swing - a.swing_ci[0]) if a.swing_ci else 0 for a, swing in measured]
        bars = go.Figure(
            go.Bar(
                x=[a.knob for a, _ in measured],
                y=[100 * swing for _, swing in measured],
                error_y={"type": "data", "symmetric": False, "array": upper, "arrayminus": lower},
                text=[a.verdict for a, _ in measured],
            )
        )
        bars.update_layout(
            height=340,
            yaxis_title="swing of mean power (%)",
            margin=MARGIN,
        )
        figures.append(
            Figure(
                bars,
                "Authority of each knob over mean power, with its 95 % "
                "interval from the repeats; the label is the verdict.",
            )
        )
    header = ["knob", "swing", "95% interval", "of nameplate", "throughput ratio", "verdict"]
    table = [
        [
            a.knob,
            _pct(a.swing),
            "-" if not a.swing_ci else f"{_pct(a.swing_ci[0])}-{_pct(a.swing_ci[1])}",
            _pct(a.swing_nameplate),
            "-" if a.throughput_ratio is None else f"{a.throughput_ratio:.2f}",
            a.verdict,
        ]
        for a in report.authority
    ]
    tables = [(header, table)]
    if report.optimal:  # (sweep show --optimal)
        tables.append((headers(OPTIMAL_COLUMNS), cells(OPTIMAL_COLUMNS, report.optimal)))
    return Section(
        title=f"Sweep: {report.backend}" + (f" ({report.preset})" if report.preset else ""),
        intro=f"{len(report.points)} settings over {', '.join(varied)}; "
        f"{len(report.failures)} failed run(s).",
        tables=tables,
        figures=figures,
    )


def _pct(value: float | None) -> str:
    return format_value(value, ".1%")
