"""The DuckDB connection every scan uses: quiet, with a memory limit and a spill folder.

DuckDB sorts and aggregates out of core when it reaches its memory limit, spilling to the temp
folder; without a limit it would take most of the machine's memory for a large sort. The limit
is ``POWERKIT_DUCKDB_MEMORY`` (default 1GB), the folder ``POWERKIT_DUCKDB_TEMP`` (default a
``powerkit-duckdb`` folder in the system's temp folder).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

__all__ = ["connect"]


def connect(memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """Return an in-memory DuckDB connection that prints nothing and spills instead of growing.

    ``memory_limit``: a job's own smaller limit (a streamed import, whose promise is bounded
    memory); ``POWERKIT_DUCKDB_MEMORY``, when set, wins over it.
    """
    import duckdb  # (loaded with the first scan: reading a text log needs none)

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    limit = os.environ.get("POWERKIT_DUCKDB_MEMORY") or memory_limit or "1GB"
    spill = os.environ.get("POWERKIT_DUCKDB_TEMP") or str(
        Path(tempfile.gettempdir()) / "powerkit-duckdb"
    )
    con.execute("SET memory_limit = ?", [limit])
    if memory_limit is not None:
        # a small limit is shared by DuckDB's threads: more than two would each get too little
        # to sort with (an out-of-memory error on a many-core machine instead of a spill)
        con.execute("SET threads = ?", [min(2, os.cpu_count() or 1)])
    con.execute("SET temp_directory = ?", [spill])
    return con
