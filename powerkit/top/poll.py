"""What each poll of a Prometheus server gives ``powerkit top``, checked as ``import
prometheus`` checks a range read: samples no GPU can draw are left out and counted, two series
of one GPU keep the first (counted), a scrape seen before adds nothing, and a GPU whose
newest scrape falls behind the others' (a series that stopped reporting) or a server whose
scrapes stop altogether (frozen scrape times) is said.

Ages are measured between the server's own scrape times, never against this machine's
clock: the two clocks need not agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from powerkit.core.units import format_duration

__all__ = ["STALE_POLLS", "PollCheck"]

#: scrape intervals a GPU's newest scrape may fall behind the newest of all before it is stale
#: (a scrape that is merely late by one or two intervals is not)
STALE_POLLS = 3

Key = tuple[str, int]


@dataclass
class PollCheck:
    """The checks of one session's polls (see the module docstring).

    Attributes:
        keys: the GPUs the session shows. ceiling_w: the most one GPU may draw (samples above
        it, negative or not finite are left out). interval_s: the scrape (poll) interval.
    """

    keys: list[Key]
    ceiling_w: float
    interval_s: float
    invalid: int = 0  # samples left out: NaN, negative, or above the ceiling
    repeated: int = 0  # a GPU's second series in one poll (left out)
    frozen_polls: int = 0  # polls in a row in which no GPU had a new scrape
    seen: dict[Key, float] = field(default_factory=dict)  # each GPU's newest scrape time
    newest: float | None = None  # the newest scrape time of any GPU

    def fresh(self, got: list[tuple[Key, float, float]]) -> dict[Key, tuple[float, float]]:
        """The new samples of this poll's answer ``got`` ((host, gpu), scrape time s, W) of
        the session's GPUs, each GPU's at most once, valid ones only."""
        known, polled, out = set(self.keys), set(), {}
        for key, t, w in got:
            if key not in known:
                continue
            if key in polled:
                self.repeated += 1
                continue
            polled.add(key)
            before = self.seen.get(key)
            if before is not None and t <= before:
                continue  # the same scrape again (or an older one)
            self.seen[key] = t
            self.newest = t if self.newest is None else max(self.newest, t)
            if not (math.isfinite(w) and 0 <= w <= self.ceiling_w):
                self.invalid += 1
                continue
            out[key] = (t, w)
        self.frozen_polls = 0 if out or not self.seen else self.frozen_polls + 1
        return out

    def stale(self) -> list[Key]:
        """The GPUs whose newest scrape is more than STALE_POLLS scrape intervals behind the
        newest of any GPU (or that never reported while others did)."""
        if self.newest is None:
            return []
        late = self.newest - STALE_POLLS * self.interval_s
        return [k for k in self.keys if self.seen.get(k, -math.inf) < late]

    def notes(self) -> list[str]:
        """What the polls so far left out or could not show, a line each (none: all well)."""
        out = []
        stale = self.stale()
        if stale:
            names = ", ".join(f"{h}:{g}" for h, g in stale[:5]) + (" …" if len(stale) > 5 else "")
            out.append(
                f"{len(stale)} GPU(s) stopped reporting ({names}): no scrape for more than "
                f"{format_duration(STALE_POLLS * self.interval_s)} while others have one"
            )
        if self.frozen_polls >= STALE_POLLS:
            out.append(
                f"no GPU has had a new scrape for {self.frozen_polls} polls: the server's "
                "scrapes have stopped (its scrape times are frozen)"
            )
        if self.invalid:
            out.append(
                f"{self.invalid} sample(s) no GPU can draw (NaN, negative, or above "
                f"{self.ceiling_w:,.0f} W) left out"
            )
        if self.repeated:
            out.append(
                f"{self.repeated} sample(s) of a second series of one GPU (e.g. while a pod label "
                "changed) left out; the first kept"
            )
        return out
