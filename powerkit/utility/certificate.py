"""The certificate of a curtailment event (``utility event --json``): the figures a
program's reviewer checks, and the inputs' fingerprints (name, size, SHA-256, samples and
their coverage of the event) so that the figures can be traced to the very files."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from powerkit.core.documents import Document
from powerkit.core.tables import Column
from powerkit.core.units import format_power
from powerkit.trace.model import Trace

__all__ = [
    "Criterion",
    "EventInterval",
    "EventReport",
    "Fingerprint",
    "event_columns",
    "fingerprint",
    "power_3g",
]


@dataclass(frozen=True)
class EventInterval:
    """One metering interval: its start, the fleet's mean power, the baseline, the reduction
    (W and share of the baseline) and whether it met the commitment (None: not covered)."""

    start: str
    mean_w: float | None
    baseline_w: float
    committed_w: float
    reduction_w: float | None
    reduction_share: float | None
    met: bool | None
    coverage: float


@dataclass(frozen=True)
class Fingerprint:
    """An input as it was read: its name, size, SHA-256, samples, and coverage of the event."""

    path: str
    bytes: int | None
    sha256: str | None
    samples: int
    coverage: float


@dataclass(frozen=True)
class Criterion:
    """One test the event is judged by: its name, whether it passed, and why."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class EventReport(Document):
    """The certificate of one curtailment event (``utility event --json``)."""

    COMMAND: ClassVar[str] = "utility event"

    start: str
    duration_s: float
    commit: str
    respond_within_s: float
    interval_s: float
    grid_s: float
    baseline_method: str
    baseline_w: float  # the baseline's mean over the event
    committed_w: float  # the commitment's mean over the event
    intervals: list[EventInterval]
    response_s: float | None  # None: the commitment was never reached and held
    met_share: float | None
    shortfall_j: float
    performance_factor: float | None
    rebound_w: float | None
    coverage: float  # present cells over the event's cells
    passed: bool
    criteria: list[Criterion]
    inputs: list[Fingerprint]
    replicas: int = 1
    #: the plot's series (decimated): offsets from the start, s; W; the baseline per point
    plot_t_s: list[float] = field(default_factory=list)
    plot_power_w: list[float | None] = field(default_factory=list)
    plot_baseline_w: list[float | None] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def fingerprint(
    path: str, trace: Trace, start_s: float, duration_s: float, grid_s: float
) -> Fingerprint:
    """Name, size, SHA-256 (read a block at a time) and the samples of ``trace``, with their
    share of what its GPUs would hold over the event at its nominal interval."""
    p = Path(path)
    size = digest = None
    if p.is_file():
        h = hashlib.sha256()
        with p.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        size, digest = p.stat().st_size, h.hexdigest()
    samples = trace.extent()[2]
    runs = trace.series_runs()
    gpus = len(runs) if runs else max(1, len(trace.meta.gpus))
    interval = trace.meta.interval_s or grid_s
    expected = gpus * duration_s / interval
    from powerkit.core import db

    con = db.connect()
    try:
        trace.register(con)
        a, b = int(start_s * 1e6), int((start_s + duration_s) * 1e6)
        (inside,) = con.execute(
            f"SELECT count(*) FROM trace WHERE epoch_us(ts) >= {a} AND epoch_us(ts) < {b}"
        ).fetchone() or (0,)
    finally:
        con.close()
    return Fingerprint(
        path, size, digest, samples, min(1.0, inside / expected) if expected else 0.0
    )


def event_columns(doc: EventReport) -> tuple[Column, ...]:
    """The terminal's table of metering intervals, in W, kW or MW by the baseline's size."""
    unit, scale = next(
        (u, k)
        for u, k, top in (("W", 1.0, 1e4), ("kW", 1e-3, 1e7), ("MW", 1e-6, math.inf))
        if doc.baseline_w < top
    )
    return (
        Column("interval", "start", key=True),
        Column(f"mean {unit}", "mean_w", ",.1f", scale=scale),
        Column(f"baseline {unit}", "baseline_w", ",.1f", scale=scale),
        Column(f"reduction {unit}", "reduction_w", ",.1f", scale=scale),
        Column("share", "reduction_share", ".1%"),
        Column(f"committed {unit}", "committed_w", ",.1f", scale=scale),
        Column("met", lambda r: "-" if r.met is None else ("yes" if r.met else "NO"), text=True),
    )


def power_3g(watts: float) -> str:
    """A power to three significant digits, in W, kW or MW (``249W``, ``1.2MW``)."""
    return format_power(float(f"{watts:.3g}"))
