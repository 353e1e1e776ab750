"""``powerkit jobs --by-label pod``: the jobs are the values of a label the trace's samples carry
(a Kubernetes pod, read from Prometheus as ``label_pod``), each step's energy going to the
value its first sample carries, exactly as ``info --by pod`` counts it. Samples without the
label are unattributed."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from powerkit.analysis.info import energy_by_label
from powerkit.core.errors import BadInputError, option
from powerkit.jobs.report import JobRow, JobsOptions, JobsReport
from powerkit.trace.model import Trace

__all__ = ["jobs_by_label"]


def jobs_by_label(
    trace: Trace,
    opts: JobsOptions,
    intensity: Callable[[np.ndarray], np.ndarray] | None,
    hourly: bool,
) -> JobsReport:
    """The jobs report of ``trace`` by the label ``opts.by_label`` (module docstring)."""
    assert opts.by_label is not None
    if hourly:
        raise BadInputError(
            f"{option('by-label')} takes a constant intensity ({option('region')} or "
            f"{option('intensity')}), not {option('intensity-csv')}"
        )
    groups = energy_by_label(trace, opts.by_label, opts.fill, opts.engine)
    total = sum(g.energy_j for g in groups)
    rows = []
    for g in groups:
        if g.value is None:
            continue
        grams = None
        if intensity is not None:  # (a constant)
            grams = float(intensity(np.zeros(1))[0]) * g.energy_j / 3.6e6
        rows.append(
            JobRow(
                job=g.value,
                user=None,
                account=None,
                partition=None,
                state=None,
                start="",
                end=None,
                hosts=[],
                gpus=float(g.gpus),
                gpu_hours=g.gpu_seconds / 3600,
                energy_j=g.energy_j,
                coverage=None,
                mean_power_w=g.energy_j / g.gpu_seconds if g.gpu_seconds > 0 else None,
                peak_power_w=None,
                j_per_gpu_hour=g.energy_j / (g.gpu_seconds / 3600) if g.gpu_seconds > 0 else None,
                idle_share=None,
                cost=None
                if opts.price_per_kwh is None
                else g.energy_j / 3.6e6 * opts.price_per_kwh,
                co2_kg=None if grams is None else grams / 1000,
                overlap_s=0.0,
                indices_known=True,
            )
        )
    attributed = sum(r.energy_j for r in rows)
    return JobsReport(
        f"label:{opts.by_label}",
        rows,
        total,
        attributed,
        total - attributed,
        notes=[
            f"jobs are the values of the samples' {opts.by_label!r} label; GPU-hours are the "
            "time the trace integrated with it (no scheduler record: no coverage)"
        ],
    )
