"""powerkit: GPU power characterization and power-oversubscription analysis.

The library under the ``powerkit`` command line. Every name below loads its module on first
use, so ``import powerkit`` stays instant::

    import powerkit as pk

    trace = pk.read_trace("run.parquet")                    # any supported format
    info = pk.trace_info(trace)                               # what `powerkit info` reports
    report = pk.windowed_violations(trace, pk.parse_power("300W"), [0.5, 30, 300])
    fleet, _ = pk.compose_fleet([(trace, 4)], [0.5, 30], compose="random", draws=50)
    pk.to_plain(report)                                       # the `--json` document

See docs/api.md.
"""

from __future__ import annotations

import importlib
from typing import Any

#: the package's version, written here alone (pyproject.toml reads it), so that a command
#: learns it without reading the installed package's metadata
__version__ = "0.1.0"

#: public name -> the module that defines it
_API = {
    # traces
    "read_trace": "powerkit.trace",
    "ImportOptions": "powerkit.trace",
    "Trace": "powerkit.trace",
    "import_traces": "powerkit.trace.importer",
    # analyses
    "trace_info": "powerkit.analysis.info",
    "windowed_violations": "powerkit.analysis.windows",
    "compose_fleet": "powerkit.analysis.fleet",
    "FillPolicy": "powerkit.cells.fill",
    "parse_fill": "powerkit.cells.fill",
    # measuring in process
    "Monitor": "powerkit.monitor",
    "Measurement": "powerkit.monitor",
    "MonitorError": "powerkit.monitor",
    # sweeps and power flexibility
    "read_sweep": "powerkit.sweep.runner",
    "analyse": "powerkit.sweep.authority",
    "load_curves": "powerkit.pfi.curves",
    "compute_pfi": "powerkit.pfi.index",
    # economics and carbon
    "EconInputs": "powerkit.econ.economics",
    "economics": "powerkit.econ.economics",
    "hourly_energy": "powerkit.econ.carbon",
    "carbon_of": "powerkit.econ.carbon",
    # every command as a job: its options, then one call returning its document
    "InfoOptions": "powerkit.analysis.jobs",
    "run_info": "powerkit.analysis.jobs",
    "WindowsOptions": "powerkit.analysis.jobs",
    "run_windows": "powerkit.analysis.jobs",
    "EnergyOptions": "powerkit.analysis.jobs",
    "run_energy": "powerkit.analysis.jobs",
    "OversubOptions": "powerkit.analysis.jobs",
    "run_oversub": "powerkit.analysis.jobs",
    "UtilityOptions": "powerkit.utility.job",
    "run_utility": "powerkit.utility.job",
    "TopOptions": "powerkit.top.sources",
    "open_session": "powerkit.top.sources",
    "SweepOptions": "powerkit.sweep.job",
    "open_sweep": "powerkit.sweep.job",
    "CapOptions": "powerkit.cap.job",
    "run_cap": "powerkit.cap.job",
    "RecordOptions": "powerkit.telemetry.job",
    "run_recording": "powerkit.telemetry.job",
    "import_job": "powerkit.trace.importer",
    "TrainOptions": "powerkit.control.job",
    "run_training": "powerkit.control.job",
    "EvalOptions": "powerkit.control.job",
    "run_evaluation": "powerkit.control.job",
    "RunOptions": "powerkit.control.job",
    "run_policy": "powerkit.control.job",
    "AllocateOptions": "powerkit.pfi.job",
    "run_allocate": "powerkit.pfi.job",
    "ComputeOptions": "powerkit.pfi.job",
    "run_compute": "powerkit.pfi.job",
    "PredictOptions": "powerkit.pfi.job",
    "run_predict": "powerkit.pfi.job",
    "PfiSweepOptions": "powerkit.pfi.job",
    "run_pfi_sweep": "powerkit.pfi.job",
    "RunPlanOptions": "powerkit.bloat.job",
    "run_plan": "powerkit.bloat.job",
    "ProfileOptions": "powerkit.bloat.job",
    "run_profile": "powerkit.bloat.job",
    "PlanOptions": "powerkit.bloat.job",
    "run_bloat_plan": "powerkit.bloat.job",
    "SmoothingOptions": "powerkit.actuation.smoothing",
    "run_smoothing": "powerkit.actuation.smoothing",
    "smoothing_state": "powerkit.actuation.smoothing",
    "RestoreOptions": "powerkit.actuation.restore",
    "run_restore": "powerkit.actuation.restore",
    "ReportOptions": "powerkit.report.job",
    "run_report": "powerkit.report.job",
    "EconOptions": "powerkit.econ.job",
    "CarbonOptions": "powerkit.econ.carbon",
    "run_carbon": "powerkit.econ.carbon",
    "PilotOptions": "powerkit.econ.job",
    "run_pilot": "powerkit.econ.job",
    "run_econ": "powerkit.econ.job",
    # units and results
    "parse_power": "powerkit.core.units",
    "parse_duration": "powerkit.core.units",
    "to_plain": "powerkit.core.jsonable",
}

__all__ = ["__version__", *_API]


# Nothing is imported here until it is used: the console script installs its Ctrl-C handling
# before anything slow loads (powerkit/_entry.py).
def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'powerkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
