"""Canonical Parquet: atomic writes, chunked part files for recording, and reading back."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc
import pyarrow.parquet as pq

from powerkit.db import connect
from powerkit.errors import BadInputError
from powerkit.outputs import atomic_path, is_temp
from powerkit.trace.dataset import dataset_files, partition_of
from powerkit.trace.model import Trace, series_runs_of
from powerkit.trace.schema import (
    INDEX_KEY,
    LABEL_PREFIX,
    METADATA_KEY,
    OPTIONAL_FLOAT_COLUMNS,
    OPTIONAL_INT_COLUMNS,
    POWER_MAX_W,
    TIME_RANGE_US,
    GpuMeta,
    TraceMeta,
    implausible_power,
    power_ceiling_w,
)

__all__ = [
    "PartsWriter",
    "SeriesParts",
    "check_trace_plausible",
    "merge_meta",
    "read_parquet_trace",
    "write_sorted",
    "write_trace",
]


_DICTIONARY_COLUMNS = ("host", "gpu", "phase", "step", "group_size", "concurrency")
#: rows per row group of a canonical file (what a reader holds at a time)
ROW_GROUP_ROWS = 1_000_000


def _writer_options(names: list[str]) -> dict[str, object]:
    """How a canonical file is written: zstd, and dictionaries for the repetitive columns
    (on measurements they cost time)."""
    return {"compression": "zstd", "use_dictionary": [c for c in _DICTIONARY_COLUMNS if c in names]}


def write_trace(table: pa.Table, meta: TraceMeta, path: Path, *, sync: bool = True) -> Path:
    """Write a canonical table atomically (temp file in the same folder, then rename)."""
    path = Path(path)
    index = json.dumps(series_runs_of(table), separators=(",", ":")).encode()
    schema = table.schema.with_metadata({METADATA_KEY: meta.to_json().encode(), INDEX_KEY: index})
    with atomic_path(path, sync=sync) as tmp:
        options = _writer_options(table.column_names)
        pq.write_table(table.replace_schema_metadata(schema.metadata), tmp,
                       row_group_size=ROW_GROUP_ROWS, **options)  # fmt: skip
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
                    times = pc.cast(batch.column("ts"), pa.int64()).to_pylist()
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
        kv = {METADATA_KEY: meta.to_json().encode(),
              INDEX_KEY: json.dumps(runs, separators=(",", ":")).encode()}  # fmt: skip
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
                        writer.write_table(table.slice(0, ROW_GROUP_ROWS),
                                           row_group_size=ROW_GROUP_ROWS)  # fmt: skip
                        rest = table.slice(ROW_GROUP_ROWS)
                        pending = rest.to_batches()
                        count = rest.num_rows
            if count:
                writer.write_table(pa.Table.from_batches(pending, schema=self.schema),
                                   row_group_size=ROW_GROUP_ROWS)  # fmt: skip
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

    def write(self, table: pa.Table, meta: TraceMeta) -> None:
        """Write one chunk as the next part file."""
        if table.num_rows == 0:
            return
        write_trace(table, meta, self.parts_dir / f"part-{self.count:06d}.parquet", sync=False)
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
        merged = Trace(meta=meta, files=tuple(parts), origin=str(self.parts_dir),
                       has_energy=has_energy)  # fmt: skip
        write_sorted(merged, meta, self.out)
        for p in self.parts_dir.iterdir():
            p.unlink()
        self.parts_dir.rmdir()
        return self.out


def read_parquet_files(files: list[Path], origin: str) -> Trace:
    """A Parquet-backed Trace over exactly ``files`` (a unit of an engine's work)."""
    return _trace_of(files, origin)


def file_series(f: Path) -> set[tuple[str, int]]:
    """The (host, gpu) series one canonical file holds: from its index, else by a scan."""
    raw = (pq.read_schema(f).metadata or {}).get(INDEX_KEY)
    if raw:
        return {(str(h), int(g)) for h, g, _ in json.loads(raw)}
    table = pq.read_table(f, columns=["host", "gpu"]).group_by(["host", "gpu"]).aggregate([])
    rows = zip(table.column("host").to_pylist(), table.column("gpu").to_pylist(), strict=True)
    return {(str(h), int(g)) for h, g in rows}


def read_parquet_trace(
    path: Path,
    *,
    hosts: tuple[str, ...] | None = None,
    span_us: tuple[int | None, int | None] | None = None,
) -> Trace:
    """Return a Parquet-backed Trace for a canonical file or a folder of them (hive or flat).

    In a hive-partitioned dataset, files whose ``host=`` is not in ``hosts`` or whose
    ``date=`` (a UTC day) lies outside ``span_us`` are not read at all."""
    path = Path(path)
    warnings: list[str] = []
    files = [path]
    if path.is_dir():
        files, warnings = dataset_files(path)
    if path.is_dir() and files:
        kept = [f for f in files if _in_partition(partition_of(f.relative_to(path)), hosts,
                                                  span_us)]  # fmt: skip
        if not kept:
            raise BadInputError(f"{path}: no partition of the dataset matches --hosts/--from/--to")
        files = kept
    trace = _trace_of(files, str(path))
    trace.warnings.extend(warnings)
    return trace


def _trace_of(files: list[Path], origin: str) -> Trace:
    path = Path(origin)
    if not files:
        leftovers = [] if not path.is_dir() else [f for f in path.rglob("*") if is_temp(f)]
        extra = f" (only {len(leftovers)} temp file(s) of an unfinished write)" if leftovers else ""
        raise BadInputError(f"{path}: folder holds no .parquet files{extra}")
    metas: list[TraceMeta] = []
    index: list[tuple[str, int, int]] | None = []
    has_energy = False
    peaks: list[float] = []
    for f in files:
        meta, runs, energy, peak = _check_file(f)
        peaks.append(math.inf if peak is None else peak)
        metas.append(meta)
        has_energy |= energy
        if runs is None or index is None:
            index = None  # one file without an index: the whole trace has none
        else:
            index.extend(runs)
    meta = merge_meta(metas)
    return Trace(
        meta=meta,
        files=tuple(files),
        origin=str(path),
        index=index,
        has_energy=has_energy,
        power_peak_w=max(peaks),
    )


def _in_partition(keys: dict[str, str], hosts: tuple[str, ...] | None,
                  span_us: tuple[int | None, int | None] | None) -> bool:  # fmt: skip
    if hosts is not None and "host" in keys and keys["host"] not in hosts:
        return False
    if span_us is not None and "date" in keys:
        try:
            day = datetime.strptime(keys["date"], "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            return True
        start = round(day.timestamp() * 1e6)
        lo, hi = span_us
        if (hi is not None and start >= hi) or (lo is not None and start + _DAY_US <= lo):
            return False
    return True


_GPU_RANGE = (0, 32767)  # the canonical int16 column


def _check_file(
    f: Path,
) -> tuple[TraceMeta, list[tuple[str, int, int]] | None, bool, float | None]:
    """Return (metadata, series index or None, has energy_j) of one Parquet file, refusing one
    that is not a canonical trace: columns missing or of the wrong type, a null host, a GPU
    index outside int16, unreadable metadata. Types come from the schema, nulls and ranges from
    the footer's statistics (no data is read when they are there)."""
    try:
        handle = pq.ParquetFile(f)
    except (pa.ArrowInvalid, OSError) as exc:
        raise BadInputError(f"{f}: not a readable Parquet file ({exc})") from None
    schema = handle.schema_arrow
    missing = [c for c in ("ts", "host", "gpu", "power_w") if c not in schema.names]
    if missing:
        raise BadInputError(
            f"{f}: Parquet file is not a canonical trace (missing {', '.join(missing)})"
        )
    expect = {
        "ts": (pa.types.is_timestamp, "a timestamp"),
        "power_w": (lambda t: pa.types.is_floating(t) or pa.types.is_integer(t), "a number"),
        "gpu": (pa.types.is_integer, "an integer"),
        "host": (
            lambda t: (
                pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t)
            ),
            "text",
        ),
        "energy_j": (lambda t: pa.types.is_floating(t) or pa.types.is_integer(t), "a number"),
        # a bit field: a float column would be cast (4.5 read as 4) in silence
        **{c: (pa.types.is_integer, "an integer bit field") for c in OPTIONAL_INT_COLUMNS},
    }
    for name, (ok, what) in expect.items():
        if name in schema.names and not ok(schema.field(name).type):
            raise BadInputError(f"{f}: column {name} is {schema.field(name).type}, expected {what}")
    peak = _check_statistics(f, handle)
    raw = (schema.metadata or {}).get(METADATA_KEY)
    try:
        meta = TraceMeta.from_json(raw) if raw else TraceMeta(source="parquet")
    except (ValueError, TypeError, AttributeError) as exc:
        raise BadInputError(
            f"{f}: the powerkit metadata in its footer is malformed ({exc})"
        ) from None
    runs = (schema.metadata or {}).get(INDEX_KEY)
    index = None
    if runs is not None:
        try:
            index = [(str(h), int(g), int(n)) for h, g, n in json.loads(runs)]
        except (ValueError, TypeError) as exc:
            raise BadInputError(
                f"{f}: the series index in its footer is malformed ({exc})"
            ) from None
    return meta, index, "energy_j" in schema.names, peak


def _check_statistics(f: Path, handle: pq.ParquetFile) -> float | None:
    """Refuse null hosts or times and GPU indices outside int16, from the footer when it can;
    return the largest power_w the footer knows of (None: unknown)."""
    names = handle.schema_arrow.names
    meta = handle.metadata
    peak: float | None = None
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for j in range(group.num_columns):
            column = group.column(j)
            name = column.path_in_schema
            stats = column.statistics
            if name in OPTIONAL_INT_COLUMNS and stats is not None and stats.has_min_max:
                if int(stats.min) < 0:
                    raise BadInputError(f"{f}: column {name} holds {stats.min}: a bit field is "
                                        "a whole number from 0")  # fmt: skip
                continue
            if name not in ("ts", "host", "gpu", "power_w"):
                continue
            if stats is None or not stats.has_null_count:
                _check_by_scan(f, names)
                return None
            if stats.null_count:
                raise BadInputError(f"{f}: column {name} has {stats.null_count} empty cell(s)")
            if name == "power_w":
                top = float(stats.max) if stats.has_min_max else math.inf
                peak = top if peak is None else max(peak, top)
            if name == "gpu" and stats.has_min_max:
                lo, hi = int(stats.min), int(stats.max)
                if lo < _GPU_RANGE[0] or hi > _GPU_RANGE[1]:
                    bad = lo if lo < _GPU_RANGE[0] else hi
                    raise BadInputError(f"{f}: GPU index {bad} out of range (0-32767)")
    return peak


def _check_by_scan(f: Path, names: list[str]) -> None:
    """The same checks as _check_statistics by reading the columns (a footer without stats)."""
    table = pq.read_table(f, columns=["ts", "host", "gpu", "power_w"])
    for name in ("ts", "host", "gpu", "power_w"):
        nulls = table.column(name).null_count
        if nulls:
            raise BadInputError(f"{f}: column {name} has {nulls} empty cell(s)")
    gpu = table.column("gpu")
    if len(gpu):
        lo, hi = pc.min(gpu).as_py(), pc.max(gpu).as_py()
        if lo < _GPU_RANGE[0] or hi > _GPU_RANGE[1]:
            raise BadInputError(f"{f}: GPU index {lo if lo < 0 else hi} out of range (0-32767)")


def check_trace_plausible(trace: Trace, max_power_w: float | None) -> None:
    """Refuse a trace holding a sample above its GPU's plausible ceiling (see
    schema.power_ceiling_w), naming the first such sample. The trace's largest sample settles
    it at once in most traces: from the footers' statistics on disk (no data read), from one
    pass over the column in memory; only a trace above the lowest ceiling is scanned per GPU."""
    in_memory = trace.table_ is not None or not trace.files
    peak = pc.max(trace.table().column("power_w")).as_py() if in_memory else trace.power_peak_w
    ceilings = {(g.host, g.gpu): power_ceiling_w(max_power_w, g.nameplate_w)
                for g in trace.meta.gpus}  # fmt: skip
    default = power_ceiling_w(max_power_w, None)
    low = min([default, *ceilings.values()])
    if peak is None and in_memory:
        return  # no samples
    if peak is not None and peak <= low:
        return
    con = connect()
    try:
        trace.register(con)
        peaks = con.execute(
            "SELECT host, gpu, max(power_w) FROM trace GROUP BY host, gpu HAVING max(power_w) > ?"
            " ORDER BY host, gpu",
            [low],
        ).fetchall()
        for host, gpu, _ in peaks:
            ceiling = ceilings.get((str(host), int(gpu)), default)
            row = con.execute(
                "SELECT ts, power_w FROM trace WHERE host = ? AND gpu = ? AND power_w > ? "
                "ORDER BY ts LIMIT 1",
                [host, gpu, ceiling],
            ).fetchone()
            if row is not None:
                raise BadInputError(
                    f"{trace.origin}: host={host} gpu={gpu} ts={row[0]}: "
                    f"{implausible_power(float(row[1]), ceiling)}"
                )
    finally:
        con.close()


def write_sorted(
    trace: Trace, meta: TraceMeta, path: Path, *, where: str = "", memory_limit: str | None = None
) -> list[tuple[str, int, int]]:
    """Write ``trace`` (Parquet on disk, or a table) as one canonical file sorted by (host,
    gpu, ts); ``where``: only the rows this SQL condition keeps (a dataset partition).

    Return its series index, (host, gpu, rows) per series. DuckDB sorts out of core (within
    powerkit.db's memory limit), so memory does not grow with the trace; the rows are checked
    as :func:`powerkit.trace.schema.to_canonical` checks them, and the footer gets the metadata
    and the series index. ``memory_limit``: DuckDB's, for this write (see powerkit.db).
    """
    con = connect(memory_limit)
    try:
        trace.register(con)
        if where:
            con.execute(f"CREATE OR REPLACE VIEW part AS SELECT * FROM trace WHERE {where}")
        table = "part" if where else "trace"
        present = {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
        row = con.execute(_CHECK_SQL.replace("FROM trace", f"FROM {table}"),
                          [POWER_MAX_W]).fetchone()  # fmt: skip
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
        with atomic_path(Path(path)) as tmp:
            con.execute(
                f"COPY (SELECT {', '.join(columns)} FROM {table} ORDER BY host, gpu, ts) "
                f"TO {sql_text(str(tmp))} (FORMAT parquet, COMPRESSION zstd, "
                f"ROW_GROUP_SIZE 1000000, KV_METADATA {{{metadata}}})"
            )
        return [(str(h), int(g), int(n)) for h, g, n in index]
    finally:
        con.close()


_DAY_US = 86_400 * 10**6


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


def merge_meta(metas: Iterable[TraceMeta]) -> TraceMeta:
    """Return one metadata record for several traces (GPU lists united, sources named)."""
    metas = list(metas)
    first = metas[0]
    if len(metas) == 1:
        return first
    seen: dict[tuple[str, int], GpuMeta] = {}
    for m in metas:
        for g in m.gpus:
            seen.setdefault((g.host, g.gpu), g)
    sources = sorted({m.source for m in metas})
    intervals = {m.interval_s for m in metas}
    zones = {m.tz for m in metas}
    kinds = {m.power_semantics for m in metas}
    extra = dict(first.extra)
    if any(m.extra.get("tz_assumed") for m in metas):
        extra["tz_assumed"] = True
    return TraceMeta(
        source=sources[0] if len(sources) == 1 else "mixed:" + ",".join(sources),
        # Inputs that disagree have no one nominal interval: gaps are then judged per series.
        power_semantics=kinds.pop() if len(kinds) == 1 else "mixed",
        interval_s=intervals.pop() if len(intervals) == 1 else None,
        tz=zones.pop() if len(zones) == 1 else "UTC",
        gpus=[seen[k] for k in sorted(seen)],
        powerkit_version=first.powerkit_version,
        extra=extra,
    )
