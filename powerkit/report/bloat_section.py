"""The report's energy-bloat section, from a ``bloat plan --out`` (or ``--json``) document: the
iteration time-energy frontier, energy per stage, and the pipeline timeline of the plan."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from powerkit.bloat.plan_file import BloatPlan, Computation, PlanPoint, StragglerBloat
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import format_value
from powerkit.report.page import MARGIN, Figure, Section

__all__ = ["bloat_section"]

_ROW_PX = 28  # per stage in a timeline panel


def bloat_section(plan: BloatPlan, source: str = "") -> Section:
    """Return the section for one plan document."""
    base, frontier = plan.all_max, plan.frontier
    first = frontier[0]
    timelines = []
    for label, p in (("all max clocks", base), ("plan", first)):
        if p.start_s is None or p.duration_s is None or p.stage_energy_j is None:
            raise BadInputError(
                f"{source or 'input'}: not a `bloat plan {option('out')}` document from this "
                "powerkit "
                "(no timeline of its all-max point and first frontier point: plan it again)"
            )
        timelines.append((label, p.start_s, p.duration_s, p.frequencies))
    stage_j = [np.asarray(p.stage_energy_j, dtype=float) for p in (base, first)]
    kj = [
        ("same time as all max (intrinsic)", plan.intrinsic),
        *((f"straggler x{b.straggler:g} (extrinsic)", b) for b in plan.extrinsic),
    ]
    rows = [
        [
            label,
            format_value(b.time_s, ".4f"),
            format_value(b.baseline_j / 1e3, ".3f"),
            format_value(b.planned_j / 1e3, ".3f"),
            format_value(b.saved_j / 1e3, ".3f"),
            format_value(b.saved_pct, ".1f") + "%",
        ]
        for label, b in kj
    ]
    stages, microbatches = plan.stages, plan.microbatches
    header = ["iteration lasts", "time s", "all max kJ", "plan kJ", "saved kJ", "saved"]
    figures = [
        Figure(
            _frontier(base, frontier, plan.extrinsic),
            "The iteration time-energy frontier (each point the cheapest plan for that "
            "iteration time); the cross is every computation at its highest clock, the "
            "dotted lines the straggler deadlines.",
        ),
        Figure(
            _per_stage(stage_j, stages),
            "Energy per stage per iteration, waiting included (idle power while the stage "
            "waits for its neighbours): all max clocks against the plan at the same time.",
        ),
        Figure(
            _timeline(timelines, plan.computations, stages),
            "One iteration, computations as bars (F forward, B backward; colour: SM clock): "
            "the plan slows the computations off the critical path into the waiting time.",
        ),
    ]
    return Section(
        title=f"Energy bloat: {stages} stages x {microbatches} microbatches, {plan.schedule}",
        intro=(
            f"From {source or 'a plan'} (profile {plan.profile or '?'}, idle power "
            f"{format_value(plan.idle_power_w, 'g')} W, method {plan.method}). "
            f"Intrinsic bloat: {format_value(plan.intrinsic.saved_pct, '.1f')}% of an "
            "iteration's energy at the same iteration time."
        ),
        tables=[(header, rows)],
        figures=figures,
    )


def _frontier(
    base: PlanPoint, frontier: list[PlanPoint], extrinsic: list[StragglerBloat]
) -> go.Figure:
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[p.time_s for p in frontier],
            y=[p.energy_j / 1e3 for p in frontier],
            mode="lines+markers",
            name="frontier",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[base.time_s],
            y=[base.energy_j / 1e3],
            mode="markers",
            marker={"symbol": "x", "size": 12, "color": "#d62728"},
            name="all max clocks",
        )
    )
    for b in extrinsic:
        fig.add_vline(
            x=b.time_s,
            line_dash="dot",
            line_color="#888",
            annotation_text=f"x{b.straggler:g}",
            annotation_position="top",
        )
    fig.update_layout(
        height=360,
        margin=MARGIN,
        xaxis_title="iteration time (s)",
        yaxis_title="energy per iteration (kJ)",
    )
    return fig


def _per_stage(stage_j: list[np.ndarray], stages: int) -> go.Figure:
    names = [f"stage {s}" for s in range(stages)]
    fig = go.Figure(
        [
            go.Bar(x=names, y=(j / 1e3).tolist(), name=label)
            for label, j in zip(("all max clocks", "plan"), stage_j, strict=True)
        ]
    )
    fig.update_layout(
        height=320,
        margin=MARGIN,
        barmode="group",
        xaxis_title="pipeline stage",
        yaxis_title="energy per iteration (kJ)",
    )
    return fig


def _timeline(
    timelines: list[tuple[str, list[float], list[float], list[float]]],
    computations: list[Computation],
    stages: int,
) -> go.Figure:
    fig = make_subplots(
        rows=len(timelines),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=[label for label, *_ in timelines],
    )
    freqs = np.concatenate([np.asarray(f, dtype=float) for *_, f in timelines])
    lo, hi = float(freqs.min()), float(freqs.max())
    labels = [f"{c.instruction[0].upper()}{c.microbatch}" for c in computations]
    for row, (label, start, duration, f) in enumerate(timelines, start=1):
        fig.add_trace(
            go.Bar(
                base=start,
                x=duration,
                y=[f"stage {c.stage}" for c in computations],
                orientation="h",
                name=label,
                showlegend=False,
                marker={
                    "color": f,
                    "colorscale": "Viridis",
                    "cmin": lo,
                    "cmax": max(hi, lo + 1),
                    "showscale": row == 1,
                    "colorbar": {"title": "MHz"},
                    "line": {"width": 0.5, "color": "white"},
                },
                customdata=np.stack([labels, f], axis=1),
                hovertemplate="%{y} %{customdata[0]}: from %{base:.3f} s for %{x:.3f} s at "
                "%{customdata[1]} MHz<extra></extra>",
            ),
            row=row,
            col=1,
        )
        fig.update_yaxes(title_text="stage", autorange="reversed", row=row, col=1)
    fig.update_xaxes(title_text="time in the iteration (s)", row=len(timelines), col=1)
    fig.update_layout(
        height=120 + len(timelines) * stages * _ROW_PX + 60, margin=MARGIN, barmode="overlay"
    )
    return fig
