"""What a CSV's rows and GPU column say of how it was written: a shell loop's separator rows
and never-written columns (:class:`LoopLayout`), device names as GPU numbers (``card0``), and a
frame counter where the GPU would be (refused with the ``--map`` that reads the file). Used by
the CSV reader (readers/csvfile.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.trace.infer import map_text
from powerkit.trace.readers.textlog import BadRow

__all__ = ["LoopLayout", "check_gpu_varies", "gpu_numbers", "loop_columns", "loop_rows"]


def gpu_numbers(cells: pl.Series) -> pl.Series:
    """GPU indices from cells of numbers or of device names that end in one (``card0``,
    ``GPU 1``, ``device_2``: rocm-smi, gpustat); anything else is null (a bad row)."""
    numbers = cells.cast(pl.Int64, strict=False)
    if numbers.null_count() == cells.null_count():
        return numbers
    named = cells.str.extract(r"(?i)^\s*(?:card|gpu|device|dev)\s*[#:_-]?\s*(\d+)\s*$", 1)
    return numbers.fill_null(named.cast(pl.Int64, strict=False))


#: rows looked at to tell whether a GPU column tells the rows at one time apart
_FRAME_ROWS = 10_000


def check_gpu_varies(
    ts: pl.Series,
    gpu: pl.Series,
    rows: np.ndarray,
    header: list[str],
    cols: dict[str, int],
    cells: pl.DataFrame,
    line_no: np.ndarray,
    path: Path,
) -> None:
    """Refuse a GPU column that holds one value among the rows at one time, in every frame
    of several rows while it changes between frames (a loop's frame counter named ``index``):
    it cannot be the GPU. The refusal names the columns that could be (they vary within a
    frame). Looked at in the first rows only: a frame is a few consecutive rows."""
    at = np.flatnonzero(rows)[:_FRAME_ROWS]
    if at.size < 2:
        return
    look = pl.DataFrame({"t": ts.gather(at), "g": gpu.gather(at), "i": at})
    frames = look.group_by("t", maintain_order=True).agg(
        pl.len().alias("n"), pl.col("g").n_unique().alias("u")
    )
    several = frames.filter(pl.col("n") > 1)
    if several.height == 0 or (several["u"] > 1).any() or look["g"].n_unique() < 2:
        return
    first = look.filter(pl.col("t") == several["t"][0])["i"].to_numpy()
    used = {i for c, i in cols.items() if c != "gpu"}
    candidates = [
        name
        for i, name in enumerate(header)
        if i not in used
        and i != cols["gpu"]
        and cells[f"c{i}"].gather(first).n_unique() == first.size
    ]
    name = header[cols["gpu"]]
    mapping = {c: header[i] for c, i in cols.items()}
    hint = (
        f"; the GPU may be {' or '.join(repr(c) for c in candidates)}: read it with "
        f"{option('map')} {map_text({**mapping, 'gpu': candidates[0]})}"
        if candidates
        else f"; name the GPU's column with {option('map')} gpu=COLUMN"
    )
    raise BadInputError(
        f"{path}: column {name!r} cannot be the GPU: lines {line_no[first[0]]}-"
        f"{line_no[first[-1]]} share one time and one {name} (it changes between times, as a "
        f"frame counter does){hint}"
    )


@dataclass(frozen=True)
class LoopLayout:
    """What a shell loop around a tool wrote (rocm-smi's ``--csv`` with the loop's time put
    before each line): ``separators`` rows holding a time alone, and rows of ``written`` fields
    where the header names more (its last names are never written)."""

    separators: int
    written: int | None


#: a loop logger's separator row: a time and nothing else (``1733300000,``: a blank line of a
#: tool's output with the loop's time put before it)
_SEPARATOR = r"^[^,]*[^,\s][^,]*,[\s,]*$"


def loop_rows(
    data: pl.Series, width: int, drop: np.ndarray, bad: list[BadRow]
) -> tuple[np.ndarray, list[BadRow], LoopLayout]:
    """Rows of a loop's log that are not bad (field_count_problems reported them): a time
    alone is a separator, dropped; where every other row has the same k < ``width`` fields, the
    header's last ``width - k`` names are never written and the rows are read as they are.
    Anything else stays a bad row."""
    at = np.array([n - 2 for n, _ in bad], dtype=np.int64)
    text = data.gather(pl.Series(at)).fill_null("")
    alone = text.str.contains(_SEPARATOR).to_numpy()
    rest = at[~alone]
    counts = (text.filter(pl.Series(~alone)).str.count_matches(",", literal=True) + 1).to_numpy()
    filled = int((~drop).sum()) + int((~alone).sum())  # rows that are neither blank nor bad
    written = None
    if rest.size and rest.size == filled and np.unique(counts).size == 1 and counts[0] >= 2:
        written = int(counts[0])  # every row: the header's last names are never written
    layout = LoopLayout(int(alone.sum()), written)
    if written is not None:  # the short rows are the rows: none is bad
        drop = drop.copy()
        drop[rest] = False
        return drop, [], layout
    return drop, [row for row, separator in zip(bad, alone, strict=True) if not separator], layout


def loop_columns(
    loop: LoopLayout, header: list[str], cols: dict[str, int], path: Path, warnings: list[str]
) -> dict[str, int]:
    """The columns read from a loop's log (:class:`LoopLayout`), said in ``warnings``: those
    never written are left out; a time or power never written is one line."""
    if loop.separators:
        warnings.append(f"{path}: {loop.separators} separator row(s) (a time alone) skipped")
    if loop.written is None:
        return cols
    unwritten = header[loop.written :]
    for need in ("ts", "power_w"):
        if cols.get(need, -1) >= loop.written:
            raise BadInputError(
                f"{path}: every row has {loop.written} fields, the header has {len(header)}: "
                f"{need} column {header[cols[need]]!r} is never written"
            )
    warnings.append(
        f"{path}: every row has {loop.written} fields, the header has {len(header)}: "
        f"{', '.join(unwritten)} never written"
    )
    return {c: i for c, i in cols.items() if i < loop.written}
