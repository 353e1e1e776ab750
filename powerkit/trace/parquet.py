"""Canonical Parquet: atomic writes, chunked part files for recording, and reading back."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

from powerkit.core.arrowtext import repeated
from powerkit.core.db import connect
from powerkit.core.errors import BadInputError, option
from powerkit.core.outputs import is_temp
from powerkit.trace.dataset import dataset_files, partition_of
from powerkit.trace.model import Trace
from powerkit.trace.schema import (
    INDEX_KEY,
    METADATA_KEY,
    OPTIONAL_INT_COLUMNS,
    GpuMeta,
    TraceMeta,
    implausible_power,
    power_ceiling_w,
)

__all__ = ["check_trace_plausible", "merge_meta", "read_parquet_trace"]


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
        kept = [
            f for f in files if _in_partition(partition_of(f.relative_to(path)), hosts, span_us)
        ]
        if not kept:
            raise BadInputError(
                f"{path}: no partition of the dataset matches "
                f"{option('hosts')}/{option('from')}/{option('to')}"
            )
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
    hosts: set[str | None] = set()  # each file's one host by its footer (None: not one, unknown)
    for f in files:
        meta, runs, energy, peak, host = _check_file(f)
        peaks.append(math.inf if peak is None else peak)
        hosts.add(host)
        metas.append(meta)
        has_energy |= energy
        if runs is None or index is None:
            index = None  # one file without an index: the whole trace has none
        else:
            index.extend(runs)
    meta = merge_meta(metas)
    schemas = {f: pq.read_schema(f) for f in files}
    hostless = [f for f in files if "host" not in schemas[f].names]
    # (times in another unit than µs — pandas writes ns — are read and converted here: the
    # scans that read a canonical file in place take µs)
    other_unit = any(schemas[f].field("ts").type.unit != "us" for f in files)
    if hostless or other_unit:
        return Trace(
            meta=meta,
            table_=_in_memory(files, path),
            origin=str(path),
            has_energy=has_energy,
            warnings=[
                f"{f}: no host column; its samples are host {_host_of(f, path)!r} (its name)"
                for f in hostless[:3]
            ],
        )
    return Trace(
        meta=meta,
        files=tuple(files),
        origin=str(path),
        index=index,
        has_energy=has_energy,
        power_peak_w=max(peaks),
        one_host=hosts.pop() if len(hosts) == 1 else None,
    )


def _host_of(f: Path, folder: Path) -> str:
    """The host of a file without a host column: its ``host=`` partition, else its name."""
    if folder.is_dir():
        host = partition_of(f.relative_to(folder)).get("host")
        if host:
            return host
    return f.stem


def _in_memory(files: list[Path], folder: Path) -> pa.Table:
    """The files' rows in memory, each file without a host column given its host, times in
    µs (a nanosecond's part below a µs dropped, as the canonical type holds)."""
    tables = []
    for f in files:
        table = pq.read_table(f)
        if "host" not in table.column_names:
            table = table.add_column(1, "host", repeated(_host_of(f, folder), table.num_rows))
        ts = table.schema.field("ts").type
        if ts.unit != "us":
            at = table.schema.get_field_index("ts")
            cast = table.column("ts").cast(pa.timestamp("us", ts.tz), safe=False)
            table = table.set_column(at, "ts", cast)
        tables.append(table)
    return pa.concat_tables(tables, promote_options="default")


def _in_partition(
    keys: dict[str, str],
    hosts: tuple[str, ...] | None,
    span_us: tuple[int | None, int | None] | None,
) -> bool:
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
) -> tuple[TraceMeta, list[tuple[str, int, int]] | None, bool, float | None, str | None]:
    """Return (metadata, series index or None, has energy_j, the largest power_w and the one
    host its footer knows of, or None) of one Parquet file, refusing one
    that is not a canonical trace: columns missing or of the wrong type, a null host, a GPU
    index outside int16, unreadable metadata. Types come from the schema, nulls and ranges from
    the footer's statistics (no data is read when they are there)."""
    try:
        handle = pq.ParquetFile(f)
    except (pa.ArrowInvalid, OSError) as exc:
        raise BadInputError(f"{f}: not a readable Parquet file ({exc})") from None
    schema = handle.schema_arrow
    # (a file without host, written by another tool, is named by its file as a CSV is)
    missing = [c for c in ("ts", "gpu", "power_w") if c not in schema.names]
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
    peak, host = _check_statistics(f, handle)
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
    return meta, index, "energy_j" in schema.names, peak, host


def _check_statistics(f: Path, handle: pq.ParquetFile) -> tuple[float | None, str | None]:
    """Refuse null hosts or times and GPU indices outside int16, from the footer when it can;
    return the largest power_w the footer knows of and the one host every row group holds
    (each None: unknown, or for the host, several)."""
    names = handle.schema_arrow.names
    meta = handle.metadata
    peak: float | None = None
    hosts: set[str | None] = set()
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for j in range(group.num_columns):
            column = group.column(j)
            name = column.path_in_schema
            stats = column.statistics
            if name in OPTIONAL_INT_COLUMNS and stats is not None and stats.has_min_max:
                if int(stats.min) < 0:
                    raise BadInputError(
                        f"{f}: column {name} holds {stats.min}: a bit field is "
                        "a whole number from 0"
                    )
                continue
            if name not in ("ts", "host", "gpu", "power_w"):
                continue
            if stats is None or not stats.has_null_count:
                _check_by_scan(f, names)
                return None, None
            if stats.null_count:
                raise BadInputError(f"{f}: column {name} has {stats.null_count} empty cell(s)")
            if name == "host":
                one = stats.has_min_max and stats.min == stats.max
                hosts.add(str(stats.min) if one else None)
            if name == "power_w":
                top = float(stats.max) if stats.has_min_max else math.inf
                peak = top if peak is None else max(peak, top)
            if name == "gpu" and stats.has_min_max:
                lo, hi = int(stats.min), int(stats.max)
                if lo < _GPU_RANGE[0] or hi > _GPU_RANGE[1]:
                    bad = lo if lo < _GPU_RANGE[0] else hi
                    raise BadInputError(f"{f}: GPU index {bad} out of range (0-32767)")
    return peak, hosts.pop() if len(hosts) == 1 else None


def _check_by_scan(f: Path, names: list[str]) -> None:
    """The same checks as _check_statistics by reading the columns (a footer without stats)."""
    table = pq.read_table(f, columns=["ts", "host", "gpu", "power_w"])
    for name in ("ts", "host", "gpu", "power_w"):
        nulls = table.column(name).null_count
        if nulls:
            raise BadInputError(f"{f}: column {name} has {nulls} empty cell(s)")
    gpu = table.column("gpu")
    if len(gpu):
        values = gpu.to_numpy()
        lo, hi = int(values.min()), int(values.max())
        if lo < _GPU_RANGE[0] or hi > _GPU_RANGE[1]:
            raise BadInputError(f"{f}: GPU index {lo if lo < 0 else hi} out of range (0-32767)")


def check_trace_plausible(trace: Trace, max_power_w: float | None) -> None:
    """Refuse a trace holding a sample above its GPU's plausible ceiling (see
    schema.power_ceiling_w), naming the first such sample. The trace's largest sample settles
    it at once in most traces: from the footers' statistics on disk (no data read), from one
    pass over the column in memory; only a trace above the lowest ceiling is scanned per GPU."""
    in_memory = trace.table_ is not None or not trace.files
    if in_memory:
        power = trace.table().column("power_w")
        peak = float(power.to_numpy().max()) if len(power) else None
    else:
        peak = trace.power_peak_w
    ceilings = {
        (g.host, g.gpu): power_ceiling_w(max_power_w, g.nameplate_w) for g in trace.meta.gpus
    }
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


_DAY_US = 86_400 * 10**6


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
