"""String columns of one repeated value, built and recognized from their buffers."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from powerkit.core.arrowtext import one_value, repeated

cells = st.lists(st.one_of(st.none(), st.sampled_from(["n0", "n1", "", "é", "n00", "0n"])))


@given(cells, st.integers(0, 3), st.integers(0, 3), st.booleans())
def test_one_value_is_the_value_every_cell_holds(
    values: list[str | None], cut_front: int, cut_back: int, large: bool
) -> None:
    kind = pa.large_string() if large else pa.string()
    whole = pa.array(["x"] * cut_front + values + ["y"] * cut_back, kind)
    sliced = whole.slice(cut_front, len(values))  # an offset into shared buffers
    distinct = set(values)
    expected = values[0] if values and len(distinct) == 1 and None not in distinct else None
    assert one_value(sliced) == expected
    chunked = pa.chunked_array([sliced, pa.array(values[:1], kind)], kind)
    assert one_value(chunked) == expected


@given(st.sampled_from(["n0", "", "host-é"]), st.integers(0, 50))
def test_repeated_builds_the_column(value: str, n: int) -> None:
    column = repeated(value, n)
    assert column.type == pa.string() and column.to_pylist() == [value] * n
    assert one_value(column) == (value if n else None)


def test_other_types_are_not_one_value() -> None:
    assert one_value(pa.array([1, 1])) is None
    assert one_value(pa.chunked_array([], pa.string())) is None
