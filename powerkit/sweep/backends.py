"""Three ways to apply a knob setting and measure it: the simulator, a command, a live job.

Each backend runs one point: apply the setting, wait out the warm-up, sample power for the
point's length, and report throughput. Real backends read power through NVML (the telemetry
source); the simulator samples its own model.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from powerkit.actuation.knobs import KnobChannel
from powerkit.core.choices import Backend
from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import read_text_input
from powerkit.sim.model import GrpoSim
from powerkit.sim.presets import Preset, get_preset
from powerkit.sim.settings import SIM_EPOCH_S, Knobs
from powerkit.sweep.plan import GPU_KNOBS, KNOBS, Point
from powerkit.telemetry.base import DeviceInfo, TelemetrySource
from powerkit.telemetry.schedule import Schedule

if TYPE_CHECKING:
    from powerkit.telemetry.gpu import GpuSource

__all__ = [
    "CmdBackend",
    "LiveBackend",
    "NvmlBackend",
    "PointRun",
    "SimBackend",
    "SweepBackend",
    "last_json",
    "make_backend",
    "sample_source",
]


@dataclass
class PointRun:
    """What one point measured; ``error`` is set (and the rest may be empty) when it failed."""

    point: Point
    epoch_s: float  # time of the first measured sample
    times_s: np.ndarray  # since epoch_s
    power_w: np.ndarray  # (gpus, samples)
    tokens_per_s: float | None = None
    duration_s: float | None = None  # how long the workload's unit of work took
    error: str | None = None
    # Mean telemetry features over the point (dram_active, memcpy_util) where the source has them
    features: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        """The point in a line: the knobs it set, then its mean power per GPU and throughput
        (or why it failed), as a sweep's progress shows it."""
        knobs = ", ".join(f"{k}={v:g}" for k, v in self.point.knobs().items() if v is not None)
        if self.error:
            return f"{knobs}: failed: {self.error}"
        rate = "" if self.tokens_per_s is None else f", {self.tokens_per_s:,.1f} tok/s"
        return f"{knobs}: {self.power_w.mean():.1f} W{rate}"


class SweepBackend(ABC):
    """Applies knob settings to a workload and measures each point."""

    name: str
    host: str
    devices: list[DeviceInfo]
    defaults: dict[str, float | int | None]

    @abstractmethod
    def run(
        self,
        point: Point,
        warmup_s: float,
        point_s: float,
        interval_s: float,
        stop: threading.Event,
    ) -> PointRun:
        """Run one point and return its measurement."""

    def cooldown(self, seconds: float, stop: threading.Event) -> None:
        """Let the GPUs settle between points (real backends wait; the simulator need not)."""
        stop.wait(seconds)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the backend holds."""


class SimBackend(SweepBackend):
    """The simulated GRPO job: each point is a fresh job with the point's knobs.

    With ``common_seed`` every setting of a repeat runs the same job (same data, same
    noise): only the knobs differ, as when a real job is restarted from one checkpoint with
    the same data order. Otherwise each (setting, repeat) gets its own seed.
    """

    name = "sim"

    def __init__(self, preset: Preset, seed: int = 0, common_seed: bool = False) -> None:
        self.preset, self.seed, self.host = preset, seed, "sim"
        self.common_seed = common_seed
        self.devices = [
            DeviceInfo(i, preset.gpu_name, None, preset.tdp_w, preset.tdp_w)
            for i in range(preset.gpus)
        ]
        self.defaults = {
            "group_size": preset.group_size,
            "concurrency": preset.concurrency,
            "power_cap_w": None,
            "gpu_frequency_mhz": None,
        }

    def run(
        self,
        point: Point,
        warmup_s: float,
        point_s: float,
        interval_s: float,
        stop: threading.Event,
    ) -> PointRun:
        p = self.preset
        knobs = Knobs(
            point.group_size or p.group_size,
            point.concurrency or p.concurrency,
            point.power_cap_w,
            point.gpu_frequency_mhz,
        )
        # The seed depends on the setting and the repeat, not on the order: same answer
        # whatever order the points run in.
        key = (
            [self.seed, point.repeat]
            if self.common_seed
            else [self.seed, point.setting, point.repeat]
        )
        seed = int(np.random.SeedSequence(key).generate_state(1)[0])
        sim = GrpoSim(p, knobs, seed=seed)
        times = warmup_s + np.arange(0.0, point_s, interval_s)
        s = sim.sample(times)
        span = times[-1] - times[0]
        tokens = float(s.tokens[-1] - s.tokens[0]) / span if span > 0 else None
        starts = sim.step_starts()
        epoch = SIM_EPOCH_S + point.order * (warmup_s + point_s) + warmup_s
        return PointRun(
            point,
            epoch,
            times - warmup_s,
            s.power_w,
            tokens,
            float(starts[1] - starts[0]) if starts.size > 1 else None,
            features={
                "dram_active": float(s.dram_active.mean()),
                "memcpy_util": float(s.mem_util.mean()),
            },
        )

    def cooldown(self, seconds: float, stop: threading.Event) -> None:
        """Simulated points start cold by construction: nothing to wait for."""


def sample_source(
    source: TelemetrySource, interval_s: float, duration_s: float, stop: threading.Event
) -> tuple[float, np.ndarray, np.ndarray, dict[str, float]]:
    """Return (epoch of the first sample, times since it, power (gpus, n), features) read
    over NVML; features holds the mean memory-copy utilization (NVML's memory utilization,
    percent) as ``memcpy_util`` when the source reported one."""
    times: list[float] = []
    power: list[np.ndarray] = []
    mem: list[np.ndarray] = []
    schedule = Schedule(interval_s, duration_s, stop)
    epoch = time.time()
    for tick in schedule:
        readings = source.read_now(tick.elapsed_s)
        power.append(readings["power_w"])
        if readings.get("mem_util") is not None:
            mem.append(readings["mem_util"])
        times.append(tick.elapsed_s)
    features = {}
    if mem and np.isfinite(np.stack(mem)).any():
        features["memcpy_util"] = float(np.nanmean(np.stack(mem)))
    if not power:
        return epoch, np.empty(0), np.empty((len(source.devices()), 0)), features
    return epoch, np.asarray(times), np.stack(power, axis=1), features


def last_json(lines: list[str], key: str = "tokens") -> dict[str, object] | None:
    """Return the last line that parses as a JSON object with a ``key`` field (``tokens``)."""
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and key in data:
                return data
    return None


def _tokens_per_s(
    data: dict[str, object] | None, fallback_s: float, key: str
) -> tuple[float | None, float]:
    if data is None:
        return None, fallback_s
    seconds = float(data.get("seconds", fallback_s))  # type: ignore[arg-type]
    tokens = float(data[key])  # type: ignore[arg-type]
    return (tokens / seconds if seconds > 0 else None), seconds


class _MeasuredBackend(SweepBackend):
    """A real workload measured through a telemetry source (NVML); its defaults are unknown."""

    def __init__(self, source: TelemetrySource, tokens_from: Path | None) -> None:
        self.source, self.tokens_from = source, tokens_from
        self.host, self.devices = source.host, source.devices()
        self.defaults = dict.fromkeys(KNOBS)


class CmdBackend(_MeasuredBackend):
    """Starts the user's command per point (``{knob}`` placeholders) and reads NVML power.

    Throughput comes from the last JSON line with a ``unit`` field (``tokens``, or
    ``microbatches`` for stage profiles): that count over its ``seconds`` (default: the
    command's wall time)."""

    name = "cmd"

    def __init__(
        self,
        template: str,
        source: TelemetrySource,
        tokens_from: Path | None = None,
        unit: str = "tokens",
    ) -> None:
        super().__init__(source, tokens_from)
        self.template, self.unit = template, unit

    def command(self, point: Point) -> str:
        """Return the command line for a point (placeholders filled)."""
        values = {k: v for k, v in point.knobs().items() if v is not None}
        try:
            return self.template.format(**values)
        except (KeyError, IndexError) as exc:
            raise ValueError(
                f"placeholder {exc} in {option('run')} has no value in this sweep"
            ) from None

    def run(
        self,
        point: Point,
        warmup_s: float,
        point_s: float,
        interval_s: float,
        stop: threading.Event,
    ) -> PointRun:
        empty = PointRun(point, time.time(), np.empty(0), np.empty((len(self.devices), 0)))
        try:
            cmd = self.command(point)
        except ValueError as exc:
            empty.error = str(exc)
            return empty
        started = time.monotonic()
        proc = subprocess.Popen(
            shlex.split(cmd) if os.name != "posix" else ["/bin/sh", "-c", cmd],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        out_lines: list[str] = []
        err_lines: list[str] = []
        readers = [
            threading.Thread(target=_drain, args=(stream, lines), daemon=True)
            for stream, lines in ((proc.stdout, out_lines), (proc.stderr, err_lines))
        ]
        for r in readers:
            r.start()
        # `halt` ends the warm-up and the sampling early: the command exited, or a signal came.
        finished, halt = threading.Event(), threading.Event()
        _background(proc.wait, finished, halt)
        _background(stop.wait, halt)
        halt.wait(warmup_s)
        epoch, times, power = (time.time(), np.empty(0), np.empty((len(self.devices), 0)))
        features: dict[str, float] = {}
        if not halt.is_set():
            epoch, times, power, features = sample_source(self.source, interval_s, point_s, halt)
        if proc.poll() is None:
            _terminate(proc)
        proc.wait()
        for r in readers:
            r.join(timeout=5)
        wall = time.monotonic() - started
        run = PointRun(point, epoch, times, power, features=features)
        data = last_json(read_lines(self.tokens_from) if self.tokens_from else out_lines, self.unit)
        run.tokens_per_s, run.duration_s = _tokens_per_s(data, wall, self.unit)
        if stop.is_set():
            run.error = "interrupted"
        elif proc.returncode not in (0, -signal.SIGTERM) and not (
            proc.returncode < 0 and times.size
        ):
            tail = err_lines[-1].strip() if err_lines else ""
            run.error = f"exit code {proc.returncode}" + (f": {tail}" if tail else "")
        elif times.size == 0:
            run.error = f"the command ended after {wall:.1f} s, before the warm-up was over"
        elif data is None:
            run.error = f'the command printed no JSON line with "{self.unit}"'
        return run


class LiveBackend(_MeasuredBackend):
    """Writes knobs to a channel a running workload polls; reads NVML power meanwhile. The
    GPU knobs (power cap, locked clock) are the sweep's to set, not the workload's."""

    name = "live"

    def __init__(
        self,
        channel: KnobChannel | None,
        source: TelemetrySource,
        tokens_from: Path | None = None,
    ) -> None:
        super().__init__(source, tokens_from)
        self.channel = channel

    def close(self) -> None:
        """Release the knob channel (its one-writer lock)."""
        if self.channel is not None:
            self.channel.close()

    def run(
        self,
        point: Point,
        warmup_s: float,
        point_s: float,
        interval_s: float,
        stop: threading.Event,
    ) -> PointRun:
        knobs = {k: v for k, v in point.knobs().items() if v is not None and k not in GPU_KNOBS}
        if self.channel is not None:
            self.channel.write(knobs)
        stop.wait(warmup_s)
        before = self._tokens()
        epoch, times, power, features = sample_source(self.source, interval_s, point_s, stop)
        after = self._tokens()
        run = PointRun(point, epoch, times, power, features=features)
        if before is not None and after is not None and after[0] > before[0]:
            if after[1] < before[1]:
                run.error = (
                    f"the workload's token count went down ({before[1]:g} -> {after[1]:g}) in "
                    f"{self.tokens_from}: a cumulative count never does (restarted?)"
                )
            else:
                run.tokens_per_s = (after[1] - before[1]) / (after[0] - before[0])
        if stop.is_set():
            run.error = "interrupted"
        return run

    def _tokens(self) -> tuple[float, float] | None:
        """Return (time, cumulative tokens) from the workload's last JSON line, if any."""
        if self.tokens_from is None:
            return None
        data = last_json(read_lines(self.tokens_from))
        if data is None:
            return None
        try:
            when, count = float(data.get("ts", time.time())), float(data["tokens"])  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise BadInputError(
                f"{self.tokens_from}: the last token line's ts/tokens are not numbers"
            ) from None
        if not (math.isfinite(when) and math.isfinite(count) and count >= 0):
            raise BadInputError(
                f"{self.tokens_from}: the last token line holds ts {when:g}, tokens {count:g}; "
                "expected finite numbers, tokens at least 0"
            )
        return when, count


class NvmlBackend(LiveBackend):
    """A job that is already running, measured through NVML (or amd-smi) under each power cap.

    Nothing is sent to the workload: the sweep sets the cap before each point (restored on
    exit); throughput comes from the workload's cumulative-token JSON lines.
    """

    name = "nvml"

    def __init__(self, source: GpuSource, tokens_from: Path | None = None) -> None:
        from powerkit.telemetry.gpu import AMD

        super().__init__(None, source, tokens_from)
        self.name = "amdsmi" if source.vendor == AMD else "nvml"


def _background(wait: Callable[[], object], *then: threading.Event) -> None:
    """Run ``wait`` in a daemon thread, then set each event of ``then``."""

    def run() -> None:
        wait()
        for event in then:
            event.set()

    threading.Thread(target=run, daemon=True).start()


def _drain(stream: object, lines: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.append(line)


def read_lines(path: Path) -> list[str]:
    """The lines of the workload's token file; none while it does not exist yet (a file that
    is not a regular file, or not text, is an error: see powerkit.core.inputs)."""
    if not path.exists():
        return []
    return read_text_input(path, option("tokens-from"), max_bytes=1 << 30).splitlines()


def _terminate(proc: subprocess.Popen[str]) -> None:
    """Stop the command and its children: SIGTERM, then SIGKILL after 5 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def make_backend(
    name: Backend,
    *,
    preset: str,
    seed: int,
    common_seed: bool = False,
    run: str | None = None,
    actuator: str | None = None,
    gpus: list[int] | None = None,
    tokens_from: Path | None = None,
) -> tuple[SweepBackend, GpuSource | None]:
    """The backend a sweep runs on (``sweep``, ``pfi sweep``), and the GPUs it reads and sets
    (None for the simulator): the simulated job of ``preset``; a command run per point
    (``run``, knob values in braces); a running workload's knob channel (``actuator``,
    ``file:PATH``); or a running job read through NVML or amd-smi (``tokens_from``: its
    cumulative tokens). A command or a knob channel reads the host's GPUs: NVIDIA's where NVML
    answers, else AMD's. What a backend needs and was not given is one line naming the
    option."""
    if name is Backend.sim:
        return SimBackend(get_preset(preset), seed=seed, common_seed=common_seed), None
    if name is Backend.cmd and not run:
        raise BadInputError(
            f"{option('backend')} cmd needs {option('run')} 'COMMAND ...' (knob values in "
            f"braces, e.g. {{group_size}})"
        )
    if name is Backend.live and not (actuator or "").startswith("file:"):
        raise BadInputError(f"{option('backend')} live needs {option('actuator')} file:PATH")
    if name in (Backend.nvml, Backend.amdsmi) and tokens_from is None:
        raise BadInputError(
            f"{option('backend')} {name} needs {option('tokens-from')} (the running job's JSON "
            "lines with cumulative "
            "tokens)"
        )
    from powerkit.telemetry.gpu import AMD, NVIDIA
    from powerkit.telemetry.vendors import open_gpu_source

    vendor = {Backend.nvml: NVIDIA, Backend.amdsmi: AMD}.get(name)
    source = open_gpu_source(gpus, vendor)
    if name is Backend.cmd:
        return CmdBackend(run or "", source, tokens_from), source
    if name is Backend.live:
        return LiveBackend(KnobChannel((actuator or "")[5:]), source, tokens_from), source
    return NvmlBackend(source, tokens_from), source
