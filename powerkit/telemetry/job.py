"""``powerkit record`` as a library job: what a recording is given (``RecordOptions``, checked
before any device is opened), the recording itself (into a file, or a dataset folder through
a hidden staging file), and finishing one a killed run left behind, callable from Python."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from powerkit.core.choices import Backend
from powerkit.core.errors import BadInputError, option
from powerkit.core.outputs import check_dataset_output, check_output
from powerkit.core.units import format_duration
from powerkit.telemetry.annotate import AnnotationTail
from powerkit.telemetry.base import TelemetrySource
from powerkit.telemetry.recorder import (
    RecordConfig,
    RecordResult,
    RecordStatus,
    dataset_staging,
    finish_dataset,
    parts_of,
    record,
    stop_on_signals,
)
from powerkit.telemetry.sources import make_source
from powerkit.trace.timeparse import TIME_RANGE_S

__all__ = [
    "MIN_INTERVAL_S",
    "RecordOptions",
    "check_interval",
    "refuse_unfinished",
    "run_recording",
]

#: the shortest sampling interval a recording takes
MIN_INTERVAL_S = 0.01
#: the longest (a power log read less often than hourly is not a power log)
MAX_INTERVAL_S = 3600.0


def check_interval(interval_s: float, name: str | None = None) -> float:
    """``interval_s`` when a recording can sample at it (an error names it ``name``, else
    the ``interval`` option)."""
    if not MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S:
        fine = math.isfinite(interval_s) and interval_s > 0
        shown = format_duration(interval_s) if fine else f"{interval_s:g}s"
        raise BadInputError(f"{name or option('interval')} {shown!r}: from 10ms to 1h")
    return interval_s


def refuse_unfinished(out: Path, shown: str | Path, staged: bool = False) -> None:
    """Refuse to record into ``out`` while a killed recording's parts are there (or, with
    ``staged``, its dataset staging file; ``shown``: the path as the user gave it), naming the
    command that finishes it."""
    if staged or parts_of(out).exists():
        raise BadInputError(
            f"{shown}: an unfinished recording is there; finish it with "
            f"'powerkit record --out {shown} --recover' (or remove {parts_of(out)})"
        )


@dataclass(frozen=True)
class RecordOptions:
    """What ``powerkit record`` is given, its units parsed.

    Attributes:
        out: the Parquet file to write, or a folder ending in ``/`` for a dataset.
        backend: ``nvml``, ``amdsmi`` or ``sim`` (None: the GPUs this machine has, NVIDIA's
            else AMD's; refused, naming ``--backend sim``, where it has none).
        interval_s: the sampling interval, s (0.5; at least 0.01).
        duration_s: how long to record, s (None: until stopped; nvml, sim realtime).
        gpus: real GPUs: indices (None: all).
        preset, seed: sim: the workload preset (``a100-7b``) and its seed.
        group_size, concurrency: sim: the knobs (None: the preset's).
        power_cap: sim: a per-GPU cap as typed (``300W``, ``75%``), read against the
            nameplate (None: none).
        drift: sim: response-length drift over training (``none``; powerkit.sim.DRIFTS).
        realtime: sim: at wall-clock speed.
        start_epoch_s: sim: the first sample's time, epoch s (None: now).
        host: the host name to store (None: this host, or ``sim``).
        flush_s: how often a chunk is written, s (5).
        annotate_from: a JSON-lines file the workload appends step/phase/tokens/knobs to.
        serve_metrics: ``[HOST:]PORT`` of a Prometheus endpoint to serve (None: none).
        windows, budget: the endpoint's trailing windows and per-GPU budget, as typed.
        force: replace an existing ``out``.
        sensor: sim: the sensor the power is read through (powerkit.sensors.SENSORS; None:
            the simulated power at each reading's time).
        truth_out: sim, not real-time: also write the job's true power (every 5 ms) to this
            Parquet file.
    """

    out: str
    backend: Backend | None = None
    interval_s: float = 0.5
    duration_s: float | None = None
    gpus: list[int] | None = None
    preset: str = "a100-7b"
    seed: int = 0
    group_size: int | None = None
    concurrency: int | None = None
    power_cap: str | None = None
    drift: str = "none"
    realtime: bool = False
    start_epoch_s: float | None = None
    host: str | None = None
    flush_s: float = 5.0
    annotate_from: Path | None = None
    serve_metrics: str | None = None
    windows: str = "1s,30s,5m"
    budget: str | None = None
    force: bool = False
    sensor: str | None = None
    truth_out: str | None = None

    @property
    def dataset(self) -> bool:
        """Whether ``out`` names a dataset folder (a trailing slash)."""
        return self.out.endswith(("/", "\\"))


#: a context that shows the recording: given the source and the duration (None: open-ended),
#: it yields the function told of each status
Display = Callable[
    [TelemetrySource, float | None],
    contextlib.AbstractContextManager[Callable[[RecordStatus], None]],
]


@contextlib.contextmanager
def _no_display(
    source: TelemetrySource, duration_s: float | None
) -> Iterator[Callable[[RecordStatus], None]]:
    yield lambda status: None


def run_recording(
    opts: RecordOptions,
    *,
    display: Display = _no_display,
    info: Callable[[str], None] = lambda text: None,
    note: Callable[[str], None] = lambda text: None,
    started: Callable[[], None] = lambda: None,
    stop: threading.Event | None = None,
    wrap: Callable[[TelemetrySource], TelemetrySource] | None = None,
    annotations: AnnotationTail | None = None,
    extra_at_end: Callable[[], dict[str, object]] | None = None,
) -> RecordResult:
    """Record until the duration or a signal, then finalize the file (or split the staging
    file into the dataset); ``started()`` is called once every option is checked and the
    source is open, ``info`` hears news (the metrics endpoint's address), ``note`` what the
    user must know (an interruption).

    For a caller that records in process (powerkit.Monitor): ``stop`` ends the recording
    when set, ``wrap`` wraps the opened source, ``annotations`` and ``extra_at_end`` go to
    the recorder (:class:`RecordConfig`, :func:`record`)."""
    interval_s = check_interval(opts.interval_s)
    duration_s, flush_s = opts.duration_s, opts.flush_s
    folder = Path(opts.out)
    # a recording into a dataset is kept under a hidden name, then split into partitions
    out = dataset_staging(folder) if opts.dataset else folder
    # (a dataset's staging file left there is an unfinished recording too)
    refuse_unfinished(out, opts.out, staged=opts.dataset and out.exists())
    if opts.dataset:
        check_dataset_output(folder, force=opts.force)
    else:
        check_output(out, force=opts.force)
    virtual = opts.backend is Backend.sim and not opts.realtime
    if virtual and duration_s is None:
        raise BadInputError(
            f"{option('duration')} is needed for a simulated recording (or add "
            f"{option('realtime')})"
        )
    if virtual and opts.annotate_from is not None:
        raise BadInputError(
            f"{option('annotate-from')} needs a real-time recording (nvml, or sim "
            f"{option('realtime')})"
        )
    _check_truth(opts)
    start_epoch = opts.start_epoch_s
    if start_epoch is not None and start_epoch + (duration_s or 0) >= TIME_RANGE_S[1]:
        raise BadInputError(f"{option('start')} plus {option('duration')} runs past 2199")
    if start_epoch is not None and not virtual:
        raise BadInputError(f"{option('start')} applies to simulated recordings only")
    source = _open_source(opts)
    if wrap is not None:
        source = wrap(source)
    cfg = RecordConfig(
        out=out,
        interval_s=interval_s,
        duration_s=duration_s,
        flush_s=flush_s,
        annotate_from=opts.annotate_from,
        start_epoch_s=start_epoch,
        annotations=annotations,
        extra_at_end=extra_at_end,
    )
    exporter = None
    if opts.serve_metrics is not None:
        from powerkit.telemetry.exporter import start_exporter

        try:
            exporter, address = start_exporter(
                source, opts.serve_metrics, interval_s, opts.windows, opts.budget, virtual
            )
        except BaseException:
            source.close()  # (the GPUs were opened: let them go)
            raise
        info(f"serving metrics at {address}")
    started()
    stop = stop or threading.Event()
    try:
        with stop_on_signals(stop), display(source, duration_s) as shown:
            result = record(
                source,
                cfg,
                stop=stop,
                on_progress=shown,
                on_sample=None if exporter is None else exporter.update,
            )
    finally:
        if exporter is not None:
            exporter.close()
    if result.interrupted:
        note(f"recording stopped by signal after {result.duration_s:.1f} s; file finalized")
    if opts.dataset and result.path is not None:
        finish_dataset(result.path, folder)
        result = dataclasses.replace(result, path=folder)
    if opts.truth_out is not None and result.path is not None and not result.interrupted:
        result = dataclasses.replace(
            result, truth=record_truth(opts, duration_s or result.duration_s)
        )
    return result


def _check_truth(opts: RecordOptions) -> None:
    """Refuse ``truth_out`` and ``sensor`` where they cannot apply, before anything runs."""
    from powerkit.sensors import get_sensor

    if opts.sensor is not None and opts.backend is not Backend.sim:
        raise BadInputError(
            f"{option('sensor')} applies to a simulated recording ({option('backend')} sim): "
            "a real GPU's sensor is the one it has"
        )
    if opts.truth_out is not None and (opts.backend is not Backend.sim or opts.realtime):
        raise BadInputError(
            f"{option('truth-out')} applies to a simulated recording ({option('backend')} sim, "
            f"without {option('realtime')}): a real GPU's true power is not known"
        )
    if opts.sensor is not None:
        get_sensor(opts.sensor)
    if opts.truth_out is not None:
        truth = Path(opts.truth_out)
        if truth.resolve() == Path(opts.out).resolve():
            raise BadInputError(f"{option('truth-out')} must differ from {option('out')}")
        check_output(truth, force=opts.force, what=option("truth-out"))


def _open_source(opts: RecordOptions, *, truth: bool = False) -> TelemetrySource:
    """The source ``opts`` name (``truth``: the simulated job's power alone)."""
    return make_source(
        opts.backend,
        preset=opts.preset,
        seed=opts.seed,
        group_size=opts.group_size,
        concurrency=opts.concurrency,
        power_cap=opts.power_cap,
        realtime=opts.realtime,
        gpus=opts.gpus,
        host=opts.host,
        drift=opts.drift,
        sensor=opts.sensor,
        truth=truth,
    )


def record_truth(opts: RecordOptions, duration_s: float) -> Path:
    """Record the same simulated job's true power (every ``TRUTH_STEP_S``, no sensor) to
    ``opts.truth_out``: the job is the same function of time whatever reads it."""
    from powerkit.sensors.sense import TRUTH_STEP_S

    assert opts.truth_out is not None
    truth = dataclasses.replace(
        opts,
        out=opts.truth_out,
        interval_s=TRUTH_STEP_S,
        duration_s=duration_s,
        backend=Backend.sim,
        realtime=False,
        gpus=None,
        sensor=None,
        truth_out=None,
        serve_metrics=None,
    )
    source = _open_source(truth, truth=True)
    cfg = RecordConfig(
        out=Path(truth.out),
        interval_s=TRUTH_STEP_S,
        duration_s=duration_s,
        flush_s=truth.flush_s,
        start_epoch_s=truth.start_epoch_s,
    )
    done = record(source, cfg, stop=threading.Event())
    assert done.path is not None
    return done.path
