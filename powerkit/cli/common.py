"""What every command shares: error handling, JSON output, stderr console, reader options."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from powerkit.cli.boundary import err, handle_errors, warn
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError
from powerkit.core.outputs import check_output, check_plotly_js
from powerkit.core.tables import Column, cells
from powerkit.trace import ImportOptions, Trace, read_trace
from powerkit.trace.arguments import read_members

if TYPE_CHECKING:  # (Rich is loaded when something is shown: a --json run never needs it)
    from rich.console import Console

__all__ = [
    "Page",
    "emit_json",
    "err",
    "finish",
    "handle_errors",
    "load_members",
    "load_trace",
    "out_console",
    "print_pairs",
    "print_table",
    "refuse_overwrite",
    "sweep_callbacks",
    "warn",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def out_console(**options: Any) -> Console:
    """The stdout console for tables (``options``: Rich's, e.g. ``stderr=True``): the
    terminal's width, or 120 columns when piped (wider where a table needs it: see
    :class:`powerkit.core.consoles.TableConsole`)."""
    from powerkit.core.consoles import TableConsole

    console = TableConsole(**options)
    return console if console.is_terminal else TableConsole(width=120, **options)


def print_table(
    columns: Sequence[Column], rows: Iterable[Any], console: Console | None = None
) -> None:
    """Print a declared table (powerkit.core.tables): the key column left, numbers right."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for c in columns:
        table.add_column(c.header, no_wrap=True, justify="left" if c.key or c.text else "right")
    for row in cells(columns, rows):
        table.add_row(*row)
    (console or out_console()).print(table)


def print_pairs(rows: Iterable[tuple[str, str]], console: Console | None = None) -> None:
    """Print labelled figures, a line each (a two-column table without a header)."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_header=False, pad_edge=False)
    for name, value in rows:
        table.add_row(name, value)
    (console or out_console()).print(table)


def emit_json(result: Document) -> None:
    """Print a command's result as its one JSON document on stdout: ``result.to_doc()``, its
    kind and version first (powerkit.core.documents), NaN and inf as null."""
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


def load_members(
    members: list[tuple[Path, int, float | None]], opts: ImportOptions, nameplate_w: float | None
) -> list[tuple[Trace, int]]:
    """:func:`powerkit.trace.arguments.read_members`, each trace's warnings on stderr."""
    traces = read_members(members, opts, nameplate_w)
    for trace, _ in traces:
        for message in trace.warnings:
            warn(message)
    return traces


def make_engine(kind: str, address: str | None) -> Any:
    """The ``--engine``/``--address`` choice (powerkit.engine.Engine, checked)."""
    from powerkit.engine import Engine

    return Engine(kind, address)


def refuse_overwrite(
    out: Path | None, force: bool, inputs: Iterable[Path | None] = (), what: str = "--out"
) -> None:
    """Apply the output rules (powerkit.core.outputs.check_output) to ``out`` before any work: no
    overwrite without ``--force``; never one of ``inputs``, a link or a folder."""
    if out is not None:
        check_output(out, force=force, inputs=[p for p in inputs if p is not None], what=what)


def load_trace(path: Path, opts: ImportOptions) -> Trace:
    """Return the trace at ``path`` (any format), printing reader warnings on stderr."""
    trace = read_trace(path, opts)
    for message in trace.warnings:  # on stderr, with --json too: a repair is never silent
        warn(message)
    return trace


def print_explanation(trace: Trace, *, stderr: bool) -> None:
    """``--explain``: how the trace was read (on stderr where stdout holds the result)."""
    from rich.markup import escape

    from powerkit.trace.explain import EXPLAIN_COLUMNS, explain

    told = explain(trace)
    console = out_console(stderr=stderr, highlight=False)
    for line in told.lines():
        console.print(escape(line), soft_wrap=True)
    print_table(EXPLAIN_COLUMNS, told.columns, console)


def sweep_callbacks(json_out: bool) -> Any:
    """What a sweep tells the command line (powerkit.sweep.job.SweepCallbacks): each finished
    point as ``PointRun.describe`` puts it (on a progress bar on a terminal, a log line when
    piped, not at all with ``--json``), its news on stderr, its warnings as warnings."""
    import contextlib

    from powerkit.cli.progress import progress
    from powerkit.sweep.job import SweepCallbacks

    @contextlib.contextmanager
    def bar(points: int) -> Any:
        with progress("sweeping", points, quiet=json_out) as advance:
            yield lambda result, count: advance(
                note=f"[{result.point.order + 1}/{count}] {result.describe()}"
            )

    return SweepCallbacks(progress=bar, info=None if json_out else err.print, warning=warn)


class Page:
    """The HTML page a command writes (``--html``, ``--plotly-js``): one rule for every page,
    applied before any work: the page is never one of ``inputs``, a link or a folder, nor
    replaced without ``--force``; ``--plotly-js FILE`` never an input, the page, a link, a
    folder or a file that is not Plotly's own without ``--force`` (core.outputs)."""

    def __init__(
        self, html: Path | None, plotly_js: str, force: bool, inputs: Iterable[Path | None]
    ) -> None:
        self.html, self.plotly_js = html, plotly_js
        given = [p for p in inputs if p is not None]
        if html is not None:
            check_output(html, force=force, inputs=given, what="--html")
            check_plotly_js(plotly_js, force=force, out=html, inputs=given)

    def write(self, title: str, sections: Callable[[], list[Any]]) -> None:
        """Write the page titled ``title`` with ``sections()`` (built only when there is a
        page to write)."""
        if self.html is not None:
            from powerkit.report.page import write_page

            write_page(self.html, title, sections(), self.plotly_js)


def only_with(ctx: Any, name: str, *used: str) -> None:
    """Refuse the options given with the option ``name`` that it does not use (never ignored)."""
    flags = {p.name: p.opts[0] for p in ctx.command.params}
    given = [f for n, f in flags.items() if n not in (name, *used) and _given(ctx, n)]
    if given:
        raise BadInputError(f"{flags[name]} takes none of the options given ({', '.join(given)})")


def _given(ctx: Any, name: str) -> bool:
    return getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"


def options_from(cls: Callable[..., T], values: dict[str, Any], **given: Any) -> T:
    """``cls(...)`` (a job's options) from a command's parameters named as its fields
    (``values``: the command's ``locals()``), ``given`` for those parsed or named otherwise."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in values.items() if k in names and k not in given}, **given)
