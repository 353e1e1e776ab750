"""``powerkit report``: one self-contained HTML page from the files a user has."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.analysis.fleet import FleetReport
from powerkit.analysis.windows import WindowsReport
from powerkit.bloat.plan_file import BloatPlan
from powerkit.cap.document import CapReport
from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.cli.progress import progress
from powerkit.control.judge import EvalReport
from powerkit.core.errors import BadInputError
from powerkit.core.outputs import check_plotly_js
from powerkit.econ.carbon import read_carbon
from powerkit.econ.economics import EconReport
from powerkit.pfi.allocate import AllocationResult
from powerkit.pfi.curves import load_curves
from powerkit.pfi.index import compute_pfi
from powerkit.report import write_page
from powerkit.report.bloat_section import bloat_section
from powerkit.report.cap_section import cap_section
from powerkit.report.carbon_section import carbon_section
from powerkit.report.control_section import control_summary_section
from powerkit.report.econ_section import econ_section
from powerkit.report.fleet_section import fleet_summary_section
from powerkit.report.pfi_section import allocate_section, compute_section
from powerkit.report.sweep_section import sweep_section
from powerkit.report.trace_section import trace_section
from powerkit.report.utility_section import utility_section
from powerkit.report.windows_section import windows_section
from powerkit.sweep.authority import analyse
from powerkit.sweep.runner import read_sweep
from powerkit.trace.options import ImportOptions
from powerkit.utility.document import UtilityDocument

__all__ = ["report"]


@cli.handle_errors
@reading.reader_options()
def report(
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write.")],
    trace: Annotated[
        list[Path] | None, typer.Option(help="Trace(s) to overview (any format).")
    ] = None,
    sweep: Annotated[
        list[Path] | None, typer.Option(help="Sweep file(s) from powerkit sweep.")
    ] = None,
    windows: Annotated[list[Path] | None, typer.Option(help="`windows --json` output(s).")] = None,
    oversub: Annotated[list[Path] | None, typer.Option(help="`oversub --json` output(s).")] = None,
    econ: Annotated[list[Path] | None, typer.Option(help="`econ --json` output(s).")] = None,
    carbon: Annotated[list[Path] | None, typer.Option(help="`carbon --json` output(s).")] = None,
    control: Annotated[
        list[Path] | None, typer.Option(help="`control eval --json` output(s).")
    ] = None,
    pfi: Annotated[
        list[Path] | None, typer.Option(help="Cap curves (jobs tables or pfi sweep files) for PFI.")
    ] = None,
    allocation: Annotated[
        list[Path] | None, typer.Option(help="`pfi allocate --json` output(s).")
    ] = None,
    bloat: Annotated[list[Path] | None, typer.Option(help="`bloat plan --out` plan(s).")] = None,
    utility: Annotated[list[Path] | None, typer.Option(help="`utility --json` output(s).")] = None,
    cap: Annotated[list[Path] | None, typer.Option(help="`cap --json` output(s).")] = None,
    old_grid: Annotated[
        list[Path] | None, typer.Option("--grid", hidden=True, help="The old name of --utility.")
    ] = None,
    title: Annotated[str, typer.Option(help="Page title.")] = "powerkit report",
    plotly_js: opt.PlotlyJs = "inline",
    force: opt.Force = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Write one offline HTML page with a section per input (figures captioned)."""
    if old_grid:  # (--grid is the cell length everywhere else)
        raise BadInputError("report --grid FILE is now --utility FILE (a `utility --json` output)")
    groups = (
        trace,
        sweep,
        windows,
        oversub,
        econ,
        carbon,
        control,
        pfi,
        allocation,
        bloat,
        utility,
        cap,
    )
    if not any(groups):
        raise BadInputError(
            "nothing to report: give at least one --trace, --windows, --oversub, --sweep, "
            "--control, --pfi, --allocation, --bloat, --utility, --cap, --econ or --carbon"
        )
    given = [path for group in groups for path in group or []]
    cli.refuse_overwrite(out, force, given)
    check_plotly_js(plotly_js, force=force, out=out, inputs=given)
    for path in sweep or []:
        if not path.exists():
            raise BadInputError(f"{path}: no such file")
    # the small JSON inputs first: a bad one fails before the long work
    judged = [windows_section(WindowsReport.read(p)) for p in windows or []]
    fleets = [fleet_summary_section(FleetReport.read(p)) for p in oversub or []]
    fleets += [cap_section(CapReport.read(p), str(p)) for p in cap or []]
    evaluations = [control_summary_section(EvalReport.read(p)) for p in control or []]
    shares = [allocate_section(AllocationResult.read(p)) for p in allocation or []]
    plans = [bloat_section(BloatPlan.read(p), str(p)) for p in bloat or []]
    plans += [utility_section(UtilityDocument.read(p), str(p)) for p in utility or []]
    flexibility = [compute_section([compute_pfi(c) for c in load_curves(pfi)])] if pfi else []
    economics = [econ_section(EconReport.read(p)) for p in econ or []]
    economics += [carbon_section(read_carbon(p)) for p in carbon or []]
    opts = reader
    steps = len(trace or []) + len(sweep or []) + 1
    several = steps > 2  # piped, a line per input when there are several
    with progress("building the report", steps) as advance:
        sections = []
        for path in trace or []:
            sections.append(trace_section(cli.load_trace(path, opts)))
            advance(1, f"trace {path}" if several else "")
        sections += judged + fleets
        for path in sweep or []:
            data = read_sweep(path)
            sections.append(sweep_section(analyse(data), data.config.varied()))
            advance(1, f"sweep {path}" if several else "")
        sections += evaluations + flexibility + shares + plans + economics
        write_page(out, title, sections, plotly_js)
        advance(1)
    cli.err.print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(sections)} section(s))")
