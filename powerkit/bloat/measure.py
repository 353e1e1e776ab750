"""Measure a stage profile on real GPUs: each stage's forward and backward computation at each
locked SM clock, through the sweep runner (``bloat profile --backend nvml``).

The user's command runs one stage's computation over and over (its own warm-up included) and
prints JSON lines ``{"microbatches": n, "seconds": s}``: n microbatches done in s seconds. Per
point, the time of one microbatch is s / n from the last such line, and its energy is the
measured GPUs' mean total power over the point (after the warm-up) times that time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from powerkit.actuation.caps import LockedClocks
from powerkit.bloat.profile import INSTRUCTIONS, Choices, Profile
from powerkit.core.errors import BadInputError, option
from powerkit.sweep.backends import CmdBackend, PointRun
from powerkit.sweep.runner import SweepConfig, run_sweep
from powerkit.telemetry.base import TelemetrySource

__all__ = [
    "MeasuredProfile",
    "command_for",
    "measure_on_gpus",
    "measure_profile",
    "options_from_runs",
]


@dataclass
class MeasuredProfile:
    """The profile and the points that could not be measured (``stage instruction f: why``)."""

    profile: Profile
    failures: list[str] = field(default_factory=list)
    interrupted: bool = False


def command_for(template: str, stage: int, instruction: str) -> str:
    """The command for one stage and instruction; ``{gpu_frequency_mhz}`` is left to the sweep."""
    return template.replace("{stage}", str(stage)).replace("{instruction}", instruction)


def options_from_runs(runs: list[PointRun]) -> tuple[Choices | None, list[str]]:
    """One computation's options from its measured points (fastest first), and the failures."""
    rows, failures = {}, []
    for run in runs:
        f = run.point.gpu_frequency_mhz
        assert f is not None
        if run.error or not run.tokens_per_s or run.power_w.size == 0:
            failures.append(f"{f:g} MHz: {run.error or 'no microbatches measured'}")
            continue
        seconds = 1.0 / run.tokens_per_s
        rows[f] = (seconds, float(run.power_w.sum(axis=0).mean()) * seconds)
    if not rows:
        return None, failures
    freqs = np.array(sorted(rows, reverse=True))
    return Choices(
        freqs, np.array([rows[f][0] for f in freqs]), np.array([rows[f][1] for f in freqs])
    ), failures


def measure_profile(
    template: str,
    stages: int,
    frequencies: list[float],
    source: TelemetrySource,
    clocks: LockedClocks,
    config: SweepConfig,
    *,
    stop: threading.Event | None = None,
    on_point: Callable[[str], None] | None = None,
) -> MeasuredProfile:
    """Run every (stage, instruction, frequency) point with the clock locked; the caller holds
    ``clocks`` in a ``with`` (locks reset on exit) and ``source`` open."""
    if "{stage}" not in template:
        raise BadInputError(
            f"{option('run')} needs a {{stage}} placeholder (and usually {{instruction}})"
        )
    stop = stop or threading.Event()
    config.axes = {"gpu_frequency_mhz": [float(f) for f in frequencies]}
    options: dict[tuple[int, str], Choices] = {}
    result = MeasuredProfile(Profile(stages, options, "nvml"))
    for stage in range(stages):
        for instruction in INSTRUCTIONS:
            backend = CmdBackend(
                command_for(template, stage, instruction), source, unit="microbatches"
            )

            def done(run: PointRun, count: int, s: int = stage, i: str = instruction) -> None:
                if on_point is not None:
                    state = f"failed: {run.error}" if run.error else f"{run.power_w.mean():.1f} W"
                    on_point(f"stage {s} {i} {run.point.gpu_frequency_mhz:g} MHz: {state}")

            data = run_sweep(backend, config, clocks=clocks, stop=stop, on_point=done)
            found, failed = options_from_runs(data.runs)
            result.failures += [f"stage {stage} {instruction} {why}" for why in failed]
            if data.interrupted or stop.is_set():
                result.interrupted = True
                return result
            if found is None:
                raise BadInputError(
                    f"stage {stage} {instruction}: no frequency could be measured "
                    f"({'; '.join(failed[:2])})"
                )
            options[(stage, instruction)] = found
    return result


def measure_on_gpus(
    template: str,
    stages: int,
    frequencies: list[float],
    gpus: list[int] | None,
    vendor: str,
    config: SweepConfig,
    on_point: Callable[[str], None] | None = None,
) -> MeasuredProfile:
    """:func:`measure_profile` on the GPUs ``gpus`` of ``vendor`` (None: all), opened here,
    their clocks locked for each point and put back at the end, on errors and on signals
    (a signal ends the measuring: the result says it was interrupted)."""
    from powerkit.telemetry.recorder import stop_on_signals
    from powerkit.telemetry.vendors import open_gpu_source

    source = open_gpu_source(gpus, vendor)
    stop = threading.Event()
    try:
        with stop_on_signals(stop), LockedClocks(source.gpus) as clocks:
            return measure_profile(
                template, stages, frequencies, source, clocks, config, stop=stop, on_point=on_point
            )
    finally:
        source.close()
