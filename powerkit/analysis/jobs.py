"""The analysis commands as jobs: ``XOptions`` (frozen, units parsed, choices kept) and
``run_x(trace or traces, opts, *, on_progress)`` returning the command's document, so that a
command line and a Python caller make the same call.

The traces are read first, with the reader options of every source
(``read_trace(path, ImportOptions(...))``); the jobs take what was read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.core.choices import Compose, Mode, Scope
from powerkit.core.units import PowerSpec
from powerkit.engine import LOCAL, Engine

if TYPE_CHECKING:  # (each job imports its analysis when it runs: a command loads its own)
    from powerkit.analysis.energy import EnergyReport
    from powerkit.analysis.fleet import FleetReport, FleetTimeline
    from powerkit.analysis.info import TraceInfo
    from powerkit.analysis.windows import WindowsReport
    from powerkit.trace.model import Trace

__all__ = [
    "EnergyOptions",
    "InfoOptions",
    "OversubOptions",
    "WindowsOptions",
    "run_energy",
    "run_info",
    "run_oversub",
    "run_windows",
]


@dataclass(frozen=True)
class InfoOptions:
    """What ``powerkit info`` is given.

    Attributes:
        fill: gap fill on the grid (``--fill``; default none).
        grid_s: cell length in s (``--grid``; None: the trace's interval, rounded up).
        by: energy per value of this label (``--by pod``; None: not asked).
        engine: where the per-series work runs (``--engine``; default local).
        sensor_check: also what the readings say of their sensor (``--sensor-check``).
    """

    fill: FillPolicy = NO_FILL
    grid_s: float | None = None
    by: str | None = None
    engine: Engine = LOCAL
    sensor_check: bool = False


def run_info(trace: Trace, opts: InfoOptions = InfoOptions()) -> TraceInfo:
    """What ``powerkit info`` reports of ``trace``."""
    from powerkit.analysis.info import info_report

    return info_report(
        trace, opts.fill, opts.grid_s, opts.by, opts.engine, check_sensor=opts.sensor_check
    )


@dataclass(frozen=True)
class WindowsOptions:
    """What ``powerkit windows`` is given.

    Attributes:
        budget: the power budget (``--budget 300W`` or ``80%`` of nameplate).
        windows_s: window lengths in s (``--windows``; None: the defaults on the grid).
        mode: rolling or tumbling windows (``--mode``; default rolling).
        scope: each GPU, or the GPUs' sum (``--scope``; default gpu).
        grid_s: cell length in s (``--grid``; None: the trace's interval, rounded up).
        fill: gap fill on the grid (``--fill``; default none).
        engine: where the per-series work runs (``--engine``; default local).
    """

    budget: PowerSpec
    windows_s: list[float] | None = None
    mode: Mode = Mode.rolling
    scope: Scope = Scope.gpu
    grid_s: float | None = None
    fill: FillPolicy = NO_FILL
    engine: Engine = LOCAL


def run_windows(trace: Trace, opts: WindowsOptions) -> WindowsReport:
    """What ``powerkit windows`` reports of ``trace``: violations per window length."""
    from powerkit.analysis.windows import windowed_violations

    return windowed_violations(
        trace,
        opts.budget,
        opts.windows_s,
        mode=opts.mode.value,
        scope=opts.scope.value,
        grid_s=opts.grid_s,
        fill=opts.fill,
        engine=opts.engine,
    )


@dataclass(frozen=True)
class EnergyOptions:
    """What ``powerkit energy`` is given (one of ``steps`` and ``phases``).

    Attributes:
        steps: a steps file, or ``Path("trace")`` for the trace's own step column (``--steps``).
        phases: a phases file (``--phases``).
        tokens: every step carries tokens; J/token per step (``--tokens``).
        wait_below: power under which a GPU waits (``--wait-below``; None: not judged).
        wait_util: utilization in % under which a GPU waits (``--wait-util``).
        fill: gap fill on the grid (``--fill``; default none).
        engine: where the per-series work runs (``--engine``; default local).
        tz: zone of the steps file's naive times (``--tz``; None: UTC, said).
    """

    steps: Path | None = None
    phases: Path | None = None
    tokens: bool = False
    wait_below: PowerSpec | None = None
    wait_util: float | None = None
    fill: FillPolicy = NO_FILL
    engine: Engine = LOCAL
    tz: str | None = None


def run_energy(trace: Trace, opts: EnergyOptions) -> EnergyReport:
    """What ``powerkit energy`` reports of ``trace``: energy per step or phase."""
    from powerkit.analysis.energy import energy_report

    return energy_report(
        trace,
        steps=opts.steps,
        phases=opts.phases,
        tokens=opts.tokens,
        wait_below=opts.wait_below,
        wait_util=opts.wait_util,
        fill=opts.fill,
        engine=opts.engine,
        tz=opts.tz,
    )


@dataclass(frozen=True)
class OversubOptions:
    """What ``powerkit oversub`` is given.

    Attributes:
        windows_s: window lengths in s (``--windows``; None: the defaults on the grid).
        compose: aligned, random or staggered starts (``--compose``; default aligned).
        draws: Monte-Carlo draws of a random composition (``--draws``; default 200).
        seed: seed of the random offsets (``--seed``; default 0).
        capacity: the feed, to judge violations against (``--capacity``; None: not judged).
        margin: headroom kept, a share (``--margin 5%`` is 0.05; default 0).
        grid_s: cell length in s (``--grid``; None: the traces' interval, rounded up).
        fill: gap fill on the grid (``--fill``; default none).
        engine: where the per-series work runs (``--engine``; default local).
    """

    windows_s: list[float] | None = None
    compose: Compose = Compose.aligned
    draws: int = 200
    seed: int = 0
    capacity: PowerSpec | None = None
    margin: float = 0.0
    grid_s: float | None = None
    fill: FillPolicy = NO_FILL
    engine: Engine = LOCAL


def run_oversub(
    traces: list[tuple[Trace, int]],
    opts: OversubOptions = OversubOptions(),
    *,
    on_progress: Callable[[], None] | None = None,
) -> tuple[FleetReport, FleetTimeline]:
    """What ``powerkit oversub`` reports of the fleet of ``traces`` (each with its count), and
    the first composed fleet over time (for a page); ``on_progress`` hears each draw."""
    from powerkit.analysis.fleet import compose_fleet

    return compose_fleet(
        traces,
        opts.windows_s,
        compose=opts.compose.value,
        draws=opts.draws,
        seed=opts.seed,
        capacity=opts.capacity,
        margin=opts.margin,
        grid_s=opts.grid_s,
        fill=opts.fill,
        on_draw=on_progress,
        engine=opts.engine,
    )
