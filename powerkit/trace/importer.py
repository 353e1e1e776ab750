"""``powerkit import`` as a library call: logs in, one canonical Parquet trace out."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from powerkit.core.arrowtext import one_value
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.outputs import out_of_space
from powerkit.trace.dataset import write_dataset
from powerkit.trace.model import Trace
from powerkit.trace.options import ImportOptions, is_prometheus_url
from powerkit.trace.parquet import merge_meta
from powerkit.trace.reader import detect_format, finish_server_trace, read_trace, refuse_where
from powerkit.trace.schema import TraceMeta, to_canonical
from powerkit.trace.semantics import resolved_semantics
from powerkit.trace.writing import write_sorted, write_trace

__all__ = ["STREAM_SORT_MEMORY", "ImportResult", "ImportSummary", "import_job", "import_traces"]

#: DuckDB's memory for sorting a streamed import (it spills past it): with the one window in
#: flight, what keeps `import prometheus` near 365 MB whatever the range (bench_prometheus);
#: DuckDB runs out of memory below it (96 MB)
STREAM_SORT_MEMORY = "128MB"


@dataclass
class ImportResult:
    """What an import wrote: rows, series index, merged metadata and the traces read."""

    out: Path
    rows: int
    meta: TraceMeta
    hosts: list[str]
    traces: list[Trace] = field(default_factory=list)


@dataclass(frozen=True)
class ImportSummary(Document):
    """What ``powerkit import`` reports: what it wrote, from what, and each input's bad rows
    and warnings."""

    COMMAND: ClassVar[str] = "import"

    out: str
    inputs: list[str]
    dataset: bool
    formats: list[str]
    rows: int
    gpus: int
    hosts: list[str]
    power_semantics: str
    tz: str
    interval_s: float | None
    bad_rows: dict[str, dict[str, Any]]
    warnings: list[str]


def import_job(
    sources: list[Path | str],
    opts: ImportOptions,
    out: Path,
    on_step: Callable[[str], None] | None = None,
    *,
    dataset: bool = False,
    stream: bool | None = None,
) -> ImportSummary:
    """``powerkit import``: every source's format found (``opts.format`` skips detection;
    ``opts.mapping`` means CSV), then :func:`import_traces`, summed up."""
    formats: list[str] = []
    for source in sources:
        if is_prometheus_url(source):
            formats.append("prometheus")
            continue
        path = Path(source)
        if not path.exists():
            raise BadInputError(f"{path}: no such file or folder")
        formats.append(opts.format or ("csv" if opts.mapping else detect_format(path)))
    result = import_traces(sources, opts, out, on_step, dataset=dataset, stream=stream)
    meta, traces = result.meta, result.traces
    return ImportSummary(
        out=str(out),
        inputs=[str(p) for p in sources],
        dataset=dataset,
        formats=formats,
        rows=result.rows,
        gpus=len(meta.gpus) or _series_written(out, dataset=dataset),
        hosts=result.hosts,
        power_semantics=resolved_semantics(meta),
        tz=meta.tz,
        interval_s=meta.interval_s,
        bad_rows={str(t.origin): t.bad_rows_summary() for t in traces},
        warnings=[w for t in traces for w in t.warnings],
    )


def _series_written(out: Path, *, dataset: bool) -> int:
    """The series a written trace holds, by its footer's index (a Parquet input from another
    tool brings no GPU list in its metadata)."""
    import json

    import pyarrow.parquet as pq

    from powerkit.trace.schema import INDEX_KEY

    files = sorted(Path(out).rglob("*.parquet")) if dataset else [Path(out)]
    series = set()
    for f in files:
        raw = (pq.read_schema(f).metadata or {}).get(INDEX_KEY)
        series |= {(h, g) for h, g, _ in json.loads(raw)} if raw else set()
    return len(series)


def import_traces(
    paths: list[Path | str],
    opts: ImportOptions,
    out: Path,
    on_step: Callable[[str], None] | None = None,
    *,
    dataset: bool = False,
    stream: bool | None = None,
) -> ImportResult:
    """Read every input (any format, or a ``prometheus+http://`` server) and write one
    canonical trace sorted by (host, gpu, ts), or with ``dataset`` a hive-partitioned folder
    (``host=…/date=…/part-N.parquet``).

    Parquet inputs are merged and sorted by DuckDB out of core (memory does not grow with
    them); text logs are read into memory by their readers, as they must be parsed whole.
    ``on_step(note)`` is called after each input is read and once the output is written.
    ``stream``: read a single nvidia-smi log a block at a time (smi_stream.stream_smi); None: from
    :data:`STREAM_BYTES` on.
    """
    try:
        return _import(paths, opts, Path(out), on_step or (lambda note: None), dataset, stream)
    except Exception as exc:
        if not out_of_space(exc):
            raise
        raise BadInputError(
            f"{out}: no space left on the device (or over the file size limit) while it was "
            "written; nothing was replaced"
        ) from None


def _import(
    paths: list[Path | str],
    opts: ImportOptions,
    out: Path,
    step: Callable[[str], None],
    dataset: bool,
    stream: bool | None,
) -> ImportResult:
    """:func:`import_traces`, but for running out of space."""
    if len(paths) == 1 and is_prometheus_url(paths[0]):
        return _import_prometheus(str(paths[0]), opts, Path(out), step, dataset=dataset)
    if len(paths) == 1 and stream is not False:
        streamed = _import_smi_streamed(
            Path(paths[0]), opts, Path(out), step, dataset=dataset, force=bool(stream)
        )
        if streamed is not None:
            return streamed
    traces = []
    for path in paths:
        traces.append(read_trace(path, opts))
        step(f"read {path}")
    meta = merge_meta([t.meta for t in traces])
    if dataset:
        if len(traces) == 1:
            merged = traces[0]
        else:
            tables = pa.concat_tables([t.table() for t in traces], promote_options="default")
            table = to_canonical(tables, what=str(out))
            merged = Trace(meta=meta, table_=table, origin=str(out))
        index = write_dataset(merged, meta, out)
        step("")
        return ImportResult(
            out, sum(n for _, _, n in index), meta, sorted({h for h, _, _ in index}), traces
        )
    on_disk = all(t.table_ is None and t.files for t in traces)
    if on_disk and (len(traces) == 1 or not any(t.sliced for t in traces)):
        files = tuple(f for t in traces for f in t.files)
        merged = Trace(
            meta=meta,
            files=files,
            origin=traces[0].origin if len(traces) == 1 else f"the {len(traces)} inputs",
            has_energy=any(t.has_energy for t in traces),
            slice_us=traces[0].slice_us,
        )
        index = write_sorted(merged, meta, out)
        step("")
        return ImportResult(
            out, sum(n for _, _, n in index), meta, sorted({h for h, _, _ in index}), traces
        )
    if len(traces) == 1:  # a reader's table is canonical already
        table = traces[0].table()
    else:
        tables = pa.concat_tables([t.table() for t in traces], promote_options="default")
        table = to_canonical(tables, what=str(out))
    write_trace(table, meta, out)
    step("")
    single = one_value(table.column("host"))
    hosts = (
        [single] if single is not None else sorted(set(table.column("host").unique().to_pylist()))
    )
    return ImportResult(out, table.num_rows, meta, hosts, traces)


def _parts_folder(out: Path, kind: str, *, dataset: bool) -> Path:
    """The hidden folder a streamed import keeps its part files in, beside (or in) ``out``."""
    return (
        out / f".powerkit-{kind}.parts" if dataset else out.with_name(f".{out.name}.{kind}.parts")
    )


def _write_streamed(trace: Trace, out: Path, *, dataset: bool) -> list[tuple[str, int, int]]:
    """Write a trace of part files sorted (out of core, in DuckDB's small limit)."""
    if dataset:
        return write_dataset(trace, trace.meta, out, memory_limit=STREAM_SORT_MEMORY)
    return write_sorted(trace, trace.meta, out, memory_limit=STREAM_SORT_MEMORY)


#: an nvidia-smi log at least this large is imported a block at a time (smi_stream.stream_smi):
#: memory bounded by a block (about 325 MB at any length) instead of about 220 bytes a sample;
#: below it the whole-file read is a little faster (docs/benchmarks.md)
STREAM_BYTES = 128 * 2**20


def _import_smi_streamed(
    path: Path,
    opts: ImportOptions,
    out: Path,
    step: Callable[[str], None],
    *,
    dataset: bool,
    force: bool = False,
) -> ImportResult | None:
    """A large nvidia-smi log, a block at a time into part files (one per GPU), then written
    in order (a dataset: sorted per partition): memory bounded by a block, whatever the
    log's length. None where the log is not streamed (smi_stream.stream_smi says which): the
    caller reads it whole."""
    from powerkit.trace.reader import detect_format
    from powerkit.trace.readers.smi_stream import stream_smi
    from powerkit.trace.writing import SeriesParts

    if opts.mapping or not path.is_file() or (path.stat().st_size < STREAM_BYTES and not force):
        return None
    if (opts.format or detect_format(path)) != "nvidia-smi":
        return None
    parts = _parts_folder(out, "smi", dataset=dataset)
    shutil.rmtree(parts, ignore_errors=True)  # what a killed import of this output left
    warnings: list[str] = []
    try:
        store = SeriesParts(parts)
        streamed = stream_smi(path, opts, store, warnings)
        if streamed is None:
            return None
        step(f"read {path}")
        if dataset:  # the parts as one file in order, then partitioned (sorted per partition)
            store.write(streamed.meta, parts / "trace.parquet")
            index = _write_streamed(
                Trace(meta=streamed.meta, files=(parts / "trace.parquet",), origin=str(path)),
                out,
                dataset=True,
            )
        else:  # the parts, series after series, are in (gpu, ts) order: no sort
            index = store.write(streamed.meta, out)
    finally:
        shutil.rmtree(parts, ignore_errors=True)
    step("")
    trace = Trace(
        meta=streamed.meta, origin=str(path), warnings=warnings, bad_rows=streamed.bad_rows
    )
    return ImportResult(
        out, sum(n for _, _, n in index), streamed.meta, sorted({h for h, _, _ in index}), [trace]
    )


def _import_prometheus(
    arg: str, opts: ImportOptions, out: Path, step: Callable[[str], None], *, dataset: bool
) -> ImportResult:
    """A server's history, streamed: each window of samples is a part file in a hidden folder
    beside the output, then the parts are written sorted (out of core) and the folder goes.
    Memory is bounded by one window, whatever the range's length."""
    from powerkit.trace.readers.promclient import credentials
    from powerkit.trace.readers.prometheus import query_from_arg, stream_prometheus

    refuse_where(opts, arg, f"a Prometheus server ({option('match')} selects series)")
    url, query = query_from_arg(arg, opts.time_from, opts.time_to)
    headers = credentials(opts.token_file, opts.basic_auth_file)
    parts = _parts_folder(out, "prometheus", dataset=dataset)
    shutil.rmtree(parts, ignore_errors=True)  # what a killed import of this output left
    try:
        trace = stream_prometheus(
            url, query, parts, headers=headers, timeout_s=opts.timeout_s, deadline_s=opts.deadline_s
        )
        finish_server_trace(trace, opts)
        step(f"read {trace.origin}")
        index = _write_streamed(trace, out, dataset=dataset)
    finally:
        shutil.rmtree(parts, ignore_errors=True)
    step("")
    hosts = sorted({h for h, _, _ in index})
    trace.files = ()
    return ImportResult(out, sum(n for _, _, n in index), trace.meta, hosts, [trace])
