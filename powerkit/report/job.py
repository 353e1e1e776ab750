"""``powerkit report`` as a library job: one offline HTML page with a section per input file.

Called from Python::

    from powerkit.report.job import ReportOptions, run_report
    written = run_report(ReportOptions(Path("r.html"), trace=[Path("run.parquet")]))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from powerkit.core.errors import BadInputError, option
from powerkit.core.outputs import check_output, check_plotly_js
from powerkit.report.page import Section, write_page
from powerkit.trace.options import ImportOptions

if TYPE_CHECKING:
    from powerkit.analysis.windows import WindowsReport

__all__ = ["INPUTS", "ReportOptions", "ReportWritten", "run_report"]

#: the inputs a report takes, in the order their sections come in on the page
INPUTS = (
    "trace",
    "windows",
    "oversub",
    "cap",
    "sweep",
    "control",
    "pfi",
    "allocation",
    "bloat",
    "utility",
    "econ",
    "carbon",
    "jobs",
    "event",
)


@dataclass(frozen=True)
class ReportOptions:
    """What goes into the page.

    Attributes:
        out: the HTML file to write.
        trace: traces to overview (any format the readers take).
        sweep: sweep files (``powerkit sweep``, ``pfi sweep``).
        windows, oversub, econ, carbon, jobs, event, control, allocation, utility, cap: those
            commands'
            ``--json`` documents.
        pfi: cap curves (jobs tables or pfi sweep files) whose PFI is computed.
        bloat: ``bloat plan --out`` plans.
        title: the page's title.
        plotly_js: ``inline`` (offline), ``cdn``, or a file the pages share.
        force: replace an existing ``out`` (never an input).
        reader: how the traces are read.
    """

    out: Path
    trace: list[Path] = field(default_factory=list)
    windows: list[Path] = field(default_factory=list)
    oversub: list[Path] = field(default_factory=list)
    sweep: list[Path] = field(default_factory=list)
    control: list[Path] = field(default_factory=list)
    pfi: list[Path] = field(default_factory=list)
    allocation: list[Path] = field(default_factory=list)
    bloat: list[Path] = field(default_factory=list)
    utility: list[Path] = field(default_factory=list)
    cap: list[Path] = field(default_factory=list)
    econ: list[Path] = field(default_factory=list)
    carbon: list[Path] = field(default_factory=list)
    jobs: list[Path] = field(default_factory=list)
    event: list[Path] = field(default_factory=list)
    title: str = "powerkit report"
    plotly_js: str = "inline"
    force: bool = False
    reader: ImportOptions = field(default_factory=ImportOptions)

    def inputs(self) -> list[Path]:
        """Every input file, of every kind."""
        return [path for kind in INPUTS for path in getattr(self, kind)]


@dataclass(frozen=True)
class ReportWritten:
    """The page written: its path, size and number of sections."""

    path: Path
    bytes: int
    sections: int


def _documents(opts: ReportOptions, judged: list[WindowsReport]) -> dict[str, list[Section]]:
    """The sections of the small JSON inputs (read first: a bad one fails before long work);
    ``judged``: the ``--windows`` reports, read already."""
    from powerkit.analysis.fleet import FleetReport
    from powerkit.bloat.plan_file import BloatPlan
    from powerkit.cap.document import CapReport
    from powerkit.control.judge import EvalReport
    from powerkit.econ.carbon import read_carbon
    from powerkit.econ.economics import EconReport
    from powerkit.jobs.report import JobsReport
    from powerkit.pfi.allocate import AllocationResult
    from powerkit.pfi.curves import load_curves
    from powerkit.pfi.index import compute_pfi
    from powerkit.report import (
        bloat_section,
        cap_section,
        carbon_section,
        control_section,
        econ_section,
        event_section,
        fleet_section,
        jobs_section,
        pfi_section,
        utility_section,
        windows_section,
    )
    from powerkit.utility.certificate import EventReport
    from powerkit.utility.document import UtilityDocument

    pfi = (
        []
        if not opts.pfi
        else [pfi_section.compute_section([compute_pfi(c) for c in load_curves(opts.pfi)])]
    )
    return {
        "windows": [windows_section.windows_section(w) for w in judged],
        "oversub": [fleet_section.fleet_summary_section(FleetReport.read(p)) for p in opts.oversub],
        "cap": [cap_section.cap_section(CapReport.read(p), str(p)) for p in opts.cap],
        "control": [
            control_section.control_summary_section(EvalReport.read(p)) for p in opts.control
        ],
        "pfi": pfi,
        "allocation": [
            pfi_section.allocate_section(AllocationResult.read(p)) for p in opts.allocation
        ],
        "bloat": [bloat_section.bloat_section(BloatPlan.read(p), str(p)) for p in opts.bloat],
        "utility": [
            utility_section.utility_section(UtilityDocument.read(p), str(p)) for p in opts.utility
        ],
        "econ": [econ_section.econ_section(EconReport.read(p)) for p in opts.econ],
        "carbon": [carbon_section.carbon_section(read_carbon(p)) for p in opts.carbon],
        "jobs": [jobs_section.jobs_section(JobsReport.read(p), str(p)) for p in opts.jobs],
        "event": [event_section.event_section(EventReport.read(p), str(p)) for p in opts.event],
    }


def run_report(
    opts: ReportOptions,
    *,
    on_step: Callable[[str], None] = lambda what: None,
    on_warning: Callable[[str], None] = lambda line: None,
) -> ReportWritten:
    """Write the page: a section per input, the traces' and sweeps' (the long work) told to
    ``on_step`` as each is done (its name, then "" for the page itself); the traces' reader
    warnings go to ``on_warning``. ``steps(opts)`` is how many steps there are."""
    from powerkit.analysis.windows import WindowsReport
    from powerkit.report.sweep_section import sweep_section
    from powerkit.report.trace_section import trace_section
    from powerkit.sweep.authority import analyse
    from powerkit.sweep.runner import read_sweep
    from powerkit.trace import read_trace

    given = opts.inputs()
    if not given:
        names = ", ".join(option(kind) for kind in INPUTS)
        raise BadInputError(f"nothing to report: give at least one of {names}")
    check_output(opts.out, force=opts.force, inputs=given, what=option("out"))
    check_plotly_js(opts.plotly_js, force=opts.force, out=opts.out, inputs=given)
    for path in opts.sweep:
        if not path.exists():
            raise BadInputError(f"{path}: no such file")
    # (the per-GPU budget a windows report judged a trace by is drawn on that trace too)
    judged = [WindowsReport.read(p) for p in opts.windows]
    documents = _documents(opts, judged)
    sections = []
    for kind in INPUTS:  # (the page's order)
        sections += documents.get(kind, [])
        if kind == "trace":
            for path in opts.trace:
                trace = read_trace(path, opts.reader)
                for message in trace.warnings:  # a repair is never silent
                    on_warning(message)
                mine = [w for w in judged if w.scope == "gpu" and _same(w.trace, path)]
                sections.append(trace_section(trace, mine[0] if mine else None))
                on_step(f"trace {path}")
        elif kind == "sweep":
            for path in opts.sweep:
                data = read_sweep(path)
                sections.append(sweep_section(analyse(data), data.config.varied()))
                on_step(f"sweep {path}")
    write_page(opts.out, opts.title, sections, opts.plotly_js)
    on_step("")
    return ReportWritten(opts.out, opts.out.stat().st_size, len(sections))


def _same(judged: str | None, path: Path) -> bool:
    """Whether a windows report's trace (as its command was given it) is the file ``path``."""
    if not judged:
        return False
    try:
        return Path(judged).resolve() == Path(path).resolve()
    except OSError:
        return judged == str(path)


def steps(opts: ReportOptions) -> int:
    """The steps ``run_report`` tells: one per trace and sweep, one for the page."""
    return len(opts.trace) + len(opts.sweep) + 1
