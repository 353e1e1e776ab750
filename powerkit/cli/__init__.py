"""The ``powerkit`` command line: a thin skin over the library (parse, call, render).

Commands load lazily: the root knows each command's module and one-line help from the table
below, and imports a command's module (with its NumPy, Polars, SciPy or Plotly) only when that
command runs or shows its own help. ``powerkit --help`` and ``--version`` import none of them.
"""

from __future__ import annotations

from typing import Annotated

import typer

from powerkit import __version__
from powerkit.cli.boundary import LazyGroup, err, set_debug

__all__ = ["COMMANDS", "DEPRECATED", "SUBCOMMANDS", "app", "main"]

#: name -> (module, attribute, one-line help); the attribute is a function or a Typer app
COMMANDS: dict[str, tuple[str, str, str]] = {
    "record": ("powerkit.cli.record", "record", "Record GPU power (NVML, amd-smi, sim)."),
    "import": ("powerkit.cli.import_", "import_", "Turn any log into one canonical trace."),
    "info": ("powerkit.cli.info", "info", "GPUs, span, gaps, coverage, power, energy."),
    "windows": ("powerkit.cli.windows", "windows", "How often power exceeds a budget."),
    "oversub": ("powerkit.cli.oversub", "oversub", "Fleet peaks and safe oversubscription."),
    "cap": ("powerkit.cli.cap", "cap", "What capping a fleet to a limit costs, per policy."),
    "econ": ("powerkit.cli.econ", "econ", "Provisioned power, capex and energy of a fleet."),
    "pilot": ("powerkit.cli.pilot", "pilot", "A pilot plan for an operator."),
    "carbon": ("powerkit.cli.carbon", "carbon", "Emissions of a trace or a scenario."),
    "jobs": ("powerkit.cli.jobs", "jobs", "Energy, cost and carbon per job, user, account."),
    "energy": ("powerkit.cli.energy", "energy", "Energy per training step or workload phase."),
    "bloat": ("powerkit.cli.bloat", "bloat_app", "Energy bloat of pipeline training, and plans."),
    "utility": ("powerkit.cli.utility", "utility", "Fleet power swings as the utility sees them."),
    "report": ("powerkit.cli.report", "report", "One self-contained HTML page."),
    "restore": ("powerkit.cli.restore", "restore", "Put back limits a killed run left."),
    "smoothing": ("powerkit.cli.smoothing", "smoothing_app", "Power smoothing (Blackwell)."),
    "top": ("powerkit.cli.top", "top", "The live view: power against a budget."),
    "sweep": ("powerkit.cli.sweep", "sweep_app", "Which knob moves power (authority)."),
    "control": ("powerkit.cli.control", "control_app", "A controller that holds a budget."),
    "pfi": ("powerkit.cli.pfi", "pfi_app", "Power flexibility of jobs, and whom to cap."),
}

#: subcommands of a command that takes positional arguments of its own (``cap MEMBERS``)
SUBCOMMANDS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("cap", "latency"): (
        "powerkit.cli.cap",
        "latency",
        "How fast power followed each cap change of a recording.",
    ),
    ("utility", "event"): (
        "powerkit.cli.utility",
        "event",
        "Did the fleet deliver a curtailment: a certificate against a baseline.",
    ),
}

#: old names that still run, unlisted, for one release: name -> (module, attribute, help)
DEPRECATED: dict[str, tuple[str, str, str]] = {
    "grid": ("powerkit.cli.utility", "grid", "The old name of `utility` (deprecated).")
}

app = typer.Typer(
    name="powerkit",
    help="GPU power characterization and datacenter power-oversubscription analysis.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)
LazyGroup.table = COMMANDS
LazyGroup.hidden_table = DEPRECATED
LazyGroup.sub_table = SUBCOMMANDS


def _version(value: bool) -> None:
    if value:
        typer.echo(f"powerkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option(help="Show the traceback of an unexpected error (for bug reports).")
    ] = False,
) -> None:
    """GPU power characterization and datacenter power-oversubscription analysis."""
    set_debug(debug)


def main() -> None:
    """Entry point of the ``powerkit`` console script."""
    try:
        app()
    except KeyboardInterrupt:  # between the parser and a command's own boundary
        err.print("[bold red]interrupted[/]", markup=True)
        raise SystemExit(130) from None
