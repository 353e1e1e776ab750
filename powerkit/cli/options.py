"""The options commands share, declared once (``opt.Json``, ``opt.Fill``, ``opt.Html`` ...),
the reader options (gathered by :func:`powerkit.cli.reading.reader_options`), and the
parsers whose errors name their option."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from powerkit.cells.fill import FillPolicy, parse_fill
from powerkit.core.choices import Compose
from powerkit.core.errors import BadInputError
from powerkit.core.units import parse_duration, parse_durations

R = TypeVar("R")

Json = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]
Force = Annotated[
    bool, typer.Option("--force", help="Overwrite existing output files (never an input).")
]
Tz = Annotated[
    str | None,
    typer.Option("--tz", help="Zone of timestamps that carry none (default UTC, with a warning)."),
]
Host = Annotated[
    str | None, typer.Option("--host", help="Host name for logs that do not name one.")
]
GpusPerFrame = Annotated[
    int | None,
    typer.Option("--gpus-per-frame", help="GPUs interleaved per sampling frame (no index column)."),
]
SkipBadRows = Annotated[
    bool,
    typer.Option("--skip-bad-rows", help="Skip (and count) malformed rows instead of failing."),
]
GpuName = Annotated[str | None, typer.Option("--gpu-name", help="GPU model, if the log lacks it.")]
Nameplate = Annotated[
    str | None, typer.Option("--nameplate", help="Per-GPU nameplate (TDP), e.g. 700W.")
]
PowerField = Annotated[
    str | None,
    typer.Option(
        "--power-field",
        help="Which logged power is power_w: draw, instant or average (power.draw[.instant|"
        ".average]).",
    ),
]
PowerSemantics = Annotated[
    str | None,
    typer.Option(
        "--power-semantics",
        help="What power_w means, over what the GPU model implies: instant, average_1s, ...",
    ),
]
Map = Annotated[
    str | None,
    typer.Option(
        "--map",
        help="Any CSV: canonical=file column pairs, e.g. ts=t_s,gpu=gpu_index,power_w=power_w.",
    ),
]
Where = Annotated[
    list[str] | None,
    typer.Option(
        "--where", help="CSV: keep only rows whose column holds the value, COL=VALUE (repeatable)."
    ),
]
TimeUnit = Annotated[
    str | None, typer.Option("--time-unit", help="Unit of numeric times: s, ms, us or ns.")
]
Start = Annotated[
    str | None,
    typer.Option(
        "--start", help="Start (ISO or epoch s) that numeric times count from (relative times)."
    ),
]
PowerUnit = Annotated[
    str, typer.Option("--power-unit", help="Unit of power cells that carry none: W or mW.")
]
MaxPower = Annotated[
    str | None,
    typer.Option(
        "--max-power",
        help="Largest plausible sample per GPU (default 3x nameplate, else 5kW); above: bad row.",
    ),
]
From = Annotated[
    str | None,
    typer.Option("--from", help="Keep samples from this time: ISO, epoch s, +10m after start."),
]
To = Annotated[
    str | None,
    typer.Option("--to", help="Keep samples before this time: ISO, epoch s, -5m before end."),
]
Engine = Annotated[
    str,
    typer.Option(
        "--engine", help="local, or ray (tasks per host or file of a dataset on a Ray cluster)."
    ),
]
Address = Annotated[
    str | None,
    typer.Option("--address", help="ray: the cluster (auto, HOST:PORT, ray://HOST:10001)."),
]
Hosts = Annotated[
    str | None,
    typer.Option("--hosts", help="Keep only these hosts (comma-separated); prunes datasets."),
]
PlotlyJs = Annotated[
    str,
    typer.Option(
        "--plotly-js",
        help="Plotly in HTML pages: inline (offline), cdn, or a FILE path that pages share.",
    ),
]
Resume = Annotated[
    bool,
    typer.Option(
        "--resume", help="Continue the interrupted sweep in --out (same options as it started)."
    ),
]
Grid = Annotated[
    str | None,
    typer.Option(
        "--grid", help="Cell length of the time grid (default: the trace's interval, rounded up)."
    ),
]
Fill = Annotated[
    str,
    typer.Option(
        "--fill", help="Gap fill on the grid: none, hold:DUR or linear:DUR (e.g. hold:10s)."
    ),
]


def number_range(
    low: float | None = None, high: float | None = None, *, low_open: bool = False
) -> Callable[[float | None], float | None]:
    """Return an option callback refusing a value that is not finite or lies outside
    [low, high] (``low_open``: above low). Typer's own bounds let NaN through."""

    def check(value: float | None) -> float | None:
        if value is None:
            return None
        below = low is not None and (value <= low if low_open else value < low)
        above = high is not None and value > high
        if not math.isfinite(value) or below or above:
            lo = "" if low is None else f"{'more than' if low_open else 'at least'} {low:g}"
            hi = "" if high is None else f"at most {high:g}"
            raise typer.BadParameter(
                f"{value!r} is not {' and '.join(x for x in (lo, hi) if x) or 'finite'}"
            )
        return value

    return check


Stat = Annotated[
    str,
    typer.Option(
        "--stat", help="Steady-state power of a sweep point: topN (mean of top N %), mean, median."
    ),
]
MinSlowdown = Annotated[
    str,
    typer.Option(
        "--min-slowdown", help="A cap counts only if it changed throughput by more than this."
    ),
]
Html = Annotated[Path | None, typer.Option("--html", help="Write a Plotly page here.")]
Explain = Annotated[
    bool, typer.Option("--explain", help="Say how the file was read: each column, and why.")
]
Gpus = Annotated[
    str | None, typer.Option("--gpus", help="Real GPUs: indices, e.g. 0,2 (default all).")
]
TokensFrom = Annotated[
    Path | None,
    typer.Option("--tokens-from", help="Real GPUs, cmd: JSON-lines file of cumulative tokens."),
]
Actuator = Annotated[
    str | None, typer.Option("--actuator", help="live: the job's knob channel, file:PATH.")
]
Composition = Annotated[
    Compose, typer.Option("--compose", help="Members' starts: aligned, random or staggered.")
]
Windows = Annotated[
    str | None,
    typer.Option(
        "--windows", help="Window lengths, e.g. 0.5s,30s,5m (default: those on the grid)."
    ),
]


def option_value(option: str, parse: Callable[[str], R], text: str) -> R:
    """``parse(text)`` for the value of ``option``; a value that does not parse is one line
    that names the option (``--grid '0s': a duration must be positive``)."""
    try:
        return parse(text)
    except BadInputError as exc:
        message = str(exc)
        if message.startswith(option):
            raise
        raise type(exc)(f"{option} {message}") from None


def fill_option(text: str) -> FillPolicy:
    """``--fill``, parsed (its errors name the option)."""
    return option_value("--fill", parse_fill, text)


def grid_option(text: str | None) -> float | None:
    """``--grid``, the cell length in seconds (None: not given)."""
    return None if text is None else option_value("--grid", parse_duration, text)


def windows_option(text: str | None) -> list[float] | None:
    """``--windows``, the window lengths in seconds (None: not given)."""
    return None if text is None else option_value("--windows", parse_durations, text)
