"""Read a headerless log whose cells carry their units: a profiler's or a script's output such as
``5.19739 ms<TAB>164.68100 W<TAB>68 C`` (tab- or comma-separated), ``#`` comment lines before
and after the data skipped.

Each column is what its unit says: a time (``s``, ``ms``, ``us``, ``ns``: epoch times, or
offsets from ``--start``), the power (``W``, ``mW``, ``kW``), a temperature (``C``), an SM
clock (``MHz``), a utilization (``%``), energy (``J``, ``mJ``). Two power columns are refused,
naming both by position; a line whose cells differ in count or unit from the first data line's
is a bad row naming its line. One GPU per file (``--host`` names it; the file's name by default).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.trace.model import Trace
from powerkit.trace.nameplate import lookup_nameplate_w
from powerkit.trace.options import ImportOptions
from powerkit.trace.readers.outliers import time_problems
from powerkit.trace.readers.textlog import BadRow, implausible_rows, resolve_bad_rows
from powerkit.trace.schema import GpuMeta, TraceMeta, median_interval, power_ceiling_w, to_canonical
from powerkit.trace.timeparse import parse_start, start_anchor_s

__all__ = ["looks_like_unit_cells", "read_unit_cells"]

_CELL = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%°]+)\s*$")
#: unit -> (canonical column, factor to its unit)
_UNITS: dict[str, tuple[str, float]] = {
    "s": ("ts", 1.0),
    "ms": ("ts", 1e-3),
    "us": ("ts", 1e-6),
    "ns": ("ts", 1e-9),
    "W": ("power_w", 1.0),
    "mW": ("power_w", 1e-3),
    "kW": ("power_w", 1e3),
    "C": ("temp_c", 1.0),
    "°C": ("temp_c", 1.0),
    "MHz": ("sm_clock_mhz", 1.0),
    "%": ("gpu_util", 1.0),
    "J": ("energy_j", 1.0),
    "mJ": ("energy_j", 1e-3),
}


def _separator(line: str) -> str:
    return "\t" if "\t" in line else ","


def _units_of(line: str) -> list[str] | None:
    """The units of a data line's cells, or None when a cell has none."""
    units = []
    for cell in line.split(_separator(line)):
        found = _CELL.match(cell)
        if found is None:
            return None
        units.append(found.group(2))
    return units


def looks_like_unit_cells(text: str) -> bool:
    """True for text whose first line that is not a ``#`` comment has cells that all carry
    units, a time and a power among them."""
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")), "")
    units = _units_of(first)
    if not units:
        return False
    kinds = [_UNITS.get(u, ("", 0.0))[0] for u in units]
    return "ts" in kinds and "power_w" in kinds


def read_unit_cells(path: Path, opts: ImportOptions, warnings: list[str]) -> Trace:
    """Return the Trace of a headerless log whose cells carry their units."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    data = [(n, ln) for n, ln in enumerate(lines, start=1) if ln.strip() and not ln.startswith("#")]
    if not data:
        raise BadInputError(f"{path}: no samples (only comment lines)")
    units = _units_of(data[0][1]) or []
    columns = _layout(units, path, data[0][0])
    values = np.full((len(data), len(units)), np.nan)
    line_no = np.array([n for n, _ in data])
    bad: list[BadRow] = []
    sep = _separator(data[0][1])
    for row, (n, line) in enumerate(data):
        cells = line.split(sep)
        if len(cells) != len(units):
            bad.append((n, f"{len(cells)} cells, the first data line has {len(units)}"))
            continue
        for j, cell in enumerate(cells):
            found = _CELL.match(cell)
            if found is None or found.group(2) != units[j]:
                bad.append((n, f"cell {cell.strip()!r}: expected a number in {units[j]}"))
                break
            values[row, j] = float(found.group(1)) * _UNITS[units[j]][1]
    keep = ~np.isnan(values).any(axis=1)
    t_s = values[:, columns["ts"]]
    power = values[:, columns["power_w"]]
    over, implausible = implausible_rows(
        pl.Series(power),
        power_ceiling_w(opts.max_power_w, opts.nameplate_w or lookup_nameplate_w(opts.gpu_name)),
        lambda i: int(line_no[i]),
        keep,
    )
    bad += implausible + [(int(line_no[i]), "negative power") for i in np.flatnonzero(power < 0)]
    keep &= ~over & ~(power < 0)
    first_s = float(t_s[keep].min()) if keep.any() else None
    anchor = start_anchor_s(first_s, opts.start, path, warnings)
    t_us = np.round((np.where(keep, t_s, 0.0) + anchor) * 1e6).astype(np.int64)
    at = np.flatnonzero(keep)
    bad += time_problems(t_us[at], np.zeros(at.size, dtype=np.int64), line_no[at])
    dropped = resolve_bad_rows(
        path, bad, last_line=int(line_no[-1]), skip=opts.skip_bad_rows, warnings=warnings
    )
    if dropped:
        keep &= ~np.isin(line_no, [n for n, _ in dropped])
    if not keep.any():
        raise BadInputError(f"{path}: no samples left after dropping bad rows")
    host = opts.host or path.stem
    frame = pl.DataFrame(
        {
            "ts": pl.Series(t_us[keep]).cast(pl.Datetime("us", "UTC")),
            "host": [host] * int(keep.sum()),
            "gpu": np.zeros(int(keep.sum()), dtype=np.int64),
            **{c: values[keep, j] for c, j in columns.items() if c != "ts"},
        }
    )
    table = to_canonical(frame, what=str(path))
    plate = opts.nameplate_w or lookup_nameplate_w(opts.gpu_name)
    meta = TraceMeta(
        source="unit-cells",
        power_semantics="unknown",
        interval_s=opts.interval_s or median_interval(table),
        tz="UTC",
        gpus=[GpuMeta(host=host, gpu=0, name=opts.gpu_name, nameplate_w=plate)],
        extra={
            "imported_from": str(path),
            "fields_read": {
                "gpu": "(one GPU per file)",
                **{c: f"(cell {j + 1}, in {units[j]})" for c, j in columns.items()},
            },
            **({"start": parse_start(opts.start).isoformat()} if opts.start else {}),
        },
    )
    return Trace(meta=meta, table_=table, origin=str(path), warnings=warnings, bad_rows=dropped)


def _layout(units: list[str], path: Path, line: int) -> dict[str, int]:
    """canonical column -> the cell it is in, from the first data line's units."""
    columns: dict[str, int] = {}
    for j, unit in enumerate(units):
        column = _UNITS.get(unit, ("", 0.0))[0]
        if not column:
            continue
        if column in columns:
            if column in ("ts", "power_w"):
                raise BadInputError(
                    f"{path}: line {line}: cells {columns[column] + 1} and {j + 1} are both in "
                    f"{'a time' if column == 'ts' else 'power'} units; read it with "
                    f"{option('map')} after giving it a header"
                )
            continue  # (a second clock or temperature: the first is kept)
        columns[column] = j
    return columns
