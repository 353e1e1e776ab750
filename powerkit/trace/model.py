"""The Trace object every analysis takes: canonical data (in memory or Parquet on disk) + meta."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from powerkit.trace.schema import TraceMeta

__all__ = ["Trace"]


@dataclass
class Trace:
    """A canonical trace: either an Arrow table or canonical Parquet file(s), plus metadata.

    Parquet-backed traces stay on disk: :meth:`register` lets DuckDB scan them out-of-core.
    ``warnings`` lists what the reader noticed and repaired (dropped truncated line, ...).
    """

    meta: TraceMeta
    table_: pa.Table | None = None
    files: tuple[Path, ...] = ()
    origin: str = ""
    warnings: list[str] = field(default_factory=list)

    def table(self) -> pa.Table:
        """Return the whole trace as an Arrow table (loads Parquet files into memory)."""
        if self.table_ is None:
            tables = [pq.read_table(f) for f in self.files]
            self.table_ = pa.concat_tables(tables, promote_options="default")
        return self.table_

    def register(self, con: duckdb.DuckDBPyConnection, name: str = "trace") -> None:
        """Create view ``name`` over the trace on a DuckDB connection (no copy for Parquet)."""
        if self.table_ is None and self.files:
            paths = ", ".join("'" + str(f).replace("'", "''") + "'" for f in self.files)
            con.execute(
                f"CREATE OR REPLACE VIEW {name} AS "
                f"SELECT * FROM read_parquet([{paths}], union_by_name = true)"
            )
        else:
            con.register(f"{name}_arrow", self.table())
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {name}_arrow")
