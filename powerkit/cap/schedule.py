"""A feed that changes over time (``powerkit cap --limit-csv schedule.csv``): rows of
``time,kW``, the limit from each row's time to the next row's (the last to the horizon's
end). ``time`` is seconds after the fleet's start (``0``, ``7200``) or a duration (``2h``,
``+2h30m``); the first row is at 0 and the times rise.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import read_text_input
from powerkit.core.units import UnitError, parse_duration

__all__ = ["Schedule", "read_schedule"]

#: the most rows a schedule holds (a row a second for 30 days)
MAX_ROWS = 2_592_000


@dataclass(frozen=True)
class Schedule:
    """A limit schedule: each row's start (seconds after the fleet's start) and limit (W)."""

    times_s: np.ndarray
    limits_w: np.ndarray
    path: str

    @property
    def highest_w(self) -> float:
        return float(self.limits_w.max())

    def cells(self, grid_s: float, horizon: int) -> np.ndarray:
        """The limit of every cell: the row in force at the cell's start."""
        starts = np.arange(horizon) * grid_s
        row = np.searchsorted(self.times_s, starts + 1e-9 * grid_s, side="right") - 1
        return self.limits_w[row]


def _time(text: str) -> float:
    t = text.strip().removeprefix("+")
    try:
        value = float(t)
    except ValueError:
        return parse_duration(t, allow_zero=True)
    if not math.isfinite(value) or value < 0:
        raise UnitError(f"{text!r} is not a time after the start")
    return value


def read_schedule(path: Path) -> Schedule:
    """Read and check a ``time,kW`` schedule; one line naming the row for anything wrong."""
    text = read_text_input(path, option("limit-csv"), max_bytes=128 * 1024 * 1024)
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    names = [h.strip().lower() for h in header or []]
    if names != ["time", "kw"]:
        raise BadInputError(
            f"{option('limit-csv')} {path}: the header must be time,kW "
            f"(got {','.join(header or []) or 'nothing'})"
        )
    times: list[float] = []
    limits: list[float] = []
    for n, row in enumerate(rows, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        where = f"{option('limit-csv')} {path}: row {n}"
        if len(row) != 2:
            raise BadInputError(f"{where}: expected 2 fields (time,kW), got {len(row)}")
        try:
            t = _time(row[0])
        except UnitError as exc:
            raise BadInputError(f"{where}: time {row[0]!r}: {exc}") from None
        try:
            kw = float(row[1])
        except ValueError:
            raise BadInputError(f"{where}: kW {row[1]!r} is not a number") from None
        if not (math.isfinite(kw) and kw > 0):
            raise BadInputError(f"{where}: kW {row[1]!r} must be a positive power")
        if times and not t > times[-1]:
            raise BadInputError(f"{where}: time {row[0]!r} does not come after the row before")
        if not times and t != 0:
            raise BadInputError(f"{where}: the first row's time must be 0 (the fleet's start)")
        if len(times) >= MAX_ROWS:
            raise BadInputError(f"{option('limit-csv')} {path}: more than {MAX_ROWS:,} rows")
        times.append(t)
        limits.append(kw * 1e3)
    if not times:
        raise BadInputError(f"{option('limit-csv')} {path}: no rows under the header")
    return Schedule(np.array(times), np.array(limits), str(path))
