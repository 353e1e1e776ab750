"""The ``powerkit`` command line: a thin skin over the library (parse, call, render)."""

from __future__ import annotations

import typer

from powerkit import __version__
from powerkit.cli.boundary import PowerkitGroup, err, set_debug
from powerkit.cli.carbon import carbon
from powerkit.cli.control import control_app
from powerkit.cli.econ import econ
from powerkit.cli.import_ import import_
from powerkit.cli.info import info
from powerkit.cli.oversub import oversub
from powerkit.cli.pfi import pfi_app
from powerkit.cli.pilot import pilot
from powerkit.cli.record import record
from powerkit.cli.report import report
from powerkit.cli.restore import restore
from powerkit.cli.sweep import sweep_app
from powerkit.cli.windows import windows

__all__ = ["app", "main"]

app = typer.Typer(
    name="powerkit",
    help="GPU power characterization and datacenter power-oversubscription analysis.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=PowerkitGroup,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"powerkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug", help="Show the traceback of an unexpected error (for bug reports)."
    ),
) -> None:
    """GPU power characterization and datacenter power-oversubscription analysis."""
    set_debug(debug)


app.command("record")(record)
app.command("import")(import_)
app.command("info")(info)
app.command("windows")(windows)
app.command("oversub")(oversub)
app.command("econ")(econ)
app.command("pilot")(pilot)
app.command("carbon")(carbon)
app.command("report")(report)
app.command("restore")(restore)
app.add_typer(sweep_app, name="sweep")
app.add_typer(control_app, name="control")
app.add_typer(pfi_app, name="pfi")


def main() -> None:
    """Entry point of the ``powerkit`` console script."""
    try:
        app()
    except KeyboardInterrupt:  # between the parser and a command's own boundary
        err.print("[bold red]interrupted[/]")
        raise SystemExit(130) from None
