"""``powerkit record`` as a library job: what a recording is given (``RecordOptions``, checked
before any device is opened), the recording itself (into a file, or a dataset folder through
a hidden staging file), and finishing one a killed run left behind, callable from Python."""

from __future__ import annotations

import contextlib
import dataclasses
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


def check_interval(interval_s: float, name: str | None = None) -> float:
    """``interval_s`` when a recording can sample at it (an error names it ``name``, else
    the ``interval`` option)."""
    if not interval_s >= MIN_INTERVAL_S:
        shown = format_duration(interval_s) if interval_s > 0 else f"{interval_s:g}s"
        raise BadInputError(f"{name or option('interval')} {shown!r}: at least 10ms")
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
    """What ``powerkit record`` is given (times parsed; the simulated power cap and the
    endpoint's windows and budget as typed, read against the GPUs' nameplate; ``out`` ending
    in ``/`` asks for a dataset folder).

    Attributes:
        interval_s: sampling interval in s (``--interval``; at least 0.01).
        duration_s: how long to record in s (``--duration``; None: until stopped).
        flush_s: how often a chunk is written, in s (``--flush``).
        start_epoch_s: a simulated recording's first sample, epoch s (``--start``).
    """

    out: str
    backend: Backend = Backend.sim
    interval_s: float = 0.5
    duration_s: float | None = None  # None: until stopped (nvml, sim --realtime)
    gpus: list[int] | None = None  # nvml: the GPUs (None: all)
    preset: str = "a100-7b"  # sim
    seed: int = 0  # sim
    group_size: int | None = None  # sim
    concurrency: int | None = None  # sim
    power_cap: str | None = None  # sim
    drift: str = "none"  # sim: response-length drift over training (powerkit.sim.DRIFTS)
    realtime: bool = False  # sim: at wall-clock speed
    start_epoch_s: float | None = None  # sim: the first sample's time
    host: str | None = None
    flush_s: float = 5.0
    annotate_from: Path | None = None
    serve_metrics: str | None = None  # [HOST:]PORT of a Prometheus endpoint
    windows: str = "1s,30s,5m"  # the endpoint's trailing windows
    budget: str | None = None  # the endpoint's per-GPU budget
    force: bool = False

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
    start_epoch = opts.start_epoch_s
    if start_epoch is not None and start_epoch + (duration_s or 0) >= TIME_RANGE_S[1]:
        raise BadInputError(f"{option('start')} plus {option('duration')} runs past 2199")
    if start_epoch is not None and not virtual:
        raise BadInputError(f"{option('start')} applies to simulated recordings only")
    source = make_source(
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
    )
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
    return result
