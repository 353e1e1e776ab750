"""What every command shares: error handling, JSON output, stderr console, reader options."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from powerkit.cells.fill import FillPolicy, parse_fill
from powerkit.cli.boundary import err, handle_errors, warn
from powerkit.documents import Document
from powerkit.errors import BadInputError, PowerkitError
from powerkit.outputs import check_output
from powerkit.tables import Column, cells
from powerkit.trace import ImportOptions, Trace, read_trace
from powerkit.trace.options import parse_map, parse_where
from powerkit.trace.timeparse import check_zone
from powerkit.units import parse_duration, parse_durations, parse_power

__all__ = [
    "FillOpt",
    "ForceOpt",
    "FromOpt",
    "GpuNameOpt",
    "GpusPerFrameOpt",
    "GridOpt",
    "HostOpt",
    "JsonOpt",
    "MapOpt",
    "NameplateOpt",
    "PlotlyJsOpt",
    "PowerUnitOpt",
    "ReaderArgs",
    "ResumeOpt",
    "SkipBadRowsOpt",
    "StartOpt",
    "TimeUnitOpt",
    "ToOpt",
    "TzOpt",
    "emit_json",
    "err",
    "fill_option",
    "finish",
    "grid_option",
    "handle_errors",
    "import_options",
    "load_trace",
    "member_traces",
    "number_range",
    "option_value",
    "out_console",
    "parse_member",
    "print_table",
    "reader_options",
    "refuse_overwrite",
    "run_sweep_job",
    "warn",
    "windows_option",
]

P = ParamSpec("P")
R = TypeVar("R")


class _TableConsole(Console):
    """A console whose tables never cut a number: every column but the first keeps the width
    of its widest cell, so a long host or GPU name wraps instead; piped output is as wide as
    the widest table (one line per row, whole, for grep and scripts)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        tables = [o for o in objects if isinstance(o, Table)]
        for table in tables:
            for i, column in enumerate(table.columns):
                if i == 0:
                    column.overflow, column.no_wrap = "fold", False
                    continue
                cells = [str(c) for c in column.cells if isinstance(c, str)]
                column.min_width = max((len(c) for c in [str(column.header), *cells]), default=1)
        need = 0
        if tables and not self.is_terminal:  # (a terminal's width is what it is)
            unbounded = self.options.update_width(1_000_000)
            need = max(self.measure(t, options=unbounded).maximum for t in tables)
        if need <= self.width:
            super().print(*objects, **kwargs)
            return
        width = self.width
        self.width = need
        try:
            super().print(*objects, **kwargs)
        finally:
            self.width = width


def out_console() -> Console:
    """The stdout console for tables: the terminal's width, or 120 columns when piped (wider
    where a table needs it: see :class:`_TableConsole`)."""
    console = _TableConsole()
    return console if console.is_terminal else _TableConsole(width=120)


def print_table(
    columns: Sequence[Column], rows: Iterable[Any], console: Console | None = None
) -> None:
    """Print a declared table (powerkit.tables): the key column left, numbers right."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for c in columns:
        table.add_column(c.header, no_wrap=True, justify="left" if c.key or c.text else "right")
    for row in cells(columns, rows):
        table.add_row(*row)
    (console or out_console()).print(table)


def emit_json(result: Document) -> None:
    """Print a command's result as its one JSON document on stdout: ``result.to_doc()``, its
    kind and version first (powerkit.documents), NaN and inf as null."""
    if not isinstance(result, Document):  # (every --json is a result's document, no dict)
        raise TypeError(f"{type(result).__name__} is not a result document")
    sys.stdout.write(json.dumps(result.to_doc(), indent=2) + "\n")
    sys.stdout.flush()


def finish(
    result: R,
    json_out: bool,
    render: Callable[[R], None],
    *,
    warnings: Iterable[str] = (),
    written: Iterable[Path | None] = (),
) -> None:
    """The end of every command: ``warnings`` on stderr, the files ``written`` named (not with
    ``--json``), then the result's document (``--json``) or ``render(result)``."""
    for line in warnings:
        warn(line)
    if not json_out:
        for path in written:
            if path is not None:
                err.print(f"wrote {path}")
    if json_out:
        emit_json(result)  # type: ignore[arg-type]
    else:
        render(result)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Overwrite existing output files (never an input).")
]
TzOpt = Annotated[
    str | None,
    typer.Option("--tz", help="Zone of timestamps that carry none (default UTC, with a warning)."),
]
HostOpt = Annotated[
    str | None, typer.Option("--host", help="Host name for logs that do not name one.")
]
GpusPerFrameOpt = Annotated[
    int | None,
    typer.Option("--gpus-per-frame", help="GPUs interleaved per sampling frame (no index column)."),
]
SkipBadRowsOpt = Annotated[
    bool,
    typer.Option("--skip-bad-rows", help="Skip (and count) malformed rows instead of failing."),
]
GpuNameOpt = Annotated[
    str | None, typer.Option("--gpu-name", help="GPU model, if the log lacks it.")
]
NameplateOpt = Annotated[
    str | None, typer.Option("--nameplate", help="Per-GPU nameplate (TDP), e.g. 700W.")
]
MapOpt = Annotated[
    str | None,
    typer.Option(
        "--map",
        help="Any CSV: canonical=file column pairs, e.g. ts=t_s,gpu=gpu_index,power_w=power_w.",
    ),
]
WhereOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--where",
        help="CSV: keep only rows whose column holds the value, COL=VALUE (repeatable).",
    ),
]
TimeUnitOpt = Annotated[
    str | None, typer.Option("--time-unit", help="Unit of numeric times: s, ms, us or ns.")
]
StartOpt = Annotated[
    str | None,
    typer.Option(
        "--start", help="Start (ISO or epoch s) that numeric times count from (relative times)."
    ),
]
PowerUnitOpt = Annotated[
    str, typer.Option("--power-unit", help="Unit of power cells that carry none: W or mW.")
]
MaxPowerOpt = Annotated[
    str | None,
    typer.Option(
        "--max-power",
        help="Largest plausible sample per GPU (default 3x nameplate, else 5kW); above: bad row.",
    ),
]
FromOpt = Annotated[
    str | None,
    typer.Option("--from", help="Keep samples from this time: ISO, epoch s, +10m after start."),
]
ToOpt = Annotated[
    str | None,
    typer.Option("--to", help="Keep samples before this time: ISO, epoch s, -5m before end."),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine", help="local, or ray (tasks per host or file of a dataset on a Ray cluster)."
    ),
]
AddressOpt = Annotated[
    str | None,
    typer.Option("--address", help="ray: the cluster (auto, HOST:PORT, ray://HOST:10001)."),
]
HostsOpt = Annotated[
    str | None,
    typer.Option("--hosts", help="Keep only these hosts (comma-separated); prunes datasets."),
]
PlotlyJsOpt = Annotated[
    str,
    typer.Option(
        "--plotly-js",
        help="Plotly in HTML pages: inline (offline), cdn, or a FILE path that pages share.",
    ),
]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume", help="Continue the interrupted sweep in --out (same options as it started)."
    ),
]
GridOpt = Annotated[
    str | None,
    typer.Option(
        "--grid", help="Cell length of the time grid (default: the trace's interval, rounded up)."
    ),
]
FillOpt = Annotated[
    str,
    typer.Option(
        "--fill", help="Gap fill on the grid: none, hold:DUR or linear:DUR (e.g. hold:10s)."
    ),
]


#: The options every command that reads a trace takes, as (parameter, annotation, default).
_READER_PARAMS: tuple[tuple[str, Any, Any], ...] = (
    ("tz", TzOpt, None),
    ("skip_bad_rows", SkipBadRowsOpt, False),
    ("mapping", MapOpt, None),
    ("where", WhereOpt, None),
    ("time_unit", TimeUnitOpt, None),
    ("start", StartOpt, None),
    ("power_unit", PowerUnitOpt, "W"),
    ("max_power", MaxPowerOpt, None),
    ("time_from", FromOpt, None),
    ("time_to", ToOpt, None),
    ("hosts", HostsOpt, None),
)

ReaderArgs = dict[str, Any]


def number_range(
    low: float | None = None, high: float | None = None, *, low_open: bool = False
) -> Callable[[float | None], float | None]:
    """Return an option callback refusing a value that is not finite or lies outside
    [low, high] (``low_open``: above low). Typer's own bounds let NaN through."""

    def check(value: float | None) -> float | None:
        if value is None:
            return None
        below = low is not None and (value <= low if low_open else value < low)
        above = high is not None and value > high
        if not math.isfinite(value) or below or above:
            lo = "" if low is None else f"{'more than' if low_open else 'at least'} {low:g}"
            hi = "" if high is None else f"at most {high:g}"
            raise typer.BadParameter(
                f"{value!r} is not {' and '.join(x for x in (lo, hi) if x) or 'finite'}"
            )
        return value

    return check


def reader_options(fn: Callable[..., R]) -> Callable[..., R]:
    """Give a command the reader options (``--tz``, ``--map``, ``--from`` ...).

    The command declares a ``reader: ReaderArgs`` parameter instead of eight options; it
    receives their values as keyword arguments for :func:`import_options`.
    """
    signature = inspect.signature(fn, eval_str=True)
    params = [p for p in signature.parameters.values() if p.name != "reader"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint)
        for name, hint, default in _READER_PARAMS
    ]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        kwargs["reader"] = {name: kwargs.pop(name) for name, _, _ in _READER_PARAMS}
        return fn(*args, **kwargs)

    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is not p.empty
            else p
            for p in params
        ]
        + added
    )
    annotations = {k: v for k, v in fn.__annotations__.items() if k != "reader"}
    wrapper.__annotations__ = {**annotations, **{n: h for n, h, _ in _READER_PARAMS}}
    return wrapper


def import_options(
    *,
    tz: str | None = None,
    host: str | None = None,
    gpus_per_frame: int | None = None,
    skip_bad_rows: bool = False,
    gpu_name: str | None = None,
    nameplate: str | None = None,
    columns: str | None = None,
    interval: str | None = None,
    start: str | None = None,
    fmt: str | None = None,
    mapping: str | None = None,
    time_unit: str | None = None,
    power_unit: str = "W",
    max_power: str | None = None,
    time_from: str | None = None,
    time_to: str | None = None,
    hosts: str | None = None,
    where: list[str] | None = None,
) -> ImportOptions:
    """Return reader options from command-line strings (units parsed strictly)."""
    if gpus_per_frame is not None and gpus_per_frame < 1:
        raise BadInputError(f"--gpus-per-frame {gpus_per_frame}: must be at least 1")
    if tz is not None:
        check_zone(tz)
    nameplate_w = _watts(nameplate, "--nameplate")
    from powerkit.trace.options import POWER_UNITS
    from powerkit.trace.timeparse import TIME_UNITS

    if power_unit not in POWER_UNITS:  # refused whatever the format (never ignored)
        raise BadInputError(f"--power-unit {power_unit!r}: one of {', '.join(POWER_UNITS)}")
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise BadInputError(f"--time-unit {time_unit!r}: one of {', '.join(TIME_UNITS)}")
    return ImportOptions(
        max_power_w=_watts(max_power, "--max-power"),
        tz=tz,
        host=host,
        gpus_per_frame=gpus_per_frame,
        columns=[c.strip() for c in columns.split(",")] if columns else None,
        skip_bad_rows=skip_bad_rows,
        gpu_name=gpu_name,
        nameplate_w=nameplate_w,
        interval_s=parse_duration(interval) if interval else None,
        start=start,
        format=fmt,
        mapping=parse_map(mapping),
        time_unit=time_unit,
        power_unit=power_unit,
        time_from=time_from,
        time_to=time_to,
        hosts=None if hosts is None else parse_hosts(hosts),
        where=parse_where(where),
    )


def _watts(text: str | None, option: str) -> float | None:
    """A power option that must be watts (never a share of a nameplate); None when absent."""
    if text is None:
        return None
    spec = parse_power(text)
    if spec.is_relative:
        raise PowerkitError(f"{option} {text!r}: give watts, not a percentage")
    return spec.resolve(None)


def parse_member(text: str) -> tuple[Path, int, float | None]:
    """A fleet member ``path[:count][@NAMEPLATE]`` as (path, count, per-GPU nameplate in W or
    None): ``72b.parquet:2@700W`` is that trace's GPUs twice over, each of a 700 W nameplate.
    A file named like that (``run@2x.parquet``) is a path, not a nameplate."""
    if not Path(text).exists():
        head, at, tail = text.rpartition("@")
        if at and head:
            try:
                plate = _watts(tail, f"{text!r}: the nameplate after '@'")
            except PowerkitError as exc:
                raise BadInputError(f"{exc} (a member is PATH[:COUNT][@NAMEPLATE])") from None
            member, times, _ = parse_member(head)
            return member, times, plate
    path, sep, count = text.rpartition(":")
    if sep and count.isdigit() and path:
        if int(count) < 1:
            raise BadInputError(f"{text!r}: a member count must be at least 1")
        return Path(path), int(count), None
    if sep and count and not count.isdigit() and path and not Path(text).exists():
        raise BadInputError(f"{text!r}: the count after ':' must be a whole number")
    return Path(text), 1, None


def member_traces(members: list[tuple[Path, int, float | None]], opts: ImportOptions,
                  nameplate_w: float | None) -> list[tuple[Trace, int]]:  # fmt: skip
    """The members' traces, each read with its own nameplate where it names one, else
    ``--nameplate`` (``nameplate_w``), else its metadata's."""
    return [
        (load_trace(path, dataclasses.replace(opts, nameplate_w=plate or nameplate_w
                                              or opts.nameplate_w)), count)
        for path, count, plate in members
    ]  # fmt: skip


def make_engine(kind: str, address: str | None) -> Any:
    """The ``--engine``/``--address`` choice (powerkit.engine.Engine, checked)."""
    from powerkit.engine import Engine

    return Engine(kind, address)


def parse_hosts(text: str) -> tuple[str, ...]:
    """``--hosts node-1,node-2`` as a tuple of host names."""
    names = tuple(h.strip() for h in text.split(",") if h.strip())
    if not names:
        raise BadInputError(f"--hosts {text!r}: give host names, e.g. node-1,node-2")
    return names


def refuse_overwrite(
    out: Path | None, force: bool, inputs: Iterable[Path | None] = (), what: str = "--out"
) -> None:
    """Apply the output rules (powerkit.outputs.check_output) to ``out`` before any work: no
    overwrite without ``--force``; never one of ``inputs``, a link or a folder."""
    if out is not None:
        check_output(out, force=force, inputs=[p for p in inputs if p is not None], what=what)


def load_trace(path: Path, opts: ImportOptions) -> Trace:
    """Return the trace at ``path`` (any format), printing reader warnings on stderr."""
    trace = read_trace(path, opts)
    for message in trace.warnings:  # on stderr, with --json too: a repair is never silent
        warn(message)
    return trace


def run_sweep_job(engine: Any, config: Any, source: Any, out: Path, *, json_out: bool,
                  describe: Callable[[Any], str], job: str | None = None,
                  labels: dict[str, str] | None = None, resume: bool = False,
                  force: bool = False) -> Path:  # fmt: skip
    """:func:`powerkit.sweep.job.run_and_store` on the command line: each finished point as
    ``describe`` puts it (on a progress bar on a terminal, a log line when piped, not at all
    with ``--json``), its news on stderr, its warnings as warnings; return the file written."""
    import contextlib

    from powerkit.cli.progress import progress
    from powerkit.sweep.job import SweepCallbacks, run_and_store

    @contextlib.contextmanager
    def bar(points: int) -> Any:
        with progress("sweeping", points, quiet=json_out) as advance:
            yield lambda result, count: advance(
                note=f"[{result.point.order + 1}/{count}] {describe(result)}"
            )

    callbacks = SweepCallbacks(progress=bar, info=None if json_out else err.print, warning=warn)
    written = run_and_store(engine, config, source, out, job=job, labels=labels, resume=resume,
                            force=force, callbacks=callbacks)  # fmt: skip
    if written == out and not json_out:
        err.print(f"wrote {out}")
    return written


def option_value(option: str, parse: Callable[[str], R], text: str) -> R:
    """``parse(text)`` for the value of ``option``; a value that does not parse is one line
    that names the option (``--grid '0s': a duration must be positive``)."""
    try:
        return parse(text)
    except BadInputError as exc:
        message = str(exc)
        if message.startswith(option):
            raise
        raise type(exc)(f"{option} {message}") from None


def fill_option(text: str) -> FillPolicy:
    """``--fill``, parsed (its errors name the option)."""
    return option_value("--fill", parse_fill, text)


def grid_option(text: str | None) -> float | None:
    """``--grid``, the cell length in seconds (None: not given)."""
    return None if text is None else option_value("--grid", parse_duration, text)


def windows_option(text: str | None) -> list[float] | None:
    """``--windows``, the window lengths in seconds (None: not given)."""
    return None if text is None else option_value("--windows", parse_durations, text)
