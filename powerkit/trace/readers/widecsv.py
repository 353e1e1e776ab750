"""What a CSV's header says: its column names, and the wide layout (a time column and one
power column per GPU, ``GPU0``, ``gpu_1 [W]``, ``power.draw.2`` ...) stacked into canonical rows."""

from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.trace.options import ImportOptions
from powerkit.trace.readers.textlog import (
    power_cells,
)

# A wide file's power column: GPU0, gpu_1, GPU-2, GPU 2 [W], power.draw.0 (the GPU index is the
# number; a unit in brackets is the cells' unit).
_WIDE_COLUMN = re.compile(r"^(?:gpu[ _-]?|power\.draw\.)(\d{1,5})(?:\s*\[(mW|W|kW)\])?$", re.I)


_UNIT_SUFFIX = re.compile(r"\[(mW|W|kW)\]\s*$")


@dataclass(frozen=True)
class WideLayout:
    """A wide file's layout: the time column and, per GPU, (GPU index, column, cell unit)."""

    ts: int
    power: list[tuple[int, int, str]]


def looks_like_wide_csv(first_line: str) -> bool:
    """Return True for a header with a time column and power columns named per GPU."""
    try:
        return _detected_wide(header_names(first_line), "W") is not None
    except csv.Error:
        return False


def _detected_wide(header: list[str], unit: str) -> WideLayout | None:
    """The wide layout its column names say, or None."""
    ts = next((i for i, n in enumerate(header) if n.lower() in TIME_NAMES), None)
    power = []
    for i, name in enumerate(header):
        m = _WIDE_COLUMN.match(name)
        if m:
            power.append((int(m.group(1)), i, m.group(2) or unit))
    if ts is None or not power:
        return None
    return WideLayout(ts, power)


def wide_layout(header: list[str], opts: ImportOptions, path: Path) -> WideLayout | None:
    """The file's wide layout (``--map power_w=A|B|...``, or named per GPU), or None."""
    index = {name: i for i, name in enumerate(header)}
    mapping = opts.mapping
    if mapping is not None and "|" in mapping["power_w"]:
        names = [n.strip() for n in mapping["power_w"].split("|")]
        if "gpu" in mapping:
            raise BadInputError(
                f"{option('map')}: a wide file's GPU index is the position of its column in "
                "power_w's "
                "list; map no gpu column"
            )
        missing = [n for n in names if n not in index]
        if missing or not all(names):
            raise BadInputError(
                f"{path}: {option('map')} power_w names column(s) "
                f"{', '.join(missing) or repr('')} that "
                f"the header lacks (it has {', '.join(header)})"
            )
        if len(set(names)) < len(names):
            raise BadInputError(
                f"{option('map')} power_w={mapping['power_w']}: a column is named twice"
            )
        units = [_UNIT_SUFFIX.search(n) for n in names]
        power = [
            (g, index[n], u.group(1) if u else opts.power_unit)
            for g, (n, u) in enumerate(zip(names, units, strict=True))
        ]
        return WideLayout(index.get(mapping["ts"], -1), power)  # (-1: _columns names it missing)
    if mapping is not None or "power_w" in index:
        return None
    wide = _detected_wide(header, opts.power_unit)
    if wide is not None:
        seen = Counter(g for g, _, _ in wide.power)
        twice = sorted(g for g, n in seen.items() if n > 1)
        if twice:
            named = [header[i] for g, i, _ in wide.power if g in twice]
            raise BadInputError(
                f"{path}: columns {', '.join(named)} name the same GPU; pick one per GPU with "
                f"{option('map')} ts=COL,power_w=COL_A|COL_B|..."
            )
    return wide


def stack_wide(
    cells: pl.DataFrame,
    cols: dict[str, int],
    wide: WideLayout,
    drop: np.ndarray,
    line_no: np.ndarray,
    header: list[str],
    path: Path,
    warnings: list[str],
) -> tuple[dict[str, pl.Series], pl.Series, pl.Series, np.ndarray, np.ndarray]:
    """A wide file's cells as rows of one GPU each, line by line (the file's time order kept):
    (the other columns' cells, watts, GPU index, rows to drop, line numbers).

    An empty power cell is no sample of that GPU at that time, not a bad line (the line's
    other GPUs are read): left out, and said per column (a column with no reading at all
    is a GPU the log did not have)."""
    k, n = len(wide.power), cells.height
    names = [f"c{i}" for _, i, _ in wide.power]
    empty = cells.select(pl.col(c).is_null() for c in names).to_numpy() & ~drop[:, None]
    for (g, i, _), count in zip(wide.power, empty.sum(axis=0).tolist(), strict=True):
        if count == int((~drop).sum()):
            warnings.append(f"{path}: column {header[i]!r} holds no power: GPU {g} left out")
        elif count:
            warnings.append(
                f"{path}: column {header[i]!r} has {count:,} empty power cell(s): no sample of "
                f"GPU {g} at those times"
            )
    # row-major ravel of (lines x GPUs): line by line, each line's GPUs in order
    raw = pl.Series(cells.select(names).to_numpy().ravel(), dtype=pl.String)
    watts = cells.select(
        power_cells(pl.col(c), u).alias(c) for c, (_, _, u) in zip(names, wide.power, strict=True)
    )
    repeat = pl.Series(np.repeat(np.arange(n), k))
    get = {c: cells[f"c{i}"].gather(repeat) for c, i in cols.items()}
    get["power_w"] = raw
    gpu = pl.Series(np.tile(np.array([g for g, _, _ in wide.power], dtype=np.int64), n))
    # (to_numpy turns an unreadable cell's null into NaN: power_cells never gives NaN)
    power = pl.Series(watts.to_numpy().ravel(), dtype=pl.Float64).fill_nan(None)
    return get, power, gpu, np.repeat(drop, k) | empty.ravel(), np.repeat(line_no, k)


# Names a wide file's time column goes by (compared in lower case).
TIME_NAMES = (
    "ts",
    "timestamp",
    "time",
    "datetime",
    "date_time",
    "time_stamp",
    "time_s",
    "t",
    "epoch",
    "unix_time",
)


def header_names(line: str) -> list[str]:
    """A CSV header line's column names, trimmed (csv.Error for a line it cannot split)."""
    return [c.strip().strip('"').strip() for c in next(csv.reader([line]))]
