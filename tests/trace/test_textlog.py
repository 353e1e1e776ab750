"""The pieces text readers share: a file read in blocks of lines, and the far-outside check fed
a block at a time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from powerkit.trace.readers.outliers import FarOutside, time_problems
from powerkit.trace.readers.textlog import line_blocks, line_shapes

_LINE = st.text(alphabet="ab, \r", max_size=30)


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(_LINE, max_size=40), end=st.booleans(), size=st.integers(1, 64))
def test_line_blocks_tile_the_file(
    tmp_path_factory, lines: list[str], end: bool, size: int
) -> None:
    """Blocks hold whole lines, in order, every byte once; a last line without a newline
    joins the last block; field counts match a per-line count."""
    path = tmp_path_factory.mktemp("blocks") / "f.csv"
    text = "\n".join(lines) + ("\n" if end and lines else "")
    path.write_bytes(text.encode())
    blocks = list(line_blocks(path, 2, size))
    assert b"".join(b.data for b in blocks) == text.encode()
    assert all(b.data.endswith(b"\n") for b in blocks[:-1])
    assert [b.first for b in blocks] == list(np.cumsum([0] + [b.lines for b in blocks])[:-1])
    want = text.split("\n")[:-1] if text.endswith("\n") else (text.split("\n") if text else [])
    assert sum(b.lines for b in blocks) == len(want)
    counts, blank = line_shapes(path, 2)
    assert counts.tolist() == [line.count(",") + 1 for line in want]
    assert blank.tolist() == [line.count(",") != 1 and not line.strip() for line in want]


def _times(rng: np.random.Generator) -> np.ndarray:
    """A run at 0.1 s with a few samples hours away, and a long stall."""
    t = np.cumsum(rng.integers(90_000, 110_000, 5_000)).astype(np.int64)
    t[:2] -= 7_200_000_000  # two samples two hours before the run
    t[3000:] += 600_000_000  # a ten-minute stall: both sides are large
    t[-1] += 86_400_000_000  # one a day after
    return t


def test_far_outside_fed_in_blocks_finds_what_the_whole_check_finds() -> None:
    rng = np.random.default_rng(3)
    t = _times(rng)
    series = np.arange(t.size) % 4
    lines = np.arange(t.size) + 2
    whole = time_problems(t, series, lines)
    assert [n for n, _ in whole] == [2, 3, t.size + 1]
    assert "outside the rest of the run" in whole[0][1]
    for block in (1, 7, 999, t.size):
        scan = FarOutside(t.size * 3)  # (an upper bound of the rows, as a file's size gives)
        for lo in range(0, t.size, block):
            scan.add(t[lo : lo + block], series[lo : lo + block], lines[lo : lo + block])
        found = scan.problems()
        assert sorted((n, p) for n, p, _, _ in found) == whole
        assert [(s, tt) for n, _, s, tt in found] == [(series[n - 2], t[n - 2]) for n, _ in whole]


def test_far_outside_joins_stretches_once_the_nominal_interval_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A minute-level log (every step over the 60 s least gap) is one run, and what the
    check holds shrinks to it once the first rows have told the nominal interval."""
    from powerkit.trace.readers import outliers

    monkeypatch.setattr(outliers, "_HEAD_ROWS", 2_000)  # (the head: 2,000 rows, not 200,000)
    rng = np.random.default_rng(5)
    t = np.cumsum(rng.integers(60_100_000, 60_900_000, 3_000)).astype(np.int64)
    t[-1] += 40 * 86_400_000_000  # forty days after the run
    series = np.zeros(t.size, dtype=np.int64)
    lines = np.arange(t.size) + 2
    scan = FarOutside(t.size)
    scan.add(t[:2_500], series[:2_500], lines[:2_500])
    assert len(scan._segments) == 1  # (joined once the head was read)
    scan.add(t[2_500:], series[2_500:], lines[2_500:])
    assert [n for n, _, _, _ in scan.problems()] == [t.size + 1]
    assert time_problems(t, series, lines) == [(n, p) for n, p, _, _ in scan.problems()]


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="ab, ", max_size=12), min_size=1, max_size=25),
    width=st.integers(2, 4),
)
def test_fields_all_whole_only_when_every_line_has_the_header_count(
    lines: list[str], width: int
) -> None:
    """The shortcut never vouches for a log with a line of another field count: a CSV read
    of the lines as wide as the header, its last field, and the commas in all."""
    import io

    import polars as pl

    from powerkit.trace.readers.textlog import fields_all_whole

    data = ("\n".join(lines) + "\n").encode()
    header = ",".join(f"c{i}" for i in range(width)).encode() + b"\n"
    df = pl.read_csv(
        io.BytesIO(header + data),
        has_header=True,
        infer_schema=False,
        truncate_ragged_lines=True,
        quote_char=None,
    )
    if df.height != len(lines):
        return  # (a read that splits otherwise: the reader refuses it)
    if fields_all_whole(data.count(b","), df.height, width, df[f"c{width - 1}"]):
        assert all(line.count(",") == width - 1 for line in lines)
