"""Tail a JSON-lines file written by the workload and join its annotations into a recording.

Each line is a JSON object with any of ``step``, ``phase``, ``tokens`` (cumulative),
``group_size``, ``concurrency`` (also inside a ``knobs`` object), and optionally ``ts``
(unix seconds or ISO 8601). A line without ``ts`` takes effect when powerkit reads it. A
sample carries the latest annotation at or before its timestamp.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

__all__ = ["ANNOTATION_KEYS", "AnnotationFeed", "AnnotationTail"]

ANNOTATION_KEYS = ("step", "phase", "tokens", "group_size", "concurrency")
_DTYPES = {
    "step": pl.Int64,
    "phase": pl.String,
    "tokens": pl.Int64,
    "group_size": pl.Int32,
    "concurrency": pl.Int32,
}


class AnnotationTail:
    """Follows a JSON-lines file (it may not exist yet); keeps every event read so far."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._offset = 0
        self._partial = ""
        self.events: list[dict[str, object]] = []
        self.bad_lines = 0

    def poll(self, now_epoch_s: float) -> None:
        """Read lines appended since the last poll; undated lines are stamped ``now``."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
                self._offset = fh.tell()
        except FileNotFoundError:
            return
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()  # an unfinished last line waits for its newline
        for line in lines:
            if line.strip():
                self._add(line, now_epoch_s)

    def _add(self, line: str, now: float) -> None:
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError
        except ValueError:
            self.bad_lines += 1
            return
        knobs = obj.get("knobs")
        if isinstance(knobs, dict):
            obj = {**knobs, **obj}
        event = {k: obj[k] for k in ANNOTATION_KEYS if k in obj}
        if not event:
            return
        event["ts"] = _epoch(obj.get("ts"), now)
        self.events.append(event)

    def join(self, ts_epoch_s: np.ndarray) -> dict[str, pl.Series]:
        """Return annotation columns for samples at ``ts_epoch_s`` (as-of join, backward)."""
        found = list(self.events)  # (a copy: another thread may be adding to it)
        if not found:
            return {}
        events = pl.DataFrame(
            [{k: e.get(k) for k in ("ts", *ANNOTATION_KEYS)} for e in found],
            schema={"ts": pl.Float64, **_DTYPES},
            strict=False,
        ).sort("ts")
        # Forward-fill so a line that sets only "phase" keeps the last known "step".
        events = events.with_columns(pl.all().exclude("ts").forward_fill())
        samples = pl.DataFrame({"ts": ts_epoch_s.astype(float)}).with_row_index("row")
        joined = samples.sort("ts").join_asof(events, on="ts", strategy="backward").sort("row")
        present = [k for k in ANNOTATION_KEYS if events[k].null_count() < events.height]
        return {k: joined[k] for k in present}


class AnnotationFeed(AnnotationTail):
    """Annotations handed over in process (powerkit.Monitor's steps), not read from a file."""

    def __init__(self) -> None:
        super().__init__(Path())

    def poll(self, now_epoch_s: float) -> None:
        """Nothing to read: events arrive through :meth:`add`."""

    def add(self, ts_epoch_s: float, **values: object) -> None:
        """One annotation (any of ``ANNOTATION_KEYS``) from ``ts_epoch_s`` on."""
        event: dict[str, object] = {k: v for k, v in values.items() if k in ANNOTATION_KEYS}
        event["ts"] = float(ts_epoch_s)
        self.events.append(event)


def _epoch(value: object, default: float) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return default
    return default
