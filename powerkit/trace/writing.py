"""Writing canonical traces: one Parquet file (``write_trace``, or sorted out of core by
``write_sorted``) and a recording's parts (``SeriesParts``, ``PartsWriter``); every write
atomic. A dataset of such files: ``powerkit.trace.dataset``."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

from powerkit.core.db import connect
from powerkit.core.errors import BadInputError, option
from powerkit.core.outputs import atomic_path, is_temp
from powerkit.trace.model import Trace, series_runs_of
from powerkit.trace.schema import (
    INDEX_KEY,
    LABEL_PREFIX,
    METADATA_KEY,
    OPTIONAL_FLOAT_COLUMNS,
    OPTIONAL_INT_COLUMNS,
    POWER_MAX_W,
    TIME_RANGE_US,
    TraceMeta,
)

#: the metadata key of a recording's part file naming the recording it is part of
PART_OF = "part_of_recording"

_DICTIONARY_COLUMNS = ("host", "gpu", "phase", "step", "group_size", "concurrency")


#: rows per row group of a canonical file (what a reader holds at a time)
ROW_GROUP_ROWS = 1_000_000


def _writer_options(names: list[str]) -> dict[str, object]:
    """How a canonical file is written: zstd, dictionaries for the repetitive columns (on
    measurements they cost time), and the times as deltas (``DELTA_BINARY_PACKED``: a
    series' steps are nearly equal, so the column is 40 % of the file it was, and both the
    write and a DuckDB scan of it take about half as long: docs/benchmarks.md)."""
    return {
        "compression": "zstd",
        "use_dictionary": [c for c in _DICTIONARY_COLUMNS if c in names],
        "column_encoding": {"ts": "DELTA_BINARY_PACKED"} if "ts" in names else None,
    }


def write_trace(table: pa.Table, meta: TraceMeta, path: Path, *, sync: bool = True) -> Path:
    """Write a canonical table atomically (temp file in the same folder, then rename)."""
    path = Path(path)
    index = json.dumps(series_runs_of(table), separators=(",", ":")).encode()
    schema = table.schema.with_metadata({METADATA_KEY: meta.to_json().encode(), INDEX_KEY: index})
    with atomic_path(path, sync=sync) as tmp:
        options = _writer_options(table.column_names)
        pq.write_table(
            table.replace_schema_metadata(schema.metadata),
            tmp,
            row_group_size=ROW_GROUP_ROWS,
            **options,
        )
    return path


class SeriesParts:
    """The part files of a log read a block at a time: one Arrow IPC file per series (host,
    gpu), each block's rows of a series appended to it as a record batch. Written and read
    back a batch at a time, uncompressed: they cost little time and hold no memory, and
    taken series after series they are the trace in (host, gpu, ts) order when the blocks
    came in time order (:meth:`write` writes them so, without a sort)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._writers: dict[tuple[str, int], tuple[Path, pa.ipc.RecordBatchFileWriter]] = {}
        self.rows: dict[tuple[str, int], int] = {}
        self.schema: pa.Schema | None = None

    def append(self, table: pa.Table) -> None:
        """Append a canonical table's rows, sorted by (host, gpu, ts), to their series' files."""
        offset = 0
        self.schema = self.schema or table.schema
        for host, gpu, n in series_runs_of(table):
            key = (host, gpu)
            if key not in self._writers:
                file = self.folder / f"series-{len(self._writers):05d}.arrow"
                self._writers[key] = (file, pa.ipc.new_file(file, self.schema))
            self._writers[key][1].write_table(table.slice(offset, n))
            self.rows[key] = self.rows.get(key, 0) + n
            offset += n

    def close(self) -> None:
        """Close every file (whatever state it is in: the parts may be thrown away next)."""
        for _, writer in self._writers.values():
            with contextlib.suppress(Exception):
                writer.close()

    def _batches(self, key: tuple[str, int]) -> Iterator[pa.RecordBatch]:
        with open(self._writers[key][0], "rb") as fh:  # (read, not mapped: memory holds a batch)
            reader = pa.ipc.open_file(fh)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)

    def head(self, rows: int, columns: list[str]) -> pa.Table:
        """The first ``rows`` rows of the trace the parts make (closed, holding rows), in
        order."""
        batches, n = [], 0
        for key in sorted(self._writers):
            for batch in self._batches(key):
                batches.append(batch.select(columns))
                n += batch.num_rows
                if n >= rows:
                    return pa.Table.from_batches(batches).slice(0, rows)
        return pa.Table.from_batches(batches)

    def drop(self, keys: set[tuple[int, int]]) -> None:
        """Rewrite the (closed) files holding rows whose (gpu, µs since the epoch) is in
        ``keys`` without them, a batch at a time."""
        for key in sorted(self._writers):
            if not any(g == key[1] for g, _ in keys):
                continue
            file = self._writers[key][0]
            out = file.with_name(file.name + ".tmp")
            kept_rows = 0
            with pa.ipc.new_file(out, self.schema) as writer:
                for batch in self._batches(key):
                    times = batch.column("ts").cast(pa.int64()).to_pylist()
                    mask = [(key[1], t) not in keys for t in times]
                    kept = batch.filter(pa.array(mask))
                    writer.write_batch(kept)
                    kept_rows += kept.num_rows
            out.replace(file)
            self.rows[key] = kept_rows

    def write(self, meta: TraceMeta, path: Path) -> list[tuple[str, int, int]]:
        """Write the (closed) parts as one canonical file, series after series without a sort
        (memory holds a row group, a million rows); return its series index."""
        runs = [(h, g, self.rows[(h, g)]) for h, g in sorted(self._writers) if self.rows[(h, g)]]
        if self.schema is None:
            raise BadInputError(f"{path}: no samples (empty trace)")
        kv = {
            METADATA_KEY: meta.to_json().encode(),
            INDEX_KEY: json.dumps(runs, separators=(",", ":")).encode(),
        }
        schema = self.schema.with_metadata(kv)
        with (
            atomic_path(Path(path)) as tmp,
            pq.ParquetWriter(tmp, schema, **_writer_options(schema.names)) as writer,
        ):
            pending: list[pa.RecordBatch] = []
            count = 0
            for key in sorted(self._writers):
                for batch in self._batches(key):
                    pending.append(batch)
                    count += batch.num_rows
                    if count >= ROW_GROUP_ROWS:  # (slices of the batches: no copy)
                        table = pa.Table.from_batches(pending)
                        writer.write_table(
                            table.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS
                        )
                        rest = table.slice(ROW_GROUP_ROWS)
                        pending = rest.to_batches()
                        count = rest.num_rows
            if count:
                writer.write_table(
                    pa.Table.from_batches(pending, schema=self.schema),
                    row_group_size=ROW_GROUP_ROWS,
                )
        return runs


class PartsWriter:
    """Writes a recording as numbered, individually complete Parquet part files.

    Each flushed chunk is its own file (written atomically), so a recording killed even by
    SIGKILL leaves a folder that powerkit reads as a trace; :meth:`finalize` merges the parts
    into one sorted canonical file and removes the folder.
    """

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.parts_dir = self.out.with_name(self.out.name + ".parts")
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.rows = 0
        #: marks each part as this recording's (``record --recover`` never merges two)
        self.recording_id = uuid.uuid4().hex

    def write(self, table: pa.Table, meta: TraceMeta) -> None:
        """Write one chunk as the next part file."""
        if table.num_rows == 0:
            return
        marked = dataclasses.replace(meta, extra={**meta.extra, PART_OF: self.recording_id})
        write_trace(table, marked, self.parts_dir / f"part-{self.count:06d}.parquet", sync=False)
        self.count += 1
        self.rows += table.num_rows

    def finalize(self, meta: TraceMeta) -> Path | None:
        """Merge all parts into ``out`` (sorted out of core, with final metadata); return it or
        None when nothing was recorded. Temp files of a part write cut short are removed."""
        parts = sorted(self.parts_dir.glob("part-*.parquet"))
        if not parts:
            for leftover in self.parts_dir.iterdir():
                if is_temp(leftover):
                    leftover.unlink()
            self.parts_dir.rmdir()
            return None
        has_energy = any("energy_j" in pq.read_schema(p).names for p in parts)
        merged = Trace(
            meta=meta, files=tuple(parts), origin=str(self.parts_dir), has_energy=has_energy
        )
        write_sorted(merged, meta, self.out)
        for p in self.parts_dir.iterdir():
            p.unlink()
        self.parts_dir.rmdir()
        return self.out


def write_sorted(
    trace: Trace, meta: TraceMeta, path: Path, *, where: str = "", memory_limit: str | None = None
) -> list[tuple[str, int, int]]:
    """Write ``trace`` (Parquet on disk, or a table) as one canonical file sorted by (host,
    gpu, ts); ``where``: only the rows this SQL condition keeps (a dataset partition).

    Return its series index, (host, gpu, rows) per series. DuckDB sorts out of core (within
    powerkit.core.db's memory limit), so memory does not grow with the trace; the rows are checked
    as :func:`powerkit.trace.schema.to_canonical` checks them, and the footer gets the metadata
    and the series index. ``memory_limit``: DuckDB's, for this write (see powerkit.core.db).
    """
    con = connect(memory_limit)
    try:
        trace.register(con)
        if where:
            con.execute(f"CREATE OR REPLACE VIEW part AS SELECT * FROM trace WHERE {where}")
        table = "part" if where else "trace"
        present = {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
        row = con.execute(
            _CHECK_SQL.replace("FROM trace", f"FROM {table}"), [POWER_MAX_W]
        ).fetchone()
        assert row is not None
        rows, bad, first_us, last_us = row
        if not rows:
            raise BadInputError(f"{trace.origin}: no samples (empty trace)")
        if bad:
            raise BadInputError(
                f"{trace.origin}: {bad} sample(s) with missing, NaN, infinite, negative or "
                "out-of-range power, or no time, host or GPU"
            )
        if first_us < TIME_RANGE_US[0] or last_us >= TIME_RANGE_US[1]:
            raise BadInputError(f"{trace.origin}: a sample's time is outside 1970-2199")
        index = con.execute(
            f"SELECT host, gpu, count(*) FROM {table} GROUP BY host, gpu ORDER BY host, gpu"
        ).fetchall()
        columns = [f"{c}::{t}" + f" AS {c}" for c, t in _SQL_TYPES.items() if c in present]
        columns += [f"{c}::VARCHAR AS {c}" for c in sorted(present) if c.startswith(LABEL_PREFIX)]
        if "energy_j" not in present:
            columns.insert(4, "NULL::DOUBLE AS energy_j")
        kv = {
            METADATA_KEY.decode(): meta.to_json(),
            INDEX_KEY.decode(): json.dumps([[h, int(g), int(n)] for h, g, n in index]),
        }
        metadata = ", ".join(f"'{k}': {sql_text(v)}" for k, v in kv.items())
        runs = [(str(h), int(g), int(n)) for h, g, n in index]
        with atomic_path(Path(path)) as tmp:
            con.execute(
                f"COPY (SELECT {', '.join(columns)} FROM {table} ORDER BY host, gpu, ts) "
                f"TO {sql_text(str(tmp))} (FORMAT parquet, COMPRESSION zstd, "
                f"ROW_GROUP_SIZE 1000000, KV_METADATA {{{metadata}}})"
            )
            _refuse_repeats(tmp, runs, trace.origin)
        return runs
    finally:
        con.close()


def _refuse_repeats(path: Path, runs: list[tuple[str, int, int]], origin: str) -> None:
    """Refuse a sorted file in which a series holds a time twice (rows of one GPU at one time:
    never merged, never counted twice), reading its times a batch at a time."""
    starts = np.cumsum([0, *(n for _, _, n in runs)])
    offset, last, found, first = 0, None, 0, None
    for batch in pq.ParquetFile(path).iter_batches(columns=["ts"], batch_size=1 << 20):
        t = batch.column(0).cast(pa.int64()).to_numpy()
        joined = t if last is None else np.r_[last, t]
        # the row (of the whole file) that repeats the one before it
        at = np.flatnonzero(joined[1:] == joined[:-1]) + offset + (1 if last is None else 0)
        at = at[~np.isin(at, starts)]  # (the first row of a series repeats nothing)
        found += at.size
        if first is None and at.size:
            first = int(at[0])
        offset += t.size
        last = t[-1:]
    if first is None:
        return
    k = int(np.searchsorted(starts, first, side="right")) - 1
    host, gpu, _ = runs[k]
    raise BadInputError(
        f"{origin}: {found} sample(s) repeat a time their GPU already has (first host={host} "
        f"gpu={gpu}): rows of one GPU at one time are never merged; if the device is in "
        f"another column, name it with {option('map')}"
    )


def sql_text(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


# Canonical columns and their DuckDB types, in canonical order.
_SQL_TYPES = {
    "ts": "TIMESTAMPTZ",
    "host": "VARCHAR",
    "gpu": "SMALLINT",
    "power_w": "FLOAT",
    "energy_j": "DOUBLE",
    **{c: "FLOAT" for c in OPTIONAL_FLOAT_COLUMNS},
    **{c: "BIGINT" for c in OPTIONAL_INT_COLUMNS},
    "step": "BIGINT",
    "phase": "VARCHAR",
    "tokens": "BIGINT",
    "group_size": "INTEGER",
    "concurrency": "INTEGER",
}


_CHECK_SQL = """
SELECT count(*),
       count(*) FILTER (WHERE power_w IS NULL OR NOT isfinite(power_w) OR power_w < 0
                        OR power_w > ? OR ts IS NULL OR host IS NULL OR gpu IS NULL),
       epoch_us(min(ts)), epoch_us(max(ts))
FROM trace
"""
