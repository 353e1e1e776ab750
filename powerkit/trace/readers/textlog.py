"""What the text readers share: reading a log's lines, cells of power and bit fields, and one
policy for malformed rows. The checks of a log's times: ``powerkit.trace.readers.outliers``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.trace.options import POWER_UNITS
from powerkit.trace.schema import implausible_power

__all__ = [
    "POWER_UNITS",
    "BadRow",
    "LineBlock",
    "all_watts",
    "bit_field_expr",
    "byte_count",
    "cell_units",
    "comma_count",
    "field_count_problems",
    "fields_all_whole",
    "finite",
    "implausible_rows",
    "line_blocks",
    "line_shapes",
    "nonblank_lines",
    "power_cells",
    "power_cells_of",
    "power_of_text",
    "read_lines",
    "resolve_bad_rows",
    "short_last_line",
]

#: (line number, problem)
BadRow = tuple[int, str]


def bit_field_expr(c: pl.Expr) -> pl.Expr:
    """A bit-field cell's value (``clock_event_reasons``): hex as nvidia-smi and NVML loggers
    write it (``0x0000000000000004``), or a whole decimal; null for ``[N/A]``, an empty cell
    and anything else (a reader that must not lose a cell checks for those)."""
    text = c.str.strip_chars()
    lower = text.str.to_lowercase()
    return (
        pl.when(lower.str.starts_with("0x"))
        .then(lower.str.strip_prefix("0x").str.to_integer(base=16, strict=False))
        .otherwise(text.str.to_integer(base=10, strict=False))
    )


def power_cells(c: pl.Expr, unit: str = "W") -> pl.Expr:
    """Return watts from power cells holding a number and, optionally, its unit (mW, W, kW;
    ``unit`` when it has none). Anything else (another unit, text, NaN, infinity) becomes null.

    Suffix tests, lengths and a float cast, no regular expression (a log's power column is its
    longest): the unit is the cell's ending, and the letters stripped from its end must be
    exactly that unit (``5 kmW`` is no power).
    """
    text = c.str.strip_chars()
    return power_of_text(text, text.str.strip_chars_end("mkW"), unit)


def power_of_text(text: pl.Expr, letters: pl.Expr, unit: str = "W") -> pl.Expr:
    """:func:`power_cells` from the cells stripped (``text``) and those with the unit's letters
    cut from their end (``letters``): given as columns computed once, they are not computed
    again for each test that names them (an eager select would)."""
    if unit not in POWER_UNITS:
        raise BadInputError(f"{option('power-unit')} {unit!r}: one of {', '.join(POWER_UNITS)}")
    milli, kilo, watt = text.str.ends_with("mW"), text.str.ends_with("kW"), text.str.ends_with("W")
    scale = (
        pl.when(milli)
        .then(POWER_UNITS["mW"])
        .when(kilo)
        .then(POWER_UNITS["kW"])
        .when(watt)
        .then(POWER_UNITS["W"])
        .otherwise(POWER_UNITS[unit])
    )
    suffix = pl.when(milli | kilo).then(2).when(watt).then(1).otherwise(0)
    whole = (text.str.len_bytes() - letters.str.len_bytes()) == suffix
    number = letters.str.strip_chars_end().cast(pl.Float64, strict=False)
    return pl.when(whole & number.is_finite()).then(number * scale)


def power_cells_of(cells: pl.Series, c: pl.Expr, unit: str = "W") -> pl.Expr:
    """:func:`power_cells` over column ``c`` holding ``cells``, by the cheapest exact route: a
    column whose every cell ends with `` W`` (nvidia-smi's) only needs that suffix cut and a
    cast, which is what the general reading does with such cells — but for the NaN and
    infinities the cast lets through: :func:`finite` of the result, once computed, makes those
    null (a select computes an expression each time it is named, so the test is not folded
    in here: the cells would be parsed twice)."""
    if unit not in POWER_UNITS:
        raise BadInputError(f"{option('power-unit')} {unit!r}: one of {', '.join(POWER_UNITS)}")
    if all_watts(cells):
        return c.str.strip_chars().str.strip_suffix(" W").cast(pl.Float64, strict=False)
    return power_cells(c, unit)


def finite(c: pl.Expr) -> pl.Expr:
    """``c`` where it is a finite number, else null."""
    return pl.when(c.is_finite()).then(c)


def all_watts(cells: pl.Series) -> bool:
    """True when every cell of a power column ends with `` W`` (each carries the unit W)."""
    if not cells.len():
        return False
    # (cells ending in " W" as written, the usual case, need no copy with the spaces cut)
    return bool(cells.str.ends_with(" W").all()) or bool(
        cells.str.strip_chars_end().str.ends_with(" W").all()
    )


def cell_units(c: pl.Expr) -> pl.Expr:
    """Return the unit a power cell ends with (mW, W, kW), null where it carries none."""
    text = c.str.strip_chars_end()
    return (
        pl.when(text.str.ends_with("mW"))
        .then(pl.lit("mW"))
        .when(text.str.ends_with("kW"))
        .then(pl.lit("kW"))
        .when(text.str.ends_with("W"))
        .then(pl.lit("W"))
    )


def implausible_rows(
    power: pl.Series, ceiling_w: float, line_of: Callable[[int], int], keep: np.ndarray
) -> tuple[np.ndarray, list[BadRow]]:
    """Return (mask, bad rows) of kept samples above ``ceiling_w`` (schema.power_ceiling_w):
    more than one GPU can draw, so a unit mix-up, named as such."""
    over = keep & (power.fill_null(0.0) > ceiling_w).to_numpy()
    rows = [
        (line_of(int(i)), implausible_power(float(power[int(i)]), ceiling_w))
        for i in np.flatnonzero(over)
    ]
    return over, rows


# How many line numbers a warning names before it says "...".
_SHOWN = 8


def nonblank_lines(path: Path) -> tuple[list[tuple[int, str]], int]:
    """Return ((line number, stripped text) of every non-blank line, number of lines)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    return [(n, s) for n, s in enumerate((ln.strip() for ln in lines), start=1) if s], len(lines)


def read_lines(path: Path) -> pl.Series:
    """Return every line of a text file as a string Series; entry i is line i + 1.

    Blank lines are kept (as null or empty), so positions map to line numbers. Bytes that are
    not UTF-8 are replaced rather than refused (one stray byte must not lose a log).
    """
    options = dict(
        has_header=False,
        separator="\x1f",
        quote_char=None,
        infer_schema=False,
        new_columns=["line"],
    )
    for encoding in ("utf8", "utf8-lossy"):
        try:
            df = pl.read_csv(path, encoding=encoding, glob=False, **options)  # type: ignore[arg-type]
        except pl.exceptions.NoDataError:
            return pl.Series("line", [], dtype=pl.String)
        except pl.exceptions.ComputeError as exc:
            if "utf-8" in str(exc).lower() and encoding == "utf8":
                continue
            raise BadInputError(f"{path}: cannot read as text ({exc})") from None
        except pl.exceptions.PolarsError as exc:
            raise BadInputError(f"{path}: cannot read as text ({exc})") from None
        if df.width != 1:  # a line holding the 0x1f separator itself
            raise BadInputError(f"{path}: cannot read as text (control character 0x1f in a line)")
        return df["line"]
    raise AssertionError("unreachable")


_BLOCK = 1 << 23  # 8 MiB of the file at a time


def line_shapes(path: Path, expected: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (fields per line, blank mask) of every line of a comma-separated file.

    The file is scanned a block at a time (NumPy over the bytes, :func:`line_blocks`), so
    memory holds a block and a number per line, never the lines themselves.
    """
    shapes = [block.shapes() for block in line_blocks(path, expected)]
    if not shapes:
        return np.zeros(0, np.int32), np.zeros(0, bool)
    return np.concatenate([n for n, _ in shapes]), np.concatenate([b for _, b in shapes])


def byte_count(data: bytes, byte: int) -> int:
    """How many times ``byte`` occurs in ``data`` (NumPy: a few times faster than
    ``bytes.count``)."""
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == byte))


def comma_count(path: Path) -> int:
    """The commas in a file, counted a block at a time."""
    with open(path, "rb") as fh:
        return sum(byte_count(block, 44) for block in iter(lambda: fh.read(_BLOCK), b""))


def fields_all_whole(commas: int, rows: int, expected: int, last_field: pl.Series) -> bool:
    """True when each of ``rows`` lines holding ``commas`` commas in all has exactly
    ``expected`` fields, from what a CSV read of them shows: none has fewer (``last_field``,
    the header's last field as read, has no null: a missing field reads as null) and the
    commas are ``expected - 1`` a line, so none has more. False says nothing (a null may be an
    empty last field): the lines are then counted one by one (:func:`line_shapes`), which
    costs about as much as the read, so that is done only where this cannot tell."""
    return last_field.null_count() == 0 and commas == (expected - 1) * rows


def _line_counts(data: bytes, expected: int) -> tuple[np.ndarray, np.ndarray]:
    """(fields per line, blank mask) of the lines in ``data``: complete lines, the last one
    with or without its newline. Only lines whose field count is not ``expected`` can be
    blank, so only those are looked at again."""
    arr = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    if not data.endswith(b"\n"):
        ends = np.r_[ends, len(data)]  # a last line without a newline
    commas = np.flatnonzero(arr == 44)  # positions, in order
    starts = np.r_[0, ends[:-1] + 1]
    before = np.searchsorted(commas, ends)  # commas before each line's end
    n = (before - np.r_[0, before[:-1]] + 1).astype(np.int32)
    blank = np.zeros(n.size, dtype=bool)
    for i in np.flatnonzero(n != expected).tolist():
        blank[i] = not data[starts[i] : ends[i]].strip()
    return n, blank


@dataclass(frozen=True)
class LineBlock:
    """A block of consecutive lines of a file, as read by :func:`line_blocks`."""

    first: int  # the index (0-based) of its first line in the file
    data: bytes  # its lines, newlines included (the file's last may lack one)
    lines: int
    expected: int  # the fields a line should have

    def shapes(self) -> tuple[np.ndarray, np.ndarray]:
        """(fields per line, blank mask), as :func:`line_shapes` gives them."""
        return _line_counts(self.data, self.expected)


def line_blocks(path: Path, expected: int, size: int = _BLOCK) -> Iterator[LineBlock]:
    """Yield a file's lines in blocks of about ``size`` bytes (whole lines; a line longer
    than that is a block of its own), the file read once; memory holds a block and the
    next read."""
    first = 0
    with open(path, "rb") as fh:

        def block(data: bytes) -> LineBlock:
            lines = byte_count(data, 10) + (not data.endswith(b"\n"))
            return LineBlock(first, data, lines, expected)

        held = b""  # whole lines read, yielded once the next read shows whether they are last
        carry = b""  # the start of a line
        while True:
            piece = fh.read(size)
            if not piece:
                if held or carry:  # (a last line without a newline joins the last block)
                    yield block(held + carry)
                return
            data = carry + piece if carry else piece
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                carry = data  # (a line longer than a block: read on)
                continue
            if held:
                done = block(held)
                yield done
                first += done.lines
            held, carry = (data, b"") if cut == len(data) else (data[:cut], data[cut:])


def field_count_problems(
    lines: pl.Series | tuple[np.ndarray, np.ndarray],
    expected: int,
    *,
    first: int,
    separator: str = ",",
) -> tuple[np.ndarray, list[BadRow]]:
    """Return (mask of rows to drop, bad rows) for data lines from index ``first`` on.

    A line whose field count differs from the header's is a bad row, always: lines merged by
    two writers, or cut short, cannot be taken field by field. Blank lines are dropped and not
    reported (they hold no row). The mask covers ``lines[first:]``; ``lines`` is the file's
    lines, or :func:`line_shapes` of it.
    """
    if isinstance(lines, tuple):
        counts, blank = lines[0][first:], lines[1][first:]
    else:
        data = lines.slice(first)
        counts = (data.str.count_matches(separator, literal=True) + 1).fill_null(0).to_numpy()
        off = np.flatnonzero(counts != expected)
        # Only lines with the wrong count can be blank (a blank line has one field or none).
        blank_at = off[(data.gather(off).fill_null("").str.strip_chars() == "").to_numpy()]
        blank = np.zeros(counts.size, dtype=bool)
        blank[blank_at] = True
    off = np.flatnonzero(counts != expected)
    wrong = np.zeros(counts.size, dtype=bool)
    wrong[off] = True
    wrong &= ~blank
    bad = [
        (int(i) + first + 1, f"{counts[i]} fields, the header has {expected}")
        for i in np.flatnonzero(wrong)
    ]
    return blank | wrong, bad


def short_last_line(lines: pl.Series | tuple[np.ndarray, np.ndarray], width: int) -> int:
    """Return the number of the last non-blank line if it has fewer fields than ``width``, else
    0 (a logger killed mid-write leaves such a line). ``lines`` as for field_count_problems."""
    if isinstance(lines, tuple):
        counts, blank = lines
        filled = np.flatnonzero(~blank)
        if filled.size < 2:
            return 0
        last = int(filled[-1])
        return last + 1 if counts[last] < width else 0
    last = lines.len() - 1
    while last > 0 and not (lines[last] or "").strip():
        last -= 1  # trailing blank lines
    if last < 1:
        return 0
    return last + 1 if str(lines[last]).count(",") + 1 < width else 0


def resolve_bad_rows(
    path: Path,
    bad: list[BadRow],
    *,
    last_line: int,
    skip: bool,
    warnings: list[str],
) -> list[BadRow]:
    """Decide what malformed rows mean; return the rows dropped. ``bad`` is in any order.

    A single bad row on the file's last line is a logger killed mid-write: dropped with a
    warning. Otherwise the first bad row is an error naming its line, unless ``skip``
    (``--skip-bad-rows``), which drops them all with a warning that counts them and names the
    first lines.
    """
    if not bad:
        return []
    bad = sorted(bad)
    first_line, problem = bad[0]
    if len(bad) == 1 and first_line == last_line:
        warnings.append(f"{path}: line {first_line}: truncated final line dropped")
    elif skip:
        shown = ", ".join(str(n) for n, _ in bad[:_SHOWN]) + (", ..." if len(bad) > _SHOWN else "")
        warnings.append(
            f"{path}: skipped {len(bad)} bad row(s) at line(s) {shown} "
            f"(first: line {first_line}: {problem})"
        )
    else:
        more = f"; {len(bad) - 1} more bad row(s)" if len(bad) > 1 else ""
        raise BadInputError(
            f"{path}: line {first_line}: {problem}{more} (use {option('skip-bad-rows')} to drop "
            "such rows)"
        )
    return bad
