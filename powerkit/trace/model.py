"""The Trace object every analysis takes: canonical data (in memory or Parquet on disk) + meta."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from powerkit.core import db

if TYPE_CHECKING:
    import duckdb
from powerkit.core.arrowtext import one_value
from powerkit.core.errors import BadInputError
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
    #: (line number, problem) of every malformed row the reader dropped (--skip-bad-rows)
    bad_rows: list[tuple[int, str]] = field(default_factory=list)
    #: the time slice [from, to) in epoch µs (``--from`` / ``--to``); None: unbounded
    slice_us: tuple[int | None, int | None] = (None, None)
    #: False when no file of a Parquet trace has the optional energy_j column
    has_energy: bool = True
    #: only these hosts' samples (``--hosts``); None: all
    hosts: tuple[str, ...] | None = None
    #: the largest power_w the Parquet footers know of (None: unknown, or in memory)
    power_peak_w: float | None = None
    #: the one host every Parquet footer shows (None: several, unknown, or in memory): a
    #: scan then cuts series where the GPU changes, without counting them first
    one_host: str | None = None

    @property
    def sliced(self) -> bool:
        """Return True when ``--from`` or ``--to`` cut the trace."""
        return self.slice_us != (None, None)

    def _where(self) -> str:
        lo, hi = self.slice_us
        parts = [
            f"epoch_us(ts) >= {int(lo)}" if lo is not None else "",
            f"epoch_us(ts) < {int(hi)}" if hi is not None else "",
        ]
        if self.hosts is not None:
            names = ", ".join("'" + h.replace("'", "''") + "'" for h in self.hosts)
            parts.append(f"host IN ({names})")
        text = " AND ".join(p for p in parts if p)
        return f" WHERE {text}" if text else ""

    def column_names(self) -> set[str]:
        """Return the columns of the trace (over all its files), without reading any data."""
        if self.table_ is not None or not self.files:
            return set(self.table().column_names)
        return {name for f in self.files for name in pq.read_schema(f).names}

    def bad_rows_summary(self, shown: int = 50) -> dict[str, int | list[int] | list[str]]:
        """The reader's dropped rows as {count, lines, problems} (the first ``shown``)."""
        rows = self.bad_rows
        return {
            "count": len(rows),
            "lines": [n for n, _ in rows[:shown]],
            "problems": [f"line {n}: {p}" for n, p in rows[:shown]],
        }

    def table(self) -> pa.Table:
        """Return the whole trace as an Arrow table (loads Parquet files into memory)."""
        if self.table_ is None:
            tables = [pq.read_table(f) for f in self.files]
            self.table_ = self._cut(pa.concat_tables(tables, promote_options="default"))
        return self.table_

    def _cut(self, table: pa.Table) -> pa.Table:
        import pyarrow.compute as pc

        if self.hosts is not None:
            table = table.filter(pc.is_in(table.column("host"), pa.array(self.hosts)))
        lo, hi = self.slice_us
        if lo is None and hi is None:
            return table
        t = table.column("ts").cast(pa.int64())
        masks = ([pc.greater_equal(t, lo)] if lo is not None else []) + (
            [pc.less(t, hi)] if hi is not None else []
        )
        keep = masks[0] if len(masks) == 1 else pc.and_(*masks)
        return table.filter(keep)

    def keep_hosts(self, hosts: tuple[str, ...]) -> None:
        """Keep only the samples of ``hosts`` (whole series: the series index stays valid)."""
        self.hosts = hosts
        if self.index is not None:
            self.index = [run for run in self.index if run[0] in hosts]
        if self.table_ is not None:
            self.table_ = self._cut(self.table_)
        self.meta.gpus = [g for g in self.meta.gpus if g.host in hosts]

    def cut(self, lo_us: int | None, hi_us: int | None) -> None:
        """Keep only samples with ``lo_us <= ts < hi_us`` (epoch µs; None: unbounded)."""
        self.slice_us = (lo_us, hi_us)
        self.index = None  # row counts of the whole trace no longer hold
        if self.table_ is not None:
            self.table_ = self._cut(self.table_)

    def series_runs(self) -> list[tuple[str, int, int]] | None:
        """Return (host, gpu, rows) per run of one series, in storage order, or None.

        Canonical Parquet files written by powerkit carry this index in their footer; an
        in-memory table computes it. None means unknown (a foreign Parquet file).
        """
        if self.index is None and self.table_ is not None:
            self.index = series_runs_of(self.table_)
        return self.index if self.table_ is not None or not self.sliced else None

    def span_us(self, *, allow_empty: bool = False) -> tuple[int, int]:
        """Return (first, last) sample time in epoch µs; (0, 0) for no samples if allowed.

        Parquet row-group statistics make this cheap on disk.
        """
        first, last, _ = self.extent(allow_empty=allow_empty)
        return first, last

    def extent(self, *, allow_empty: bool = False) -> tuple[int, int, int]:
        """Return (first, last sample time in epoch µs, samples); zeros if allowed when empty."""
        con = db.connect()
        try:
            self.register(con)
            row = con.execute("SELECT epoch_us(min(ts)), epoch_us(max(ts)), count(*) FROM trace")
            first = row.fetchone()
        finally:
            con.close()
        if first is None or not first[2]:
            if allow_empty:
                return 0, 0, 0
            raise BadInputError(f"{self.origin}: no samples (empty trace)")
        return int(first[0]), int(first[1]), int(first[2])

    def register(self, con: duckdb.DuckDBPyConnection, name: str = "trace") -> None:
        """Create view ``name`` over the trace on a DuckDB connection (no copy for Parquet)."""
        if self.table_ is None and self.files:
            # energy_j is optional in a foreign file; the analyses' SQL reads it everywhere.
            energy = "" if self.has_energy else ", NULL::DOUBLE AS energy_j"
            con.execute(
                f"CREATE OR REPLACE VIEW {name} AS SELECT *{energy} "
                f"FROM {_parquet_source(con, name, self.files)}{self._where()}"
            )
        else:
            con.register(f"{name}_arrow", self.table())
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {name}_arrow")


#: characters DuckDB's read_parquet expands as a pattern; it has no way to escape them
_GLOB_CHARS = frozenset("*?[]{}")


def _parquet_source(con: duckdb.DuckDBPyConnection, name: str, files: tuple[Path, ...]) -> str:
    """The FROM clause that reads exactly ``files``: each path taken as written (never as a
    pattern), and no hive partition read from folder names (a ``power_w=5/`` folder must not
    become a column). A path DuckDB would expand as a pattern is read through Arrow."""
    if not any(_GLOB_CHARS & set(str(f)) for f in files):
        paths = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
        return f"read_parquet([{paths}], union_by_name = true, hive_partitioning = false)"
    import pyarrow.dataset as ds

    schema = pa.unify_schemas([pq.read_schema(f) for f in files], promote_options="permissive")
    con.register(f"{name}_files", ds.dataset([str(f) for f in files], schema=schema))
    return f"{name}_files"


def series_runs_of(table: pa.Table) -> list[tuple[str, int, int]]:
    """Return (host, gpu, rows) for each run of consecutive rows of one series in ``table``."""
    if table.num_rows == 0:
        return []
    column = table.column("host")
    gpu = table.column("gpu").to_numpy()
    single = one_value(column)
    if single is not None:  # one host: no encoding
        names, codes = [single], np.zeros(table.num_rows, dtype=np.int8)
        change = gpu[1:] != gpu[:-1]
    else:
        import pyarrow.compute as pc

        host = pc.dictionary_encode(column).combine_chunks()
        names, codes = host.dictionary.to_pylist(), host.indices.to_numpy(zero_copy_only=False)
        change = (codes[1:] != codes[:-1]) | (gpu[1:] != gpu[:-1])
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    stops = np.concatenate((starts[1:], [table.num_rows]))
    return [
        (names[int(codes[a])], int(gpu[a]), int(b - a))
        for a, b in zip(starts.tolist(), stops.tolist(), strict=True)
    ]
