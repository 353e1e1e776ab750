"""A sweep as a job: its timing from what a user types, and a run that is stored as it goes
(resume, checkpoints, the caps and clocks it sets put back) — what ``powerkit sweep``, ``pfi
sweep`` and ``bloat profile`` share, callable from Python."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from powerkit.actuation.caps import LockedClocks, PowerCaps
from powerkit.core.choices import Backend
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import PowerSpec, parse_duration
from powerkit.sweep.backends import PointRun, SweepBackend, make_backend
from powerkit.sweep.runner import (
    SweepConfig,
    SweepData,
    checkpoint_path,
    resumable,
    run_sweep,
    write_sweep,
)
from powerkit.telemetry.recorder import stop_on_signals

if TYPE_CHECKING:
    from powerkit.telemetry.gpu import GpuSource

__all__ = ["SweepCallbacks", "SweepOptions", "open_sweep", "run_and_store", "sweep_config"]


def sweep_config(
    *, warmup: str, point: str, interval: str, cooldown: str, repeats: int, seed: int
) -> SweepConfig:
    """The sweep's timing from command-line strings (axes are filled in by the caller)."""
    return SweepConfig(
        axes={},
        warmup_s=parse_duration(warmup, allow_zero=True),
        point_s=parse_duration(point),
        interval_s=parse_duration(interval),
        cooldown_s=parse_duration(cooldown, allow_zero=True),
        repeats=repeats,
        seed=seed,
    )


#: given the points to run, a context that gives what to tell of each finished one
PointDone = Callable[[PointRun, int], None]
ProgressFactory = Callable[[int], contextlib.AbstractContextManager[PointDone]]


@contextlib.contextmanager
def _no_progress(total: int) -> Iterator[PointDone]:
    yield lambda result, count: None


class SweepCallbacks:
    """What a caller hears of a running sweep (all optional): ``progress(points)`` is a
    context that gives the function told of each finished point (result, points in all);
    ``info(text)`` a line of news (a sweep resumed); ``warning(text)`` what the user must
    know (a limit adopted from a killed run, an interruption)."""

    def __init__(
        self,
        progress: ProgressFactory | None = None,
        info: Callable[[str], None] | None = None,
        warning: Callable[[str], None] | None = None,
    ) -> None:
        self.progress = progress or _no_progress
        self.info = info or (lambda text: None)
        self.warning = warning or (lambda text: None)


def run_and_store(
    backend: SweepBackend,
    config: SweepConfig,
    source: GpuSource | None,
    out: Path,
    *,
    job: str | None = None,
    labels: dict[str, str] | None = None,
    resume: bool = False,
    force: bool = False,
    callbacks: SweepCallbacks | None = None,
) -> Path:
    """Run the sweep (NVML caps and clocks put back on exit, error and signals) and store it
    with the job's name and group labels, if given: after every point (a kill loses at most
    the point in progress) and at the end. ``resume`` continues the interrupted sweep stored
    at ``out``. Until every point has run the sweep is kept in ``checkpoint_path(out)``, so
    ``out`` keeps any earlier result; return the file written (``out``, or the checkpoint
    when interrupted)."""
    tell = callbacks or SweepCallbacks()
    total = config.repeats
    for values in config.axes.values():
        total *= len(values)
    preset = getattr(getattr(backend, "preset", None), "name", None)
    partial = checkpoint_path(out)
    stored = partial if partial.exists() or not out.exists() else out  # (older: in out itself)
    if partial.exists() and not resume and not force:
        raise BadInputError(
            f"{partial}: an unfinished sweep into {out} is there; continue it with "
            f"{option('resume')}, "
            f"or start over with {option('force')}"
        )
    done = resumable(stored, config, backend.name, preset, job).runs if resume else []
    if done:
        tell.info(f"resuming {stored}: {len(done)} of {total} run(s) done")

    def checkpoint(data: SweepData) -> None:
        data.job, data.labels = job, labels or {}
        if any(r.times_s.size for r in data.runs):
            write_sweep(data, partial, backend.host)

    stop = threading.Event()
    caps = PowerCaps(source.gpus) if source is not None and "power_cap_w" in config.axes else None
    clocks = (
        LockedClocks(source.gpus)
        if source is not None and "gpu_frequency_mhz" in config.axes
        else None
    )
    try:
        with (
            stop_on_signals(stop),
            caps or contextlib.nullcontext(),
            clocks or contextlib.nullcontext(),
        ):
            for entry in caps.adopted if caps is not None else []:
                tell.warning(
                    f"GPU {entry.gpu}'s power limit was left changed by a killed run (pid "
                    f"{entry.pid}); it goes back to {entry.original_w:g} W when this sweep ends"
                )
            with tell.progress(total - len(done)) as point_done:
                data = run_sweep(
                    backend,
                    config,
                    caps=caps,
                    clocks=clocks,
                    stop=stop,
                    on_point=point_done,
                    done=done,
                    on_checkpoint=checkpoint,
                )
    finally:
        backend.close()
        if source is not None:
            source.close()
    data.job, data.labels = job, labels or {}
    if data.interrupted:  # out keeps what it held: the runs so far stay in the checkpoint
        write_sweep(data, partial, backend.host)
        tell.warning(
            f"sweep interrupted after {len(data.runs)} of {total} run(s); they are saved in "
            f"{partial} ({out} is untouched): continue with the same command plus "
            f"{option('resume')}"
        )
        return partial
    write_sweep(data, out, backend.host)
    partial.unlink(missing_ok=True)
    return out


@dataclass(frozen=True)
class SweepOptions:
    """What ``powerkit sweep`` is given, its units parsed.

    Attributes:
        backend: ``sim``, ``cmd`` (a command per point) or ``live`` (a running job's knob
            channel).
        group_size, concurrency: the knobs' settings (None: the knob is not swept).
        power_caps: caps, each a power or a share of the GPUs' nameplate (None: not swept).
        gpu_frequency_mhz: locked SM clocks, MHz (None: not swept).
        timing: each point's warm-up, length, sampling interval and cool-down, the repeats
            and the seed of the order (and of the simulated job): a :class:`SweepConfig`
            whose axes :func:`open_sweep` fills (``sweep_config`` makes one from text).
        preset: the simulated job. run: ``cmd``'s command, ``{knob}`` placeholders.
        actuator: ``live``'s knob channel, ``file:PATH``. gpus: GPU indices (None: all).
        tokens_from: ``cmd``/``live``: a JSON-lines file of cumulative tokens.
    """

    backend: Backend = Backend.sim
    group_size: list[int] | None = None
    concurrency: list[int] | None = None
    power_caps: list[PowerSpec] | None = None
    gpu_frequency_mhz: list[float] | None = None
    timing: SweepConfig = field(default_factory=lambda: SweepConfig(axes={}))
    preset: str = "a100-7b"
    run: str | None = None
    actuator: str | None = None
    gpus: list[int] | None = None
    tokens_from: Path | None = None


def open_sweep(opts: SweepOptions) -> tuple[SweepBackend, GpuSource | None, SweepConfig]:
    """The runner of ``opts``'s points, the GPUs it reads and sets (None: the simulator), and
    the sweep's plan (caps given as shares resolved against the GPUs' nameplate): what
    :func:`run_and_store` takes."""
    axes: dict[str, list[float] | None] = {
        "group_size": None if opts.group_size is None else [float(v) for v in opts.group_size],
        "concurrency": None if opts.concurrency is None else [float(v) for v in opts.concurrency],
        "gpu_frequency_mhz": opts.gpu_frequency_mhz,
    }
    runner, source = make_backend(
        opts.backend,
        preset=opts.preset,
        seed=opts.timing.seed,
        run=opts.run,
        actuator=opts.actuator,
        gpus=opts.gpus,
        tokens_from=opts.tokens_from,
    )
    if opts.power_caps is None and not any(v is not None for v in axes.values()):
        raise BadInputError(
            f"nothing to sweep: give {option('group-size')}, {option('concurrency')}, "
            f"{option('power-cap')} or {option('gpu-frequency')}"
        )
    plate = runner.devices[0].nameplate_w if runner.devices else None
    if opts.power_caps is not None:
        axes["power_cap_w"] = [cap.resolve(plate) for cap in opts.power_caps]
    order = ("group_size", "concurrency", "power_cap_w", "gpu_frequency_mhz")
    chosen = {k: v for k in order if (v := axes.get(k)) is not None}
    return runner, source, dataclasses.replace(opts.timing, axes=chosen)
