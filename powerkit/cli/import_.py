"""``powerkit import``: any supported log -> one canonical Parquet trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.analysis.info import bad_rows_summary
from powerkit.cli.common import (
    ForceOpt,
    GpuNameOpt,
    GpusPerFrameOpt,
    HostOpt,
    JsonOpt,
    NameplateOpt,
    ReaderArgs,
    emit_json,
    err,
    handle_errors,
    import_options,
    reader_options,
    refuse_overwrite,
    warn,
)
from powerkit.cli.progress import progress
from powerkit.errors import BadInputError
from powerkit.trace.importer import import_traces
from powerkit.trace.reader import FORMATS, detect_format
from powerkit.trace.semantics import resolved_semantics

__all__ = ["import_"]


@handle_errors
@reader_options
def import_(
    inputs: Annotated[
        list[Path], typer.Argument(help="Log file(s) to import (formats auto-detected).")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Canonical Parquet file to write.")],
    fmt: Annotated[
        str | None, typer.Option("--format", help=f"Skip detection: one of {', '.join(FORMATS)}.")
    ] = None,
    host: HostOpt = None,
    gpus_per_frame: GpusPerFrameOpt = None,
    columns: Annotated[
        str | None,
        typer.Option("--columns", help="Fields of a headerless nvidia-smi CSV, in order."),
    ] = None,
    interval: Annotated[
        str | None, typer.Option("--interval", help="Sampling interval of logs without times.")
    ] = None,
    gpu_name: GpuNameOpt = None,
    nameplate: NameplateOpt = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
    reader: ReaderArgs | None = None,
) -> None:
    """Convert nvidia-smi CSV, dmon logs, DCGM scrapes or CSV into a canonical Parquet trace."""
    refuse_overwrite(out, force, inputs)
    if fmt is not None and fmt not in FORMATS:
        raise BadInputError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    opts = import_options(
        host=host,
        gpus_per_frame=gpus_per_frame,
        gpu_name=gpu_name,
        nameplate=nameplate,
        columns=columns,
        interval=interval,
        fmt=fmt,
        **(reader or {}),
    )
    formats: list[str] = []
    for path in inputs:
        if not path.exists():
            raise BadInputError(f"{path}: no such file or folder")
        formats.append(fmt or ("csv" if opts.mapping else detect_format(path)))
    # a bar with its clock while each log is parsed (a text log is parsed whole: no finer
    # steps); piped, a line per input when there are several
    several = len(inputs) > 1
    with progress("importing", len(inputs) + 1, quiet=json_out) as advance:
        result = import_traces(inputs, opts, out, lambda note: advance(1, note if several else ""))
    for trace in result.traces:
        for message in trace.warnings:
            warn(message)
    meta, traces, hosts = result.meta, result.traces, result.hosts
    summary = {
        "out": str(out),
        "inputs": [str(p) for p in inputs],
        "formats": formats,
        "rows": result.rows,
        "gpus": len(meta.gpus),
        "hosts": hosts,
        "power_semantics": resolved_semantics(meta),
        "tz": meta.tz,
        "interval_s": meta.interval_s,
        "bad_rows": {str(t.origin): bad_rows_summary(t) for t in traces},
        "warnings": [w for t in traces for w in t.warnings],
    }
    if json_out:
        emit_json(summary)
    else:
        err.print(
            f"wrote {out}: {result.rows:,} samples, {len(meta.gpus)} GPU(s) on "
            f"{len(hosts)} host(s) from {len(inputs)} {'/'.join(sorted(set(formats)))} file(s)"
        )
