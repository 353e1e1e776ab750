"""``powerkit.Monitor``: energy measured inside the training loop, on the seam and the arithmetic
of ``powerkit record`` and ``powerkit energy``.

A background thread records the GPUs as ``record`` does (the same recorder: absolute-deadline
ticks, instant and averaged fields, Parquet parts finalized on every exit), into ``out`` or a
temporary file. Measurement windows are named, may nest and overlap::

    with pk.Monitor(backend="sim", interval="100ms", out="run.parquet") as mon:
        for batch in loader:
            with mon.window("step", tokens=batch.tokens):
                train_step(batch)
            mon.step(tokens=batch.tokens)

At each edge of a window (after ``sync()``, e.g. ``torch.cuda.synchronize``) the monitor takes
a reading of its own, so a window shorter than the interval is measured too. A window's energy
per GPU is, by the rule ``info`` and ``energy`` use, the energy counter's difference where the
GPU has a counter with no hole over the window's readings (``method`` "counter"), else the
trapezoid over them, steps longer than 5 intervals left out (``method`` "trapezoid", the
share of the window integrated its ``coverage``). Both are kept as running sums over every
reading in the order taken, so a window is the difference of its edges' sums: memory does
not grow with the run or with a window's length. ``step(tokens=)`` writes step and
cumulative-token annotations into the trace, so ``energy --steps trace`` reads its steps:
step 1 from the start to the first ``step()``, step N from the (N-1)th to the Nth, each
boundary at the first sample after the call (within one interval of it); the samples after
the last ``step()`` are the step under way, left out.

A failure of the sampler is raised (``MonitorError``) at the next ``end_window``, ``step`` or
on exit, never swallowed; leaving the ``with`` block on an exception stops the sampler and
finalizes the file; so does SIGTERM in the main thread (the process then exits 143, as it
would have).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import numpy as np

from powerkit.actuation.knobs import Knobs
from powerkit.cells.steps import integrable
from powerkit.core.choices import Backend, GpuBackend
from powerkit.core.errors import BadInputError, PowerkitError
from powerkit.core.units import duration_s
from powerkit.monitor.measurement import Measurement
from powerkit.telemetry.annotate import AnnotationFeed
from powerkit.telemetry.base import DeviceInfo, Readings, TelemetrySource
from powerkit.telemetry.job import RecordOptions, check_interval, run_recording
from powerkit.telemetry.recorder import RecordResult
from powerkit.trace.schema import counter_rises_possible

__all__ = ["Measurement", "Monitor", "MonitorError"]


#: the measurements a monitor keeps (``measurements``); ``totals`` counts every one
KEEP_MEASUREMENTS = 10_000


class MonitorError(PowerkitError):
    """The monitor's sampler failed, or a window was used wrongly."""


class _Shared(TelemetrySource):
    """The opened source, read by the sampler's thread and at the windows' edges: one reading
    at a time, and never back in time (a simulated job moves forward only)."""

    def __init__(self, inner: TelemetrySource, meter: _Meter) -> None:
        self.inner, self.lock, self.last, self.meter = inner, threading.Lock(), 0.0, meter
        self.sampled = -1.0  # the sampler's last reading (its tick, s after the start)
        self.host, self.source_name = inner.host, inner.source_name
        self.power_semantics, self.virtual_time = inner.power_semantics, inner.virtual_time

    def devices(self) -> list[DeviceInfo]:
        return self.inner.devices()

    def read_now(self, elapsed_s: float) -> Readings:
        """The sampler's reading, into the meter as it is taken."""
        with self.lock:
            self.last = max(self.last, elapsed_s)
            reading = self.inner.read_now(self.last)
            self.meter.add(time.time(), reading)
            self.sampled = elapsed_s
            return reading

    def edge(self, elapsed_s: float) -> _Mark:
        """A window's edge: power and the counter, now, into the meter."""
        with self.lock:
            self.last = max(self.last, elapsed_s)
            self.meter.add(time.time(), self.inner.read_power(self.last), edge=True)
            return self.meter.mark()

    def extra_metadata(self) -> dict[str, object]:
        return self.inner.extra_metadata()

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True)
class _Mark:
    """The running sums at one reading (a window's edge)."""

    t: float
    energy_j: np.ndarray  # integrated by the trapezoid, per GPU
    covered_s: np.ndarray  # time integrated, per GPU
    holes: np.ndarray  # readings with no counter so far, per GPU
    counter_j: np.ndarray  # the counter at this reading (NaN: none)
    samples: int  # the sampler's readings so far


class _Meter:
    """Running sums over every reading, in the order the readings were taken (the sampler's
    and the edges'): the trapezoid of each step of at most ``MAX_INTEGRATION_GAP`` intervals
    between two read powers (powerkit.cells.steps), the time it covers, the readings without
    a counter. A window is the difference of its edges' marks: memory does not grow with the
    run or the window."""

    def __init__(self, gpus: int, interval_s: float) -> None:
        self.interval_s = interval_s
        self.energy, self.covered = np.zeros(gpus), np.zeros(gpus)
        self.holes = np.zeros(gpus, dtype=np.int64)
        self.counter = np.full(gpus, np.nan)
        self.samples = 0
        self.last: tuple[float, np.ndarray] | None = None

    def add(self, t: float, reading: Readings, edge: bool = False) -> None:
        """Fold one reading into the sums (``edge``: a window's, not the sampler's)."""
        power = np.asarray(reading["power_w"], dtype=float)
        counter = np.asarray(reading.get("energy_j", np.full(power.shape, np.nan)), dtype=float)
        if self.last is not None:
            t0, p0 = self.last
            dt = t - t0
            ok = integrable(dt, self.interval_s) & np.isfinite(power) & np.isfinite(p0)
            self.energy += np.where(ok, 0.5 * (p0 + power) * dt, 0.0)
            self.covered += np.where(ok, dt, 0.0)
        self.holes += np.isnan(counter)
        self.counter, self.last = counter, (t, power)
        self.samples += 0 if edge else 1

    def mark(self) -> _Mark:
        """The sums at the last reading (a window's edge)."""
        assert self.last is not None
        return _Mark(
            self.last[0],
            self.energy.copy(),
            self.covered.copy(),
            self.holes.copy(),
            self.counter,
            self.samples,
        )


class Monitor:
    """Measure GPU energy in process (the module docstring); ``record`` in a thread of the
    job's own process, its windows and steps measured to the edge.

    Args:
        gpus: NVML GPU indices (None: all).
        interval: the sampler's interval, a duration (``"100ms"``, or seconds: ``0.1``; at
            least 10 ms).
        backend: ``nvml``, ``amdsmi``, or ``sim`` (a simulated job of ``preset``, at wall-clock
            speed); None: the GPUs the machine has, as ``record`` reads them (NVML's, else
            amd-smi's; none: refused, naming ``sim``).
        out: the trace to write (a file, or a folder ending in ``/`` for a dataset; None: a
            temporary file, removed on close).
        serve_metrics: ``[HOST:]PORT`` of a Prometheus endpoint, as ``record`` serves.
        sync: called at every window edge (e.g. ``torch.cuda.synchronize``).
        knobs: ``file:PATH``, the knob file that ``control run`` writes, read with
            ``mon.knobs.poll()``.
        preset, seed: the simulated job (``backend="sim"``).
        sensor: the simulated job's power read through this sensor model (``backend="sim"``;
            ``instant``, ``average_1s``, ``a100-power.draw``, ``h100-power.draw``: docs/trust.md).
        force: overwrite ``out``.
        flush: how often the recording writes a chunk, a duration (or seconds).

    Command line equivalent: ``powerkit record --backend nvml --interval 100ms --out OUT``.
    """

    def __init__(
        self,
        gpus: list[int] | None = None,
        interval: str | float = "100ms",
        backend: str | None = None,
        out: str | Path | None = None,
        serve_metrics: str | None = None,
        sync: Callable[[], Any] | None = None,
        knobs: str | None = None,
        *,
        preset: str = "a100-7b",
        seed: int = 0,
        sensor: str | None = None,
        force: bool = False,
        flush: str | float = "5s",
    ) -> None:
        try:  # (the choices of a command that reads GPUs, as record's)
            chosen = None if backend is None else Backend(GpuBackend(backend))
        except ValueError:
            raise BadInputError(f"backend {backend!r}: nvml, amdsmi or sim") from None
        self.interval_s = check_interval(duration_s(interval, "interval"), "interval")
        if sync is not None and not callable(sync):
            raise BadInputError(f"sync {sync!r}: give a function to call (or None)")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise BadInputError(f"seed {seed!r}: a whole number from 0")
        if sensor is not None:
            from powerkit.sensors import get_sensor

            get_sensor(str(sensor))
        self.sync = sync
        self.knobs: Knobs | None = None
        if knobs is not None:
            kind, sep, path = knobs.partition(":")
            if kind != "file" or not sep or not path:
                raise BadInputError(
                    f"knobs {knobs!r}: give file:PATH (the file control run writes)"
                )
            self.knobs = Knobs(path)
        self._temp = None if out is not None else tempfile.TemporaryDirectory(prefix="powerkit-")
        target = str(out) if out is not None else str(Path(self._temp.name) / "monitor.parquet")  # type: ignore[union-attr]
        self.options = RecordOptions(
            out=target,
            backend=chosen,
            interval_s=self.interval_s,
            gpus=gpus,
            preset=preset,
            seed=seed,
            sensor=sensor,
            realtime=True,
            serve_metrics=serve_metrics,
            force=force,
            flush_s=duration_s(flush, "flush"),
        )
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._source: _Shared | None = None
        self._error: BaseException | None = None
        self._result: RecordResult | None = None
        self._start_wall = 0.0
        self._open: dict[str, tuple[_Mark, int | None]] = {}
        self._done: collections.deque[Measurement] = collections.deque(maxlen=KEEP_MEASUREMENTS)
        self._totals: dict[str, dict[str, float]] = {}  # name -> windows, time_s, energy_j
        self._feed = AnnotationFeed()
        self._steps = 0
        self._tokens = 0
        self._last_step_s: float | None = None  # when the last step() was (s after the start)
        self._previous_term: Any = None
        self._closed = False
        self._started_ok = False
        #: the Prometheus endpoint's address, with ``serve_metrics``
        self.metrics_url: str | None = None

    # -- the sampler ------------------------------------------------------------------------

    def start(self) -> Monitor:
        """Open the GPUs and start sampling; a bad option or a source that will not open is
        raised here."""
        if self._thread is not None:
            raise MonitorError("the monitor is already started")

        def wrap(source: TelemetrySource) -> TelemetrySource:
            self._source = _Shared(source, _Meter(len(source.devices()), self.interval_s))
            return self._source

        def run() -> None:
            try:
                self._result = run_recording(
                    self.options,
                    started=self._started,
                    stop=self._stop,
                    wrap=wrap,
                    info=self._info,
                    annotations=self._feed,
                    extra_at_end=self._extra,
                )
            except BaseException as exc:  # (surfaced in the caller's thread)
                self._error = exc
            finally:
                self._ready.set()

        self._thread = threading.Thread(target=run, name="powerkit-monitor", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None and not self._started_ok:
            self._thread.join()
            raise self._error
        self._watch_signals()
        atexit.register(self.close)
        return self

    def _info(self, text: str) -> None:
        if text.startswith("serving metrics at "):
            self.metrics_url = text.removeprefix("serving metrics at ")

    def _started(self) -> None:
        self._start_wall = time.time()
        # Every sample belongs to the step under way: the first, from the start, until the
        # first step() (energy --steps trace numbers its steps as step() counts them).
        self._feed.add(0.0, step=1, tokens=0)
        self._started_ok = True
        self._ready.set()

    def _extra(self) -> dict[str, object]:
        return {"monitor": {"windows": self.totals}}

    def _check(self) -> None:
        """Raise the sampler's failure, if it failed."""
        if self._thread is None:
            raise MonitorError("the monitor is not started (use `with Monitor(...)` or start())")
        if self._closed:
            raise MonitorError("the monitor is closed: nothing is measured after close()")
        if self._error is not None:
            raise MonitorError(f"the monitor's sampler failed: {self._error}") from self._error
        if not self._thread.is_alive() and not self._closed:
            raise MonitorError("the monitor's sampler has stopped")

    def _watch_signals(self) -> None:
        """In the main thread: SIGTERM stops the sampler and finalizes the file, then the
        process ends as it would have (exit status 143)."""
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: FrameType | None) -> None:
            self.close()
            raise SystemExit(128 + signum)

        with contextlib.suppress(ValueError):
            self._previous_term = signal.signal(signal.SIGTERM, on_term)

    def close(self) -> RecordResult | None:
        """Stop sampling and finalize the trace (idempotent); returns what was recorded.
        Windows still open are dropped."""
        if self._closed or self._thread is None:
            return self._result
        self._closed = True
        self._close_last_step()
        self._stop.set()
        self._thread.join()
        if (
            self._previous_term is not None
            and threading.current_thread() is threading.main_thread()
        ):
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._previous_term)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        if self._temp is not None:
            self._temp.cleanup()
        return self._result

    def _close_last_step(self) -> None:
        """Wait (two intervals at most) for a reading after the last step(): the trace's step
        ends where the next one's first sample is, so the last step would otherwise be lost
        when the block ends right after it."""
        if self._last_step_s is None or self._source is None or self._error is not None:
            return
        deadline = time.monotonic() + 2 * self.interval_s + 0.05
        # (the recording's clock starts after ours: a tick from the step's offset is after it)
        while self._source.sampled < self._last_step_s and time.monotonic() < deadline:
            if self._thread is None or not self._thread.is_alive():
                return
            time.sleep(self.interval_s / 4)

    @property
    def result(self) -> RecordResult | None:
        """What the recording wrote, once closed."""
        return self._result

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        failed = self._error
        self.close()
        if kind is None and failed is not None:
            raise MonitorError(f"the monitor's sampler failed: {failed}") from failed

    # -- windows and steps ------------------------------------------------------------------

    def _edge(self) -> _Mark:
        """Sync, then read every GPU's power and counter now: the edge of a window."""
        if self.sync is not None:
            self.sync()
        assert self._source is not None
        return self._source.edge(max(0.0, time.time() - self._start_wall))

    def begin_window(self, name: str, tokens: int | None = None) -> None:
        """Open the window ``name`` (windows nest and overlap; one name open at a time)."""
        self._check()
        if name in self._open:
            raise MonitorError(f"window {name!r} is already open")
        self._open[name] = (self._edge(), tokens)

    def end_window(self, name: str) -> Measurement:
        """Close the window ``name`` and return its measurement."""
        self._check()
        if name not in self._open:
            raise MonitorError(f"window {name!r} is not open")
        end = self._edge()
        start, tokens = self._open.pop(name)
        m = _measure(name, start, end, tokens, [d.index for d in self._devices()])
        self._done.append(m)
        total = self._totals.setdefault(name, {"windows": 0, "time_s": 0.0, "energy_j": 0.0})
        total["windows"] += 1
        total["time_s"] += m.time_s
        total["energy_j"] += m.total_energy_j
        return m

    @contextlib.contextmanager
    def window(self, name: str, tokens: int | None = None) -> Iterator[None]:
        """``with mon.window(name, tokens=n):`` — begin and end a window around a block; an
        exception inside closes it unmeasured and goes on up."""
        self.begin_window(name, tokens)
        try:
            yield
        except BaseException:
            self._open.pop(name, None)
            raise
        self.end_window(name)

    def step(self, tokens: int = 0) -> int:
        """Mark the end of a training step that made ``tokens``; returns the step's number.
        The trace's ``step`` and cumulative ``tokens`` annotations follow."""
        self._check()
        whole = isinstance(tokens, int) or (isinstance(tokens, float) and tokens.is_integer())
        if isinstance(tokens, bool) or not whole or tokens < 0:
            raise MonitorError(f"step tokens {tokens!r}: a whole number from 0")
        self._steps += 1
        self._tokens += int(tokens)
        # the samples from now on are the next step's; the cumulative tokens at its start are
        # this step's end (what energy --steps trace takes a step's tokens from)
        now = time.time()
        self._feed.add(now, step=self._steps + 1, tokens=self._tokens)
        self._last_step_s = now - self._start_wall
        return self._steps

    @property
    def measurements(self) -> list[Measurement]:
        """The windows measured so far, in the order they closed (the last
        ``KEEP_MEASUREMENTS``: each ``end_window`` also returns its own)."""
        return list(self._done)

    @property
    def totals(self) -> dict[str, dict[str, float]]:
        """Per window name, every window measured: their count, time and energy (J)."""
        return {name: dict(t) for name, t in self._totals.items()}

    def _devices(self) -> list[DeviceInfo]:
        assert self._source is not None
        return self._source.devices()


def _measure(name: str, a: _Mark, b: _Mark, tokens: int | None, gpus: list[int]) -> Measurement:
    """A window from its edges' marks (module docstring): per GPU the counter's difference
    where it had a counter at every reading from edge to edge (``counter_of``'s rule), else
    the trapezoid's."""
    span = b.t - a.t
    counted = (b.holes == a.holes) & np.isfinite(a.counter_j) & np.isfinite(b.counter_j)
    # a counter that falls or leaps past what a GPU draws is not trusted: the power integrated
    rise = np.where(counted, b.counter_j - a.counter_j, 0.0)
    counted &= counter_rises_possible(rise, span)
    energy = np.where(counted, b.counter_j - a.counter_j, b.energy_j - a.energy_j)
    covered = np.where(counted, span, b.covered_s - a.covered_s)
    coverage = float(np.min(covered) / span) if span > 0 and covered.size else 1.0
    return Measurement(
        name=name,
        start_epoch_s=a.t,
        time_s=span,
        energy_j={g: float(e) for g, e in zip(gpus, energy, strict=True)},
        total_energy_j=float(energy.sum()),
        samples=b.samples - a.samples,
        coverage=min(1.0, coverage),
        method="counter" if counted.all() else "trapezoid",
        tokens=tokens,
    )
