"""Arrow string columns of one repeated value, built and recognized from their buffers.

A trace's host column is most often one name repeated millions of times. Building it from a
one-entry dictionary, or testing it with ``pyarrow.compute``, costs the import of the compute
module (35 ms at every start, measured) and a pass of string work; the buffers of a string
array (offsets and bytes) make both a matter of a few NumPy operations.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["one_value", "repeated"]


def repeated(value: str, n: int) -> pa.Array:
    """A ``string`` array of ``n`` copies of ``value``."""
    data = value.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(data)
    if offsets[-1] < 2**31:
        return pa.Array.from_buffers(
            pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data * n)]
        )
    return pa.Array.from_buffers(  # (more than 2 GiB of text: 64-bit offsets, then string)
        pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)]
    ).cast(pa.string())


def one_value(column: pa.ChunkedArray | pa.Array) -> str | None:
    """The value every cell of a string column holds, or None (several values, a null, an
    empty column, another type)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    first: bytes | None = None
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        if chunk.type not in (pa.string(), pa.large_string()) or chunk.null_count:
            return None
        width = np.int64 if chunk.type == pa.large_string() else np.int32
        _, offsets_buf, data_buf = chunk.buffers()
        offsets = np.frombuffer(offsets_buf, dtype=width)[
            chunk.offset : chunk.offset + len(chunk) + 1
        ]
        lengths = np.diff(offsets)
        size = int(lengths[0])
        data = (
            np.frombuffer(data_buf, dtype=np.uint8)
            if data_buf is not None
            else np.empty(0, np.uint8)
        )
        value = data[int(offsets[0]) : int(offsets[0]) + size].tobytes()
        if first is None:
            first = value
        if value != first or np.any(lengths != size):
            return None
        if size:  # every cell the same length: the bytes must repeat the first cell's
            cells = data[int(offsets[0]) : int(offsets[-1])].reshape(len(chunk), size)
            if np.any(cells != np.frombuffer(first, dtype=np.uint8)):
                return None
    return None if first is None else first.decode()
