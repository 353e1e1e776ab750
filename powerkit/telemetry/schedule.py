"""Absolute-deadline ticks: tick k is due at start + k * interval, with no drift."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Schedule", "Tick"]


@dataclass(frozen=True)
class Tick:
    """One tick: its index, when it fired (monotonic s), time since start, lateness (s)."""

    index: int
    now: float
    elapsed_s: float
    late_s: float


class Schedule:
    """Yields ticks until ``duration_s`` (None: forever) or until ``stop`` is set.

    A tick that is late by more than one interval is skipped and counted in ``missed``, never
    made up with a burst of ticks. Waiting is done on ``stop``, so setting it (from a signal
    handler, say) ends the schedule at once.
    """

    def __init__(
        self, interval_s: float, duration_s: float | None, stop: threading.Event | None = None
    ) -> None:
        self.interval_s = interval_s
        self.duration_s = duration_s
        self.stop = stop or threading.Event()
        self.missed = 0
        self.start = time.monotonic()

    def __iter__(self) -> Iterator[Tick]:
        interval, k = self.interval_s, 0
        while not self.stop.is_set():
            if self.duration_s is not None and k * interval >= self.duration_s - 1e-9:
                return
            deadline = self.start + k * interval
            wait = deadline - time.monotonic()
            if wait > 0 and self.stop.wait(wait):
                return
            now = time.monotonic()
            late = now - deadline
            if late > interval:
                skipped = int(late // interval)
                if self.duration_s is not None:
                    count = math.ceil((self.duration_s - 1e-9) / interval)  # ticks in it
                    if k + skipped >= count:  # the skip reaches the end: no tick past it
                        self.missed += count - k
                        return
                self.missed += skipped
                k += skipped
                late = now - (self.start + k * interval)
            yield Tick(k, now, now - self.start, late)
            k += 1
