"""A utility's curtailment event: from a time, for a while, the fleet must draw a share less
than it would have (``--event start=+2h,cut=25%,for=3h[,within=30s][,notice=10m]``).

``notice``: how long before its start the fleet is told (default 0: at the start). A decision
aims at the limit in force when it takes effect (``--latency`` later), so with notice of at
least the latency the caps act at the start; with less, the decisions made before the fleet
knew act late.

The **baseline** is the fleet's mean uncapped power over the event's window (what it would
have drawn: the counterfactual a replay knows exactly); the **target** is (1 - cut) x the
baseline, the limit through the window (or the feed's, where that is lower). The fleet is
judged as a meter would, on its mean power over each decision period of the window: it
**reaches** the target at the start of the first period from which every period's mean is at
or under it to the window's end; the event is **met** when it reaches it within ``within`` of
the start (default 0: at once) and the energy shed covers the cut (shed ÷ the baseline's
energy at least the cut).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerkit.core.errors import BadInputError, option
from powerkit.core.tables import Column
from powerkit.core.units import format_duration, parse_duration, parse_percent

__all__ = [
    "EVENT_COLUMNS",
    "Event",
    "EventResult",
    "Window",
    "event_limits",
    "event_result",
    "parse_event",
]


@dataclass(frozen=True)
class Event:
    """One curtailment: seconds after the fleet's start, the share to shed, for how long,
    and how long the fleet may take to get there."""

    start_s: float
    cut: float
    for_s: float
    within_s: float = 0.0
    notice_s: float = 0.0  # how long before its start the fleet is told

    @property
    def label(self) -> str:
        notice = f", {format_duration(self.notice_s)} notice" if self.notice_s else ""
        return (
            f"{100 * self.cut:g}% for {format_duration(self.for_s)} at "
            f"+{format_duration(self.start_s)}{notice}"
        )


@dataclass(frozen=True)
class EventResult:
    """How the fleet answered one event under one policy."""

    event: str
    baseline_w: float
    target_w: float
    reached_s: float | None  # after the start (None: never, to the window's end)
    met: bool
    shed_energy_j: float
    shed_share: float  # shed energy ÷ the baseline's energy over the window
    lost_gpu_hours_by_class: dict[str, float]  # class -> GPU-hours lost in the window


def _classes(e: EventResult) -> str:
    return ", ".join(f"{c}: {h:,.2f}" for c, h in e.lost_gpu_hours_by_class.items())


#: the events table of ``powerkit cap``: rows of (run, event result)
EVENT_COLUMNS = (
    Column("policy", lambda r: r[0].policy, key=True),
    Column("event", lambda r: r[1].event, text=True),
    Column("baseline kW", lambda r: r[1].baseline_w, ",.1f", scale=1e-3),
    Column("target kW", lambda r: r[1].target_w, ",.1f", scale=1e-3),
    Column(
        "reached", lambda r: None if r[1].reached_s is None else format_duration(r[1].reached_s)
    ),
    Column("met", lambda r: "yes" if r[1].met else "no", text=True),
    Column("shed", lambda r: r[1].shed_share, ".1%"),
    Column("lost GPU-h by class", lambda r: _classes(r[1]), text=True),
)


def parse_event(text: str) -> Event:
    """``start=+2h,cut=25%,for=3h[,within=30s]``; one line naming what is wrong."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("start", "cut", "for", "within", "notice"):
            raise BadInputError(
                f"{option('event')} {text!r}: expected "
                "start=+DUR,cut=PCT,for=DUR[,within=DUR][,notice=DUR]"
            )
        fields[key.strip()] = value.strip()
    missing = [k for k in ("start", "cut", "for") if k not in fields]
    if missing:
        raise BadInputError(f"{option('event')} {text!r}: give {', '.join(missing)}")
    if not fields["start"].startswith("+"):
        raise BadInputError(
            f"{option('event')} {text!r}: start is a time after the fleet's start, +DUR"
        )
    cut = parse_percent(fields["cut"], f"{option('event')} cut")
    if not 0 < cut < 1:
        raise BadInputError(
            f"{option('event')} {text!r}: cut must be more than 0 % and under 100 %"
        )
    return Event(
        parse_duration(fields["start"][1:], allow_zero=True),
        cut,
        parse_duration(fields["for"]),
        parse_duration(fields.get("within", "0s"), allow_zero=True),
        parse_duration(fields.get("notice", "0s"), allow_zero=True),
    )


def _window(event: Event, grid_s: float, horizon: int) -> tuple[int, int]:
    """The event's cells; one that starts or ends past the fleet's horizon is refused (judged
    over the part inside it, it would answer another question than the one asked)."""
    first = round(event.start_s / grid_s)
    last = first + max(1, round(event.for_s / grid_s))
    if first >= horizon:
        raise BadInputError(
            f"{option('event')} {event.label}: starts after the fleet's horizon "
            f"({format_duration(horizon * grid_s)})"
        )
    if last > horizon:
        raise BadInputError(
            f"{option('event')} {event.label}: ends after the fleet's horizon "
            f"({format_duration(horizon * grid_s)}); for= at most "
            f"{format_duration((horizon - first) * grid_s)} from that start"
        )
    return first, last


#: an event's window on the grid: (first cell, end, baseline W, target W)
Window = tuple[int, int, float, float]


def event_limits(
    events: list[Event], demand_w: np.ndarray, feed_w: float | np.ndarray, grid_s: float
) -> tuple[np.ndarray, list[Window]]:
    """The limit of every cell (the feed's, a constant or one a cell, lowered to each
    event's target through its window) and each event's (first cell, end, baseline W,
    target W)."""
    limits = np.broadcast_to(np.asarray(feed_w, dtype=float), demand_w.shape).copy()
    windows: list[Window] = []
    for e in events:
        first, last = _window(e, grid_s, demand_w.size)
        baseline = float(demand_w[first:last].mean())
        target = (1 - e.cut) * baseline
        limits[first:last] = np.minimum(limits[first:last], target)
        windows.append((first, last, baseline, target))
    return limits, windows


def event_result(
    event: Event,
    window: Window,
    fleet_w: np.ndarray,
    demand_w: np.ndarray,
    lost_by_class: np.ndarray,
    grid_s: float,
    period: int = 1,
) -> EventResult:
    """How the capped fleet (``fleet_w``) answered ``event`` (module docstring); ``period``:
    the cells a meter's interval (the decision period) spans."""
    first, last, baseline, target = window
    span = fleet_w[first:last]
    blocks = np.add.reduceat(span, np.arange(0, span.size, period)) / np.diff(
        np.append(np.arange(0, span.size, period), span.size)
    )
    bad = np.flatnonzero(blocks > target * (1 + 1e-9))
    reached = (
        None
        if bad.size and bad[-1] == blocks.size - 1
        else (0.0 if not bad.size else float((bad[-1] + 1) * period * grid_s))
    )
    shed = float((demand_w[first:last] - span).sum() * grid_s)
    share = shed / (baseline * (last - first) * grid_s)
    return EventResult(
        event=event.label,
        baseline_w=baseline,
        target_w=target,
        reached_s=reached,
        met=reached is not None and reached <= event.within_s + 1e-9 and share >= event.cut - 1e-9,
        shed_energy_j=shed,
        shed_share=share,
        lost_gpu_hours_by_class={
            str(c): float(lost_by_class[c, first:last].sum() / 3600)
            for c in range(lost_by_class.shape[0])
        },
    )
