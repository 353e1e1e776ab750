"""The report's trace overview: power over time per GPU and the per-GPU summary table."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.colors import qualitative

from powerkit.analysis.info import TraceInfo, trace_info
from powerkit.cells.sql import connect
from powerkit.report.page import Figure, Section
from powerkit.trace.model import Trace

__all__ = ["power_over_time", "trace_section"]

_MAX_POINTS = 2000  # per GPU: enough to see the phases, small enough to keep the page light

# Bucket means and maxima per GPU, so a long trace draws as a readable envelope.
_BUCKETS_SQL = """
SELECT host, gpu,
       to_timestamp(floor(epoch_us(ts) / 1e6 / $bucket) * $bucket) AS t,
       avg(power_w) AS mean_w, max(power_w) AS max_w
FROM trace
GROUP BY host, gpu, t
ORDER BY host, gpu, t
"""


def power_over_time(trace: Trace, info: TraceInfo) -> go.Figure:
    """Return a figure of per-GPU power (bucket mean, and max as a dotted line)."""
    interval = info.interval_median_s or 1.0
    bucket = max(interval, info.span_s / _MAX_POINTS)
    con = connect()
    trace.register(con)
    rows = con.sql(_BUCKETS_SQL, params={"bucket": bucket}).pl()
    con.close()
    # Times are drawn as wall-clock times in the log's own zone, and the axis says which.
    rows = rows.with_columns(
        pl.col("t").dt.convert_time_zone(trace.meta.tz).dt.replace_time_zone(None)
    )
    fig = go.Figure()
    palette = qualitative.Plotly
    for k, ((host, gpu), part) in enumerate(rows.group_by(["host", "gpu"], maintain_order=True)):
        label, color = f"{host}:{gpu}", palette[k % len(palette)]
        # one legend entry per GPU: its mean (solid) and its max (dotted) toggle together
        fig.add_trace(
            go.Scattergl(
                x=part["t"].to_list(),
                y=part["mean_w"].to_list(),
                mode="lines",
                name=label,
                legendgroup=label,
                line={"width": 1, "color": color},
            )
        )
        fig.add_trace(
            go.Scattergl(
                x=part["t"].to_list(),
                y=part["max_w"].to_list(),
                mode="lines",
                name=f"{label} max",
                legendgroup=label,
                showlegend=False,
                line={"width": 1, "dash": "dot", "color": color},
            )
        )
    nameplate = trace.meta.nameplate_w()
    if nameplate:
        fig.add_hline(
            y=nameplate,
            line_dash="dash",
            line_color="gray",
            annotation_text=f"nameplate {nameplate:.0f} W",
        )
    fig.update_layout(
        height=420,
        margin={"l": 60, "r": 20, "t": 60, "b": 40},
        yaxis_title="power (W)",
        xaxis_title=f"time ({trace.meta.zone_label()})",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    return fig


def trace_section(trace: Trace) -> Section:
    """Return the overview section for one trace."""
    info = trace_info(trace)
    interval = f"{info.interval_median_s:.3g} s" if info.interval_median_s else "unknown"
    intro = (
        f"{info.gpus} GPU(s), {info.samples:,} samples over {info.span_s / 3600:.2f} h "
        f"(source {info.source}, median interval {interval}, {info.gaps} gap(s)); "
        f"energy {info.energy_j / 3.6e6:.3f} kWh."
    )
    header = ["GPU", "name", "samples", "mean W", "max W", "TDP W", "energy kWh", "max gap s"]
    rows = [
        [
            f"{s.host}:{s.gpu}",
            s.name or "-",
            f"{s.samples:,}",
            f"{s.mean_power_w:.1f}",
            f"{s.max_power_w:.1f}",
            "-" if s.nameplate_w is None else f"{s.nameplate_w:.0f}",
            f"{s.energy_j / 3.6e6:.4f}",
            f"{s.max_gap_s:.2f}",
        ]
        for s in info.series
    ]
    bucket = max(info.interval_median_s or 1.0, info.span_s / _MAX_POINTS)
    caption = (
        f"Power of each GPU over time: {bucket:.3g} s bucket means (solid) and bucket maxima "
        "(dotted, in the GPU's colour), so that short peaks stay visible"
        + ("; the dashed line is the nameplate." if trace.meta.nameplate_w() else ".")
    )
    return Section(
        title=f"Trace: {info.path}",
        intro=intro,
        figures=[Figure(power_over_time(trace, info), caption)],
        tables=[(header, rows)],
    )
