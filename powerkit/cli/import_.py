"""``powerkit import``: any supported log -> one canonical Parquet trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.cli.progress import progress
from powerkit.core.errors import BadInputError
from powerkit.core.outputs import check_dataset_output
from powerkit.core.units import parse_duration
from powerkit.trace.arguments import import_options
from powerkit.trace.importer import ImportSummary, import_job
from powerkit.trace.options import is_prometheus_url
from powerkit.trace.reader import FORMATS, read_trace

__all__ = ["import_"]


@cli.handle_errors
@reading.reader_options(*reading.SOURCE, parsed=False)
def import_(
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="Log file(s) to import (formats auto-detected), or `prometheus` with --url."
        ),
    ],
    out_text: Annotated[
        str,
        typer.Option("--out", "-o", help="Canonical Parquet file to write, or DIR/ for a dataset."),
    ],
    url: Annotated[
        str | None, typer.Option(help="prometheus: the server, e.g. http://prom:9090.")
    ] = None,
    metric: Annotated[
        str | None, typer.Option(help="prometheus: the power metric (default: DCGM).")
    ] = None,
    match: Annotated[
        str | None, typer.Option(help='prometheus: label matchers, e.g. Hostname=~"node-1.*".')
    ] = None,
    step: Annotated[
        str | None, typer.Option(help="prometheus: resample every STEP (default: raw samples).")
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option(help="prometheus: file with a bearer token.")
    ] = None,
    basic_auth_file: Annotated[
        Path | None, typer.Option(help="prometheus: file with user:password.")
    ] = None,
    timeout: Annotated[
        str, typer.Option(help="prometheus: the most one request may take, whole.")
    ] = "60s",
    deadline: Annotated[
        str, typer.Option(help="prometheus: the most the whole read may take (or none).")
    ] = "1h",
    fmt: Annotated[
        str | None, typer.Option("--format", help=f"Skip detection: one of {', '.join(FORMATS)}.")
    ] = None,
    columns: Annotated[
        str | None, typer.Option(help="Fields of a headerless nvidia-smi CSV, in order.")
    ] = None,
    interval: Annotated[
        str | None, typer.Option(help="Sampling interval of logs without times.")
    ] = None,
    stream: Annotated[
        bool,
        typer.Option(
            help="nvidia-smi: read the log a block at a time, in memory bounded whatever its "
            "length (automatic from 128 MiB)."
        ),
    ] = False,
    force: opt.Force = False,
    explain: opt.Explain = False,
    json_out: opt.Json = False,
    reader: reading.ReaderArgs | None = None,
) -> None:
    """Convert nvidia-smi CSV, dmon logs, DCGM scrapes, CSV or a Prometheus server's history
    into a canonical Parquet trace (or a hive-partitioned dataset)."""
    dataset = out_text.endswith(("/", "\\"))  # a trailing slash asks for a dataset folder
    out = Path(out_text)
    sources: list[Path | str] = list(inputs)
    if inputs[:1] == ["prometheus"]:
        if len(inputs) > 1 or not url:
            raise BadInputError("import prometheus takes --url http://HOST:PORT and no files")
        from powerkit.trace.readers.prometheus import prometheus_argument

        sources = [prometheus_argument(url, metric, match, step)]
    elif url or metric or match or step:
        raise BadInputError("--url, --metric, --match and --step go with `import prometheus`")
    files = [Path(p) for p in sources if isinstance(p, str) and not is_prometheus_url(p)]
    if dataset:
        check_dataset_output(out, force=force, inputs=files)
    else:
        cli.refuse_overwrite(out, force, files)
    if fmt is not None and fmt not in FORMATS:
        raise BadInputError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    opts = import_options(columns=columns, interval=interval, fmt=fmt, **(reader or {}))
    try:
        opts.timeout_s = parse_duration(timeout)
        opts.deadline_s = None if deadline == "none" else parse_duration(deadline)
    except BadInputError as exc:
        raise BadInputError(f"--timeout/--deadline: {exc}") from None
    opts.token_file = None if token_file is None else str(token_file)
    opts.basic_auth_file = None if basic_auth_file is None else str(basic_auth_file)
    # a bar with its clock while each log is parsed (a text log is parsed whole: no finer
    # steps); piped, a line per input when there are several
    with progress("importing", len(sources) + 1, quiet=json_out) as advance:

        def advanced(note: str) -> None:
            advance(1, note if len(sources) > 1 else "")

        summary = import_job(sources, opts, out, advanced, dataset=dataset, stream=stream or None)

    def render(s: ImportSummary) -> None:
        cli.err.print(
            f"wrote {'dataset ' if dataset else ''}{out}: {s.rows:,} samples, {s.gpus} GPU(s) "
            f"on {len(s.hosts)} host(s) from {len(sources)} "
            f"{'/'.join(sorted(set(s.formats)))} input(s)"
        )

    cli.finish(summary, json_out, render, warnings=summary.warnings)
    if explain:  # (from what the written trace recorded of its reading)
        cli.print_explanation(read_trace(out), stderr=True)
