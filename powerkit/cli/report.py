"""``powerkit report``: one self-contained HTML page from the files a user has."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.cli.progress import progress
from powerkit.core.errors import BadInputError
from powerkit.report.job import INPUTS, ReportOptions, run_report, steps
from powerkit.trace.options import ImportOptions

__all__ = ["report"]

Files = list[Path] | None


@cli.handle_errors
@reading.reader_options()
def report(
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write.")],
    trace: Annotated[Files, typer.Option(help="Trace(s) to overview (any format).")] = None,
    sweep: Annotated[Files, typer.Option(help="Sweep file(s) from powerkit sweep.")] = None,
    windows: Annotated[Files, typer.Option(help="`windows --json` output(s).")] = None,
    oversub: Annotated[Files, typer.Option(help="`oversub --json` output(s).")] = None,
    econ: Annotated[Files, typer.Option(help="`econ --json` output(s).")] = None,
    carbon: Annotated[Files, typer.Option(help="`carbon --json` output(s).")] = None,
    jobs: Annotated[Files, typer.Option(help="`jobs --json` output(s).")] = None,
    event: Annotated[Files, typer.Option(help="`utility event --json` certificate(s).")] = None,
    control: Annotated[Files, typer.Option(help="`control eval --json` output(s).")] = None,
    pfi: Annotated[Files, typer.Option(help="Cap curves (jobs tables or pfi sweeps).")] = None,
    allocation: Annotated[Files, typer.Option(help="`pfi allocate --json` output(s).")] = None,
    bloat: Annotated[Files, typer.Option(help="`bloat plan --out` plan(s).")] = None,
    utility: Annotated[Files, typer.Option(help="`utility --json` output(s).")] = None,
    cap: Annotated[Files, typer.Option(help="`cap --json` output(s).")] = None,
    old_grid: Annotated[Files, typer.Option("--grid", hidden=True, help="Now --utility.")] = None,
    title: Annotated[str, typer.Option(help="Page title.")] = "powerkit report",
    plotly_js: opt.PlotlyJs = "inline",
    force: opt.Force = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Write one offline HTML page with a section per input (figures captioned)."""
    if old_grid:  # (--grid is the cell length everywhere else)
        raise BadInputError("report --grid FILE is now --utility FILE (a `utility --json` output)")
    given = locals()
    opts = cli.options_from(ReportOptions, given, **{k: given[k] or [] for k in INPUTS})
    several = steps(opts) > 2  # piped, a line per input when there are several
    with progress("building the report", steps(opts)) as advance:
        done = run_report(
            opts, on_step=lambda what: advance(1, what if several else ""), on_warning=cli.warn
        )
    cli.err.print(f"wrote {done.path} ({done.bytes / 1e6:.1f} MB, {done.sections} section(s))")
