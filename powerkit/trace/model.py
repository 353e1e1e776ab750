"""The Trace object every analysis takes: canonical data (in memory or Parquet on disk) + meta."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from powerkit.trace.schema import TraceMeta

__all__ = ["Trace", "series_runs_of"]


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
    #: (host, gpu, rows) of each run of rows, in storage order, when known (see series_runs).
    index: list[tuple[str, int, int]] | None = None

    def table(self) -> pa.Table:
        """Return the whole trace as an Arrow table (loads Parquet files into memory)."""
        if self.table_ is None:
            tables = [pq.read_table(f) for f in self.files]
            self.table_ = pa.concat_tables(tables, promote_options="default")
        return self.table_

    def series_runs(self) -> list[tuple[str, int, int]] | None:
        """Return (host, gpu, rows) per run of one series, in storage order, or None.

        Canonical Parquet files written by powerkit carry this index in their footer; an
        in-memory table computes it. None means unknown (a foreign Parquet file).
        """
        if self.index is None and self.table_ is not None:
            self.index = series_runs_of(self.table_)
        return self.index

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


def series_runs_of(table: pa.Table) -> list[tuple[str, int, int]]:
    """Return (host, gpu, rows) for each run of consecutive rows of one series in ``table``."""
    if table.num_rows == 0:
        return []
    host = pc.dictionary_encode(table.column("host")).combine_chunks()
    codes = host.indices.to_numpy(zero_copy_only=False)
    gpu = table.column("gpu").to_numpy()
    change = (codes[1:] != codes[:-1]) | (gpu[1:] != gpu[:-1])
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    stops = np.concatenate((starts[1:], [table.num_rows]))
    names = host.dictionary.to_pylist()
    return [
        (names[int(codes[a])], int(gpu[a]), int(b - a))
        for a, b in zip(starts.tolist(), stops.tolist(), strict=True)
    ]
