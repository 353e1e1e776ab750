"""The report's trace overview: power over time (per GPU, or the fleet's range) and the per-GPU
summary table."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import plotly.graph_objects as go
import polars as pl
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from powerkit.analysis.info import TraceInfo, trace_info
from powerkit.analysis.windows import WindowsReport
from powerkit.cells.grid import SeriesCells, reduce_series
from powerkit.cells.rolling import PrefixSums, WindowStats, rolling
from powerkit.cells.sql import connect
from powerkit.core.units import format_duration, format_energy, format_span
from powerkit.report.page import Figure, Section
from powerkit.trace.model import Trace

__all__ = ["power_over_time", "trace_section"]

_MAX_POINTS = 1500  # buckets over the whole trace: its shape, at any length, in a light page
#: GPUs drawn one panel each; more are drawn as one panel of the fleet's range
MAX_PANELS = 8

# Each bucket's mean, least and greatest sample per GPU: decimated over the whole trace, so
# that a long trace draws as its shape (a mean line in an envelope), not a block of colour.
_BUCKETS_SQL = """
SELECT host, gpu,
       to_timestamp(floor(epoch_us(ts) / 1e6 / $bucket) * $bucket) AS t,
       avg(power_w) AS mean_w, min(power_w) AS min_w, max(power_w) AS max_w
FROM trace
GROUP BY host, gpu, t
ORDER BY host, gpu, t
"""


_NICE_S = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800)


def _bucket_s(info: TraceInfo) -> float:
    """The bucket: the whole trace in at most :data:`_MAX_POINTS` of them, a round length
    (2 s, 5 s, 1 min, ...), never below the sampling interval."""
    least = max(info.interval_median_s or 1.0, info.span_s / _MAX_POINTS)
    return next((n for n in _NICE_S if n >= least), 3600 * max(1, round(least / 3600 + 0.5)))


def _envelope(
    fig: go.Figure, t: list, low: list, high: list, mean: list, color: str, name: str, row: int
) -> None:
    """A filled band from ``low`` to ``high`` and the ``mean`` line over it, in one panel."""
    band = {"mode": "lines", "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip"}
    traces = [
        go.Scatter(x=t, y=high, legendgroup=name, **band),
        go.Scatter(
            x=t,
            y=low,
            fill="tonexty",
            fillcolor=_translucent(color),
            name=f"{name} min-max",
            legendgroup=name,
            **band,
        ),
        go.Scatter(
            x=t,
            y=mean,
            mode="lines",
            line={"width": 1.2, "color": color},
            name=name,
            legendgroup=name,
        ),
    ]  # (the band's two edges first: the fill goes to the trace before it)
    fig.add_traces(traces, rows=[row] * 3, cols=[1] * 3)


def _translucent(color: str) -> str:
    """A Plotly palette colour (``#rrggbb``) at 25 % opacity."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},0.25)"


def power_over_time(
    trace: Trace,
    info: TraceInfo,
    budget_w: float | None = None,
    marked: list[datetime] | None = None,
) -> go.Figure:
    """Power over time: a panel per GPU (up to :data:`MAX_PANELS`), each its bucket means in
    the band of the bucket's least and greatest sample; beyond that, one panel of the mean
    GPU in the band of the least and greatest GPU. ``budget_w`` (per GPU), when known, is drawn
    in every panel, and the buckets starting at ``marked`` (wall-clock times in the trace's
    zone; None: those whose mean is over the budget) are shaded."""
    con = connect()
    trace.register(con)
    rows = con.sql(_BUCKETS_SQL, params={"bucket": _bucket_s(info)}).pl()
    con.close()
    # Times are drawn as wall-clock times in the log's own zone, and the axis says which.
    rows = rows.with_columns(
        pl.col("t").dt.convert_time_zone(trace.meta.tz).dt.replace_time_zone(None)
    )
    series = list(rows.group_by(["host", "gpu"], maintain_order=True))
    panels = len(series) if len(series) <= MAX_PANELS else 1
    fig = make_subplots(rows=panels, cols=1, shared_xaxes=True, vertical_spacing=0.02)
    palette = qualitative.Plotly
    if panels == len(series):
        for k, ((host, gpu), part) in enumerate(series):
            t = part["t"].to_list()
            color = palette[k % len(palette)]
            _envelope(
                fig,
                t,
                part["min_w"].to_list(),
                part["max_w"].to_list(),
                part["mean_w"].to_list(),
                color,
                f"{host}:{gpu}",
                k + 1,
            )
            fig.update_yaxes(title_text=f"{host}:{gpu} (W)", row=k + 1, col=1)
    else:
        fleet = rows.group_by("t", maintain_order=True).agg(
            pl.col("mean_w").mean(), pl.col("min_w").min(), pl.col("max_w").max()
        )
        _envelope(
            fig,
            fleet["t"].to_list(),
            fleet["min_w"].to_list(),
            fleet["max_w"].to_list(),
            fleet["mean_w"].to_list(),
            palette[0],
            f"mean of {len(series)} GPUs",
            1,
        )
        fig.update_yaxes(title_text="per GPU (W)", row=1, col=1)
    # (shapes given at once: Plotly's add_hline/add_vrect copy the layout at every call)
    plate = trace.meta.nameplate_w()
    shapes = []
    for row in range(1, panels + 1):
        axis = "" if row == 1 else str(row)
        for value, style in (
            (plate, {"dash": "dash", "color": "gray"}),
            (budget_w, {"color": "firebrick", "width": 1}),
        ):
            if value:
                shapes.append(
                    {
                        "type": "line",
                        "xref": f"x{axis} domain",
                        "x0": 0,
                        "x1": 1,
                        "yref": f"y{axis}",
                        "y0": value,
                        "y1": value,
                        "line": style,
                    }
                )
    if budget_w is not None:
        if marked is None:
            marked = rows.filter(pl.col("mean_w") > budget_w)["t"].unique().sort().to_list()
        shapes += _shaded(marked, _bucket_s(info))
    fig.update_layout(shapes=shapes)
    fig.update_xaxes(title_text=f"time ({trace.meta.zone_label()})", row=panels, col=1)
    fig.update_layout(
        height=max(320, min(180 * panels, 1200)),
        margin={"l": 70, "r": 20, "t": 30, "b": 40},
        showlegend=False,
    )
    return fig


def _shaded(starts: list[datetime], bucket_s: float) -> list[dict[str, Any]]:
    """Shapes shading, across every panel, the runs of buckets that start at ``starts``
    (sorted; one shape a run, the first 300 runs: the page stays light)."""
    width = timedelta(seconds=bucket_s)
    runs: list[list[datetime]] = []
    for t in starts:
        if runs and t - runs[-1][1] <= 1.5 * width:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": start,
            "x1": end + width,
            "y0": 0,
            "y1": 1,
            "fillcolor": "firebrick",
            "opacity": 0.12,
            "line": {"width": 0},
            "layer": "below",
        }
        for start, end in runs[:300]
    ]


def violation_buckets(
    trace: Trace, judged: WindowsReport, bucket_s: float
) -> tuple[str, list[datetime]] | None:
    """(the window, the starts of the buckets holding the end of one of its positions over the
    budget) for the shortest window of a windows report of ``trace`` judged rolling, per GPU,
    without fill: the positions the report counted, by the same arithmetic (cells on its
    grid, trailing means, ``WindowStats``). None for a report judged otherwise."""
    if judged.mode != "rolling" or judged.scope != "gpu" or judged.fill != "none":
        return None
    if not judged.windows:
        return None
    window = min(judged.windows, key=lambda w: w.window_s)
    grid_s, n = judged.grid_s, window.cells
    ends: list[np.ndarray] = []

    def add(acc: None, cells: SeriesCells) -> None:
        pos = rolling(PrefixSums(cells.values, cells.present), n, grid_s)
        at = WindowStats().add(pos, judged.budget_w)  # (the report's own count of them)
        # each position by its last cell's start (its end lies in that cell's bucket), epoch s
        ends.append((cells.first_cell + n - 1 + at) * grid_s)

    reduce_series(trace, grid_s, lambda: None, add)
    found = np.concatenate(ends) if ends else np.empty(0)
    starts = np.unique(np.floor(found / bucket_s) * bucket_s)
    zone = ZoneInfo(trace.meta.tz)
    return window.window, [
        datetime.fromtimestamp(float(t), zone).replace(tzinfo=None) for t in starts
    ]


def _marked(marks: tuple[str, list[datetime]] | None) -> str:
    """The caption's words for what is shaded."""
    if marks is None:
        return "the buckets whose mean is over it shaded"
    return f"the buckets holding a {marks[0]} window over it (the windows report's shortest) shaded"


def trace_section(trace: Trace, judged: WindowsReport | None = None) -> Section:
    """Return the overview section for one trace; ``judged``, a windows report of it per GPU,
    draws its budget and marks in time where its shortest window was over it."""
    info = trace_info(trace)
    budget_w = None if judged is None else judged.budget_w
    marks = None if judged is None else violation_buckets(trace, judged, _bucket_s(info))
    interval = f"{info.interval_median_s:.3g} s" if info.interval_median_s else "unknown"
    intro = (
        f"{info.gpus} GPU(s), {info.samples:,} samples over {format_span(info.span_s)} "
        f"(source {info.source}, median interval {interval}, {info.gaps} gap(s)); "
        f"energy {format_energy(info.energy_j)}."
    )
    header = ["GPU", "name", "samples", "mean W", "max W", "TDP W", "energy", "max gap s"]
    rows = [
        [
            f"{s.host}:{s.gpu}",
            s.name or "-",
            f"{s.samples:,}",
            f"{s.mean_power_w:.1f}",
            f"{s.max_power_w:.1f}",
            "-" if s.nameplate_w is None else f"{s.nameplate_w:.0f}",
            format_energy(s.energy_j),
            f"{s.max_gap_s:.2f}",
        ]
        for s in info.series
    ]
    per = "each GPU" if info.gpus <= MAX_PANELS else f"the mean of the {info.gpus} GPUs"
    band = (
        "the band from its least to its greatest sample in the bucket"
        if info.gpus <= MAX_PANELS
        else "the band from the least to the greatest GPU in the bucket"
    )
    caption = (
        f"Power of {per} over time, in {format_duration(_bucket_s(info))} buckets over the "
        f"whole trace: the bucket's mean (line) and {band}, so that short peaks stay visible"
        + ("; dashed, the nameplate" if trace.meta.nameplate_w() else "")
        + ("" if budget_w is None else f"; red, the budget of {budget_w:g} W, {_marked(marks)}")
        + "."
    )
    return Section(
        title=f"Trace: {info.path}",
        intro=intro,
        figures=[Figure(power_over_time(trace, info, budget_w, marks and marks[1]), caption)],
        tables=[(header, rows)],
    )
