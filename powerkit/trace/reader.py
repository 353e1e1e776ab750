"""Open any supported trace: detect the format from the content and hand it to its reader.

The text readers (and Polars) load only when a text log is read: a command on canonical
Parquet starts without them.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import check_regular, check_utf8_name
from powerkit.core.units import is_number
from powerkit.trace.infer import Inferred, infer_columns, suggest_map
from powerkit.trace.model import Trace
from powerkit.trace.options import ImportOptions, is_prometheus_url
from powerkit.trace.overrides import apply_overrides
from powerkit.trace.parquet import check_trace_plausible, read_parquet_trace

__all__ = ["FORMATS", "detect_format", "read_trace", "slice_trace"]

# format -> (module, function) of its reader, imported when that format is read
_READERS = {
    "csv": ("powerkit.trace.readers.csvfile", "read_canonical_csv"),
    "nvidia-smi": ("powerkit.trace.readers.smi", "read_smi"),
    "dmon": ("powerkit.trace.readers.dmon", "read_dmon"),
    "dcgm": ("powerkit.trace.readers.dcgm", "read_dcgm"),
    "amd-smi": ("powerkit.trace.readers.amdsmi", "read_amdsmi"),
    "unit-cells": ("powerkit.trace.readers.unitcells", "read_unit_cells"),
}
FORMATS = ("parquet", *_READERS)


def detect_format(path: Path) -> str:
    """Return the format name of a file or folder (one of FORMATS)."""
    if path.is_dir():
        return "parquet"
    check_regular(path)  # a FIFO would block the read below
    with open(path, "rb") as fh:
        head = fh.read(64 * 1024)
    if head[:4] == b"PAR1":
        return "parquet"
    if not head.strip():
        raise BadInputError(f"{path}: file is empty (empty trace)")
    from powerkit.trace.readers.amdsmi import looks_like_amdsmi
    from powerkit.trace.readers.csvfile import FIELD_COLUMNS, looks_like_canonical_csv
    from powerkit.trace.readers.dcgm import looks_like_dcgm
    from powerkit.trace.readers.dmon import looks_like_dmon
    from powerkit.trace.readers.smi_layout import looks_like_smi
    from powerkit.trace.readers.unitcells import looks_like_unit_cells
    from powerkit.trace.readers.widecsv import header_names, looks_like_wide_csv

    if b"\x00" in head:
        raise BadInputError(f"{path}: unknown format (binary file that is not Parquet)")
    text = head.decode("utf-8", errors="replace")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if looks_like_dcgm(text):
        return "dcgm"
    if looks_like_dmon(first):
        return "dmon"
    if looks_like_unit_cells(text):
        return "unit-cells"
    if looks_like_amdsmi(first):
        return "amd-smi"
    if looks_like_canonical_csv(first) or looks_like_wide_csv(first):
        return "csv"
    if looks_like_smi(first):
        return "nvidia-smi"
    names = header_names(first) if "," in first else [first.strip().strip('"')]
    inferred = infer_columns(names, str(path))
    if "," in first and inferred.readable():
        return "csv"  # (its columns inferred by name: trace.infer)
    hint = ""
    power = inferred.columns.get("power_w", (None, ""))[0]
    if "," in first:
        lines = [ln for ln in text.splitlines()[1:21] if ln.strip()]
        guess = suggest_map(names, [ln.split(",") for ln in lines])
        hint = (
            f" (read it with {option('map')} {guess}, if those are its time and power)"
            if guess
            else f" (for any other CSV, name its columns with {option('map')} ts=COL,power_w=COL)"
        )
    lowered = {n.strip().lower() for n in names}
    if {"timestamp", "phase", "runtime (s)"} <= lowered:
        hint = (
            " (it is a workload's phase file, not a power log: give it to "
            f"powerkit energy TRACE {option('phases')} {path})"
        )
    elif {"step", "start"} <= lowered and not power:
        hint = (
            " (it is a file of step starts, not a power log: give it to "
            f"powerkit energy TRACE {option('steps')} {path})"
        )
    elif power is not None and not hint.startswith(" (read it with"):
        hint = (
            f" (it has power in {power!r} but no column of times: a log without times cannot "
            "be put on a clock; log a timestamp with each row)"
        )
    field = next(
        (
            c.strip().strip('"')
            for c in first.split(",")
            if c.strip().strip('"').lower() in FIELD_COLUMNS
        ),
        None,
    )
    if hint and field:
        hint = hint[:-1] + f", and keep the power rows with {option('where')} {field}=VALUE)"
    raise BadInputError(
        f"{path}: unknown format (expected canonical Parquet/CSV, nvidia-smi CSV, "
        f"nvidia-smi dmon, DCGM exporter text or amd-smi CSV){hint}"
    )


def read_trace(
    path: str | Path, opts: ImportOptions | None = None, fmt: str | None = None
) -> Trace:
    """Return the canonical Trace of any supported file or folder (format auto-detected).

    Readers repair what real logs need (a truncated last line, units in cells, interleaved
    GPUs) and record each repair in ``Trace.warnings``; anything else is a BadInputError.
    """
    opts = opts or ImportOptions()
    if is_prometheus_url(path):
        return _read_prometheus(path, opts)
    path = Path(path)
    check_utf8_name(path)
    if not path.exists():
        raise BadInputError(f"{path}: no such file or folder")
    if not path.is_dir():
        check_regular(path)  # a FIFO would block the first read
    fmt = fmt or opts.format or ("csv" if opts.mapping else detect_format(path))
    refuse_where(opts, str(path), fmt)
    warnings: list[str] = []
    inferred = None
    if fmt == "csv" and opts.mapping is None:
        opts, inferred = _inferred_options(path, opts, warnings)
    if fmt == "parquet":
        trace = read_parquet_trace(path, hosts=opts.hosts, span_us=_absolute_span(opts))
    elif fmt in _READERS:
        module, name = _READERS[fmt]
        read = getattr(importlib.import_module(module), name)
        trace = read(path, opts, warnings)
    else:
        raise BadInputError(f"{path}: unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if opts.hosts is not None:
        keep_hosts(trace, opts.hosts)
    if inferred is not None:
        trace.meta.extra["inferred_columns"] = {c: list(v) for c, v in inferred.columns.items()}
        trace.meta.extra["left_out"] = inferred.left_out
    apply_overrides(trace, opts, field_read=fmt == "nvidia-smi")
    check_trace_plausible(trace, opts.max_power_w)
    if opts.time_from is not None or opts.time_to is not None:
        slice_trace(trace, opts.time_from, opts.time_to)
    return trace


def _first_line(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.readline().rstrip("\r\n")


def _inferred_options(
    path: Path, opts: ImportOptions, warnings: list[str]
) -> tuple[ImportOptions, Inferred | None]:
    """A CSV in no layout powerkit knows, its columns inferred by name and unit
    (trace.infer): the options that read it, and what was inferred (None: a known layout)."""
    from powerkit.trace.readers.csvfile import looks_like_canonical_csv
    from powerkit.trace.readers.widecsv import header_names, looks_like_wide_csv

    first = _first_line(path)
    if looks_like_canonical_csv(first) or looks_like_wide_csv(first):
        return opts, None
    inferred = infer_columns(header_names(first), str(path))
    if not inferred.readable():
        return opts, None  # (the CSV reader says what is missing)
    shown = ", ".join(f"{c}={name}" for c, (name, _) in inferred.columns.items())
    left = f"; left out: {', '.join(inferred.left_out)}" if inferred.left_out else ""
    warnings.append(
        f"{path}: columns read by their names: {shown}{left} "
        f"({option('map')} reads them otherwise; {option('explain')} says why)"
    )
    changed: dict[str, Any] = {"mapping": inferred.mapping}
    if inferred.power_unit and opts.power_unit == "W":
        changed["power_unit"] = inferred.power_unit
    if inferred.time_unit and opts.time_unit is None:
        changed["time_unit"] = inferred.time_unit
    return dataclasses.replace(opts, **changed), inferred


def refuse_where(opts: ImportOptions, origin: str, fmt: str) -> None:
    """``--where`` picks rows by a CSV file's own columns; refused for every other source.
    ``--power-unit`` (the unit of power cells that carry none) is refused where power is a
    number in W by definition: a Parquet trace, a Prometheus server."""
    if opts.power_unit != "W" and (fmt == "parquet" or "Prometheus" in fmt):
        raise BadInputError(
            f"{origin}: {option('power-unit')} {opts.power_unit} applies to text logs whose "
            f"power cells carry no unit; this is {fmt}, whose power is in W"
        )
    if opts.where and fmt not in ("csv", "amd-smi"):
        column, value = opts.where[0]
        raise BadInputError(
            f"{origin}: {option('where')} {column}={value} applies to CSV files read by column "
            "name "
            f"(canonical, {option('map')} or wide); this is {fmt}"
            + (f" ({option('hosts')} keeps hosts)" if fmt == "parquet" else "")
        )


def keep_hosts(trace: Trace, hosts: tuple[str, ...]) -> None:
    """Cut ``trace`` to ``--hosts``; one line naming the hosts it has when none is there."""
    present = sorted({g.host for g in trace.meta.gpus})
    if present and not set(hosts) & set(present):
        shown = ", ".join(present[:8]) + (", ..." if len(present) > 8 else "")
        raise BadInputError(f"{trace.origin}: no host {', '.join(hosts)} (it has {shown})")
    trace.keep_hosts(hosts)


def _absolute_span(opts: ImportOptions) -> tuple[int | None, int | None] | None:
    """--from/--to in epoch µs where both are absolute times (partition pruning); else None."""
    from powerkit.trace.timeparse import parse_start

    bounds: list[int | None] = []
    for text in (opts.time_from, opts.time_to):
        if text is None:
            bounds.append(None)
            continue
        if text.strip()[:1] in "+-" and not is_number(text.strip()):
            return None  # relative to the trace: known only once it is read
        try:
            bounds.append(round(parse_start(text).timestamp() * 1e6))
        except BadInputError:
            return None  # slice_trace says what is wrong with it
    return bounds[0], bounds[1]


def _read_prometheus(arg: str | Path, opts: ImportOptions) -> Trace:
    """A ``prometheus+http://...`` argument: the query's range is --from/--to (no slicing
    after: ``-6h`` there means before now, not before the trace's end)."""
    from powerkit.trace.readers.promclient import credentials
    from powerkit.trace.readers.prometheus import query_from_arg, read_prometheus

    refuse_where(opts, str(arg), f"a Prometheus server ({option('match')} selects series)")
    url, query = query_from_arg(arg, opts.time_from, opts.time_to)
    headers = credentials(opts.token_file, opts.basic_auth_file)
    trace = read_prometheus(
        url, query, headers=headers, timeout_s=opts.timeout_s, deadline_s=opts.deadline_s
    )
    return finish_server_trace(trace, opts)


def finish_server_trace(trace: Trace, opts: ImportOptions) -> Trace:
    """What a server's trace gets once read (in memory or streamed): ``--hosts``, the options
    every source takes (trace.overrides) and the plausibility check (its range was the
    query's: no slicing after)."""
    if opts.hosts is not None:
        keep_hosts(trace, opts.hosts)
    apply_overrides(trace, opts)
    check_trace_plausible(trace, opts.max_power_w)
    return trace


def slice_trace(trace: Trace, time_from: str | None, time_to: str | None) -> None:
    """Cut ``trace`` to [--from, --to); one-line error when nothing is left."""
    from powerkit.trace.timeparse import iso_utc, parse_time_bound

    start_us, end_us = trace.span_us()
    lo = (
        None if time_from is None else parse_time_bound(time_from, start_us, end_us, option("from"))
    )
    hi = None if time_to is None else parse_time_bound(time_to, start_us, end_us, option("to"))
    if lo is not None and hi is not None and hi <= lo:
        raise BadInputError(
            f"{option('to')} {time_to!r} is not after {option('from')} {time_from!r}"
        )
    trace.cut(lo, hi)
    if trace.span_us(allow_empty=True) == (0, 0):
        raise BadInputError(
            f"{trace.origin}: no samples between {option('from')} and {option('to')} (the trace "
            "spans "
            f"{iso_utc(start_us / 1e6)} to {iso_utc(end_us / 1e6)})"
        )
