"""``powerkit import`` as a library call: logs in, one canonical Parquet trace out."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from powerkit.trace.dataset import write_dataset
from powerkit.trace.model import Trace
from powerkit.trace.options import ImportOptions, is_prometheus_url
from powerkit.trace.parquet import merge_meta, write_sorted, write_trace
from powerkit.trace.reader import finish_server_trace, read_trace, refuse_where
from powerkit.trace.schema import TraceMeta, to_canonical

__all__ = ["STREAM_SORT_MEMORY", "ImportResult", "import_traces"]

#: DuckDB's memory for sorting a streamed import (it spills past it): with the one window in
#: flight, what keeps `import prometheus` at 390-440 MB whatever the range (bench_prometheus);
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


def import_traces(
    paths: list[Path | str],
    opts: ImportOptions,
    out: Path,
    on_step: Callable[[str], None] | None = None,
    *,
    dataset: bool = False,
) -> ImportResult:
    """Read every input (any format, or a ``prometheus+http://`` server) and write one
    canonical trace sorted by (host, gpu, ts), or with ``dataset`` a hive-partitioned folder
    (``host=…/date=…/part-N.parquet``).

    Parquet inputs are merged and sorted by DuckDB out of core (memory does not grow with
    them); text logs are read into memory by their readers, as they must be parsed whole.
    ``on_step(note)`` is called after each input is read and once the output is written.
    """
    step = on_step or (lambda note: None)
    if len(paths) == 1 and is_prometheus_url(paths[0]):
        return _import_prometheus(str(paths[0]), opts, Path(out), step, dataset=dataset)
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
        return ImportResult(out, sum(n for _, _, n in index), meta,
                            sorted({h for h, _, _ in index}), traces)  # fmt: skip
    on_disk = all(t.table_ is None and t.files for t in traces)
    if on_disk and (len(traces) == 1 or not any(t.sliced for t in traces)):
        files = tuple(f for t in traces for f in t.files)
        merged = Trace(meta=meta, files=files, origin=str(out),
                       has_energy=any(t.has_energy for t in traces),
                       slice_us=traces[0].slice_us)  # fmt: skip
        index = write_sorted(merged, meta, out)
        step("")
        return ImportResult(out, sum(n for _, _, n in index), meta,
                            sorted({h for h, _, _ in index}), traces)  # fmt: skip
    if len(traces) == 1:  # a reader's table is canonical already
        table = traces[0].table()
    else:
        tables = pa.concat_tables([t.table() for t in traces], promote_options="default")
        table = to_canonical(tables, what=str(out))
    write_trace(table, meta, out)
    step("")
    hosts = sorted(set(table.column("host").unique().to_pylist()))
    return ImportResult(out, table.num_rows, meta, hosts, traces)


def _import_prometheus(
    arg: str, opts: ImportOptions, out: Path, step: Callable[[str], None], *, dataset: bool
) -> ImportResult:
    """A server's history, streamed: each window of samples is a part file in a hidden folder
    beside the output, then the parts are written sorted (out of core) and the folder goes.
    Memory is bounded by one window, whatever the range's length."""
    from powerkit.trace.prometheus import credentials, query_from_arg, stream_prometheus

    refuse_where(opts, arg, "a Prometheus server (--match selects series)")
    url, query = query_from_arg(arg, opts.time_from, opts.time_to)
    headers = credentials(opts.token_file, opts.basic_auth_file)
    parts = (
        out / ".powerkit-prometheus.parts"
        if dataset
        else out.with_name(f".{out.name}.prometheus.parts")
    )
    shutil.rmtree(parts, ignore_errors=True)  # what a killed import of this output left
    try:
        trace = stream_prometheus(url, query, parts, headers=headers, timeout_s=opts.timeout_s,
                                  deadline_s=opts.deadline_s)  # fmt: skip
        finish_server_trace(trace, opts)
        step(f"read {trace.origin}")
        if dataset:
            index = write_dataset(trace, trace.meta, out, memory_limit=STREAM_SORT_MEMORY)
        else:
            index = write_sorted(trace, trace.meta, out, memory_limit=STREAM_SORT_MEMORY)
    finally:
        shutil.rmtree(parts, ignore_errors=True)
    step("")
    hosts = sorted({h for h, _, _ in index})
    trace.files = ()
    return ImportResult(out, sum(n for _, _, n in index), trace.meta, hosts, [trace])
