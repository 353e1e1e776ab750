"""The recorder loop: absolute-deadline sampling, chunked Parquet parts, clean finalization.

Tick k is due at start + k * interval (no drift). A tick that comes later than one whole
interval is skipped and counted, never made up with a burst of reads. Every ``flush_s`` the
rows so far become one Parquet part file; on stop (duration reached, SIGINT/SIGTERM, error)
the parts are merged into the output file, so an interruption loses at most one chunk.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import ClassVar

import numpy as np
import polars as pl

from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.sim.settings import SIM_EPOCH_S
from powerkit.telemetry.annotate import AnnotationTail
from powerkit.telemetry.base import Readings, TelemetrySource
from powerkit.telemetry.schedule import Schedule
from powerkit.trace.schema import (
    ANNOTATION_COLUMNS,
    OPTIONAL_FLOAT_COLUMNS,
    OPTIONAL_INT_COLUMNS,
    GpuMeta,
    TraceMeta,
    counter_rises_possible,
    to_canonical,
)
from powerkit.trace.writing import PartsWriter

__all__ = [
    "RecordConfig",
    "RecordResult",
    "RecordStatus",
    "dataset_staging",
    "finish_dataset",
    "parts_of",
    "record",
    "recover",
    "stop_on_signals",
]

_GPU_COLUMNS = ("power_w", "energy_j", *OPTIONAL_FLOAT_COLUMNS, *OPTIONAL_INT_COLUMNS)
_TICK_COLUMNS = tuple(ANNOTATION_COLUMNS)
_VIRTUAL_CHUNK_ROWS = 200_000


@dataclass
class RecordConfig:
    """What to record and where (``out`` None: nothing written, the samples only handed to
    ``on_sample``: ``powerkit top`` without ``--record``); durations in seconds."""

    out: Path | None
    interval_s: float = 0.5
    duration_s: float | None = None
    flush_s: float = 5.0
    annotate_from: Path | None = None
    start_epoch_s: float | None = None  # virtual-time sources only
    #: annotations fed in process instead of tailed from a file (powerkit.Monitor's steps)
    annotations: AnnotationTail | None = None
    #: what to add to the trace's metadata when it is finalized (the Monitor's windows)
    extra_at_end: Callable[[], dict[str, object]] | None = None


@dataclass
class RecordStatus:
    """Progress handed to the display after each tick or block."""

    elapsed_s: float
    samples: int
    missed_ticks: int
    power_w: np.ndarray
    energy_j: np.ndarray


@dataclass(frozen=True)
class RecordResult(Document):
    """What a recording produced and how well the schedule was kept (``record --json``)."""

    COMMAND: ClassVar[str] = "record"

    path: Path | None = field(metadata={"key": "out"})
    gpus: int
    samples: int
    ticks: int
    missed_ticks: int
    chunks: int
    duration_s: float
    interval_s: float
    interrupted: bool
    energy_j: list[float]
    interval_stats_s: dict[str, float] = field(
        default_factory=dict, metadata={"key": "achieved_interval_s"}
    )
    lateness_ms: dict[str, float] = field(default_factory=dict)
    #: sim: the job's true power, where ``--truth-out`` asked for it
    truth: Path | None = field(default=None, metadata={"key": "truth_out"})


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set ``stop`` on SIGINT, SIGTERM, SIGHUP or SIGQUIT inside the block (main thread only);
    restore the previous handlers after. A closed terminal (SIGHUP) or Ctrl-\\ (SIGQUIT) must
    not skip the cleanup a SIGTERM gets (caps restored, files finalized)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class _Energy:
    """Energy so far per GPU: the counter's delta where there is one, else a trapezoid."""

    def __init__(self, gpus: int) -> None:
        self.first = np.full(gpus, np.nan)
        self.trapezoid = np.zeros(gpus)
        self.last_t: float | None = None
        self.last_p = np.zeros(gpus)
        self.value = np.zeros(gpus)
        self.distrusted = np.zeros(gpus, dtype=bool)
        self.last_counter = np.full((gpus, 1), np.nan)
        self.last_counter_t: float | None = None

    def add(self, t: np.ndarray, power: np.ndarray, counter: np.ndarray) -> None:
        for k in range(t.size):
            p = np.nan_to_num(power[:, k])
            if self.last_t is not None:
                self.trapezoid += 0.5 * (p + self.last_p) * (t[k] - self.last_t)
            self.last_t, self.last_p = float(t[k]), p
        c = counter[:, -1]
        self.first = np.where(np.isnan(self.first), counter[:, 0], self.first)
        # a counter that falls or leaps past what a GPU can draw is not trusted from then on
        times = np.r_[np.nan if self.last_counter_t is None else self.last_counter_t, t]
        rises = np.diff(np.c_[self.last_counter, counter], axis=1)
        self.distrusted |= ~counter_rises_possible(rises, np.diff(times)).all(axis=1)
        self.last_counter, self.last_counter_t = counter[:, -1:], float(t[-1])
        trusted = np.isfinite(c) & np.isfinite(self.first) & ~self.distrusted
        self.value = np.where(trusted, c - self.first, self.trapezoid)


def _frame(
    source: TelemetrySource, ts_epoch: np.ndarray, cols: Readings, tail: AnnotationTail | None
) -> pl.DataFrame:
    devices = source.devices()
    n, g = ts_epoch.size, len(devices)
    data: dict[str, object] = {
        "ts": pl.Series(np.tile((ts_epoch * 1e6).round().astype(np.int64), g)).cast(
            pl.Datetime("us", "UTC")
        ),
        "host": [source.host] * (n * g),
        "gpu": np.repeat([d.index for d in devices], n).astype(np.int16),
    }
    for name in _GPU_COLUMNS:
        if name in cols:
            values = np.asarray(cols[name], dtype=float).reshape(g, n).ravel()
            if name == "power_w" or np.isfinite(values).any():
                data[name] = pl.Series(values).fill_nan(None)
    annotations = tail.join(ts_epoch) if tail is not None else {}
    for name in _TICK_COLUMNS:
        if name in annotations:
            data[name] = pl.concat([annotations[name]] * g)
        elif name in cols:
            data[name] = np.tile(np.asarray(cols[name]), g)
    return pl.DataFrame(data)


def _stats(values: np.ndarray, scale: float = 1.0) -> dict[str, float]:
    if values.size == 0:
        return {}
    q = np.quantile(values, [0.5, 0.99])
    return {
        "p50": float(q[0] * scale),
        "p99": float(q[1] * scale),
        "max": float(values.max() * scale),
    }


@dataclass
class _Loop:
    """State shared by the two sampling loops."""

    source: TelemetrySource
    cfg: RecordConfig
    stop: threading.Event
    energy: _Energy
    tail: AnnotationTail | None
    on_progress: Callable[[RecordStatus], None] | None
    writer: PartsWriter | None
    meta: TraceMeta
    on_sample: Callable[[float, Readings, np.ndarray], None] | None = None
    ticks: int = 0
    missed: int = 0
    samples: int = 0
    elapsed: float = 0.0
    read_times: list[float] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)

    def flush(self, ts_epoch: np.ndarray, cols: Readings) -> None:
        """Write the rows of these ticks as one part file."""
        if ts_epoch.size == 0:
            return
        if self.writer is None:  # nothing kept: only counted
            self.samples += ts_epoch.size * len(self.source.devices())
            return
        frame = _frame(self.source, ts_epoch, cols, self.tail)
        self.writer.write(to_canonical(frame, what=str(self.cfg.out)), self.meta)
        self.samples += frame.height

    def progress(self, power_w: np.ndarray, pending: int = 0) -> None:
        """Tell the display where the recording stands."""
        if self.on_progress:
            status = RecordStatus(
                self.elapsed, self.samples + pending, self.missed, power_w, self.energy.value
            )
            self.on_progress(status)


def record(
    source: TelemetrySource,
    cfg: RecordConfig,
    *,
    stop: threading.Event | None = None,
    on_progress: Callable[[RecordStatus], None] | None = None,
    on_sample: Callable[[float, Readings, np.ndarray], None] | None = None,
) -> RecordResult:
    """Record ``source`` into ``cfg.out`` until the duration passes or ``stop`` is set.

    ``on_sample(ts_epoch, reading, energy_j)`` gets each tick's time (the sample's ``ts`` as
    stored), its readings per GPU and the energy so far (a wall-clock source only: the metrics
    exporter, ``powerkit top``)."""
    if on_sample is not None and source.virtual_time:
        raise BadInputError(f"live metrics need a wall-clock recording (sim: {option('realtime')})")
    stop = stop or threading.Event()
    devices = source.devices()
    meta = TraceMeta(
        source=source.source_name,
        power_semantics=source.power_semantics,
        interval_s=cfg.interval_s,
        gpus=[
            GpuMeta(
                host=source.host, gpu=d.index, name=d.name, nameplate_w=d.nameplate_w, uuid=d.uuid
            )
            for d in devices
        ],
        extra=dict(source.extra_metadata()),
    )
    loop = _Loop(
        source=source,
        cfg=cfg,
        stop=stop,
        energy=_Energy(len(devices)),
        tail=cfg.annotations or (AnnotationTail(cfg.annotate_from) if cfg.annotate_from else None),
        on_progress=on_progress,
        on_sample=on_sample,
        writer=None if cfg.out is None else PartsWriter(cfg.out),
        meta=meta,
    )
    interrupted = False
    try:
        if source.virtual_time:
            _run_virtual(loop)
        else:
            _run_wall(loop)
        interrupted = stop.is_set()
    finally:
        recording = {
            "ticks": loop.ticks,
            "missed_ticks": loop.missed,
            "interrupted": interrupted or stop.is_set(),
            "interval_s": _stats(np.diff(np.asarray(loop.read_times))),
            "lateness_ms": _stats(np.asarray(loop.lateness), 1000.0),
        }
        meta.extra["recording"] = recording
        if cfg.extra_at_end is not None:
            meta.extra.update(cfg.extra_at_end())
        if cfg.annotate_from:
            meta.extra["annotate_from"] = str(cfg.annotate_from)
        path = None if loop.writer is None else loop.writer.finalize(meta)
        source.close()
    return RecordResult(
        path=path,
        gpus=len(devices),
        samples=loop.samples,
        ticks=loop.ticks,
        missed_ticks=loop.missed,
        chunks=0 if loop.writer is None else loop.writer.count,
        duration_s=loop.elapsed,
        interval_s=cfg.interval_s,
        interrupted=interrupted,
        energy_j=[float(e) for e in loop.energy.value],
        interval_stats_s=recording["interval_s"],  # type: ignore[arg-type]
        lateness_ms=recording["lateness_ms"],  # type: ignore[arg-type]
    )


def _run_virtual(loop: _Loop) -> None:
    cfg = loop.cfg
    start = cfg.start_epoch_s if cfg.start_epoch_s is not None else SIM_EPOCH_S
    # Simulated time runs far ahead of the wall clock: flush by size, not by sim seconds.
    gpus = len(loop.source.devices())
    per_chunk = max(round(cfg.flush_s / cfg.interval_s), _VIRTUAL_CHUNK_ROWS // gpus, 1)
    total = None
    if cfg.duration_s is not None:
        total = int(np.ceil(cfg.duration_s / cfg.interval_s - 1e-9))
    while not loop.stop.is_set() and (total is None or loop.ticks < total):
        n = per_chunk if total is None else min(per_chunk, total - loop.ticks)
        times = (loop.ticks + np.arange(n)) * cfg.interval_s
        cols = loop.source.read_block(times)
        loop.energy.add(times, cols["power_w"], cols["energy_j"])
        loop.flush(start + times, cols)
        loop.ticks += n
        loop.elapsed = float(times[-1])
        loop.progress(cols["power_w"][:, -1])


def _run_wall(loop: _Loop) -> None:
    cfg, source = loop.cfg, loop.source
    pending_t: list[float] = []
    pending: list[Readings] = []
    last_flush = time.monotonic()

    def drain() -> None:
        if not pending:
            return
        if loop.writer is None:  # nothing kept: the ticks only counted, nothing stacked
            loop.flush(np.asarray(pending_t), {})
            pending_t.clear()
            pending.clear()
            return
        cols = {key: np.stack([np.asarray(r[key]) for r in pending], axis=-1) for key in pending[0]}
        cols = {
            key: (v[0] if v.ndim == 2 and v.shape[0] == 1 and key in _TICK_COLUMNS else v)
            for key, v in cols.items()
        }
        loop.flush(np.asarray(pending_t), cols)
        pending_t.clear()
        pending.clear()

    schedule = Schedule(cfg.interval_s, cfg.duration_s, loop.stop)
    start_wall = time.time()
    try:
        for tick in schedule:
            t_epoch = start_wall + tick.elapsed_s
            if loop.tail is not None:
                loop.tail.poll(t_epoch)  # undated lines apply from now
            reading = source.read_now(tick.elapsed_s)
            loop.read_times.append(tick.now)
            loop.lateness.append(tick.late_s)
            pending_t.append(t_epoch)
            pending.append(reading)
            loop.energy.add(
                np.array([t_epoch]), reading["power_w"][:, None], reading["energy_j"][:, None]
            )
            if loop.on_sample is not None:
                loop.on_sample(t_epoch, reading, loop.energy.value)
            # ticks read (a skipped tick is counted in missed, not here)
            loop.ticks, loop.missed, loop.elapsed = loop.ticks + 1, schedule.missed, tick.elapsed_s
            if tick.now - last_flush >= cfg.flush_s:
                drain()
                last_flush = tick.now
            loop.progress(reading["power_w"], len(pending) * len(reading["power_w"]))
    finally:
        loop.missed = schedule.missed  # a skip that reached the end counts too
        drain()


def parts_of(out: Path) -> Path:
    """The parts folder a recording into ``out`` keeps until it is finalized."""
    out = Path(out)
    return out.with_name(out.name + ".parts")


def dataset_staging(folder: Path) -> Path:
    """Where a recording into the dataset ``folder`` is kept until it is split into the
    dataset's partitions: a hidden name, so readers of the dataset never see it."""
    return Path(folder) / ".powerkit-recording.parquet"


def finish_dataset(recording: Path, folder: Path) -> None:
    """Split a finished recording into the dataset at ``folder`` (one transaction, see
    powerkit.trace.dataset), then remove the recording."""
    from powerkit.trace.dataset import write_dataset
    from powerkit.trace.parquet import read_parquet_trace

    recorded = read_parquet_trace(recording)
    write_dataset(recorded, recorded.meta, folder)
    recording.unlink(missing_ok=True)


@dataclass(frozen=True)
class Recovered(Document):
    """What :func:`recover` (``record --recover``) did: the file or dataset written (None:
    nothing was left to recover) and the samples in it."""

    COMMAND: ClassVar[str] = "record --recover"

    path: Path | None
    samples: int
    parts: int


def recover(out: Path, *, dataset: bool = False, force: bool = False) -> Recovered:
    """Finish what a killed recording into ``out`` (a file, or with ``dataset`` a dataset
    folder) left: its parts merged into the file (or split into the dataset); a parts folder
    with no whole part in it is removed. One-line error when nothing is there to recover, when
    ``out`` exists (``force`` replaces it), when a part is a link or not a file, and when the
    parts are of more than one recording."""
    from powerkit.core.outputs import check_output, is_temp
    from powerkit.trace.parquet import merge_meta, read_parquet_trace
    from powerkit.trace.writing import PART_OF

    target = dataset_staging(out) if dataset else Path(out)
    parts = parts_of(target)
    if parts.is_symlink():
        raise BadInputError(f"{parts}: is a symbolic link; recover reads a recording's own folder")
    if not parts.is_dir() and not (dataset and target.is_file()):
        raise BadInputError(f"{out}: no unfinished recording to recover (no {parts.name})")
    if not dataset:
        check_output(target, force=force)
    count = 0
    if parts.is_dir():
        found = sorted(f for f in parts.glob("part-*.parquet") if not is_temp(f))
        stray = [f for f in found if f.is_symlink() or not f.is_file()]
        if stray:
            raise BadInputError(
                f"{stray[0]}: a part that is a link or not a file; recover reads only the "
                "files the recording wrote"
            )
        foreign = sorted(f for f in parts.iterdir() if f not in found and not is_temp(f))
        if foreign:  # (checked before anything is merged or removed)
            raise BadInputError(
                f"{foreign[0]}: not a part a recording writes; nothing was changed (move it "
                f"out of {parts.name}, then recover)"
            )
        whole = found
        count = len(whole)
        if whole:
            metas = [read_parquet_trace(f).meta for f in whole]
            owners = {m.extra.get(PART_OF) for m in metas}
            if len(owners) > 1:
                raise BadInputError(
                    f"{parts}: holds the parts of {len(owners)} different recordings; move "
                    "all but one recording's parts elsewhere, then recover each"
                )
            merged = merge_meta(metas)
            merged.extra.pop(PART_OF, None)
            PartsWriter(target).finalize(merged)
        else:
            for leftover in parts.iterdir():
                if leftover.is_file() and not leftover.is_symlink():
                    leftover.unlink()
            parts.rmdir()
            if not (dataset and target.is_file()):
                return Recovered(None, 0, 0)
    samples = read_parquet_trace(target).extent()[2]
    if dataset:
        finish_dataset(target, Path(out))
        return Recovered(Path(out), samples, count)
    return Recovered(target, samples, count)
