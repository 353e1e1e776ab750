"""The sweep runner: run every point in order, keep every sample, store the sweep."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from powerkit.actuation.caps import LockedClocks, PowerCaps
from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import check_regular
from powerkit.core.outputs import unfinished_path
from powerkit.sweep.backends import PointRun, SweepBackend
from powerkit.sweep.plan import KNOBS, Point, plan_points
from powerkit.trace.schema import GpuMeta, TraceMeta
from powerkit.trace.writing import write_trace

__all__ = [
    "SWEEP_KEY",
    "SweepConfig",
    "SweepData",
    "read_sweep",
    "resumable",
    "run_sweep",
    "stored_sweep",
    "write_sweep",
]

SWEEP_KEY = "sweep"  # where the sweep's plan and per-run results live in the trace metadata


@dataclass
class SweepConfig:
    """What to sweep and how; durations in seconds."""

    axes: dict[str, list[float]]
    warmup_s: float = 10.0
    point_s: float = 60.0
    interval_s: float = 0.5
    cooldown_s: float = 0.0
    repeats: int = 1
    seed: int = 0

    def varied(self) -> list[str]:
        """The knobs this sweep sets to more than one value, in KNOBS order."""
        return [k for k in KNOBS if len(self.axes.get(k, [])) > 1]


@dataclass
class SweepData:
    """A sweep in memory: its config, the backend's description and every run."""

    config: SweepConfig
    backend: str
    preset: str | None
    nameplate_w: float | None
    gpus: int
    defaults: dict[str, Any]
    runs: list[PointRun] = field(default_factory=list)
    interrupted: bool = False
    job: str | None = None  # the workload's name, when the user gave one (pfi sweep)
    labels: dict[str, str] = field(default_factory=dict)  # group columns (model, cluster)


def run_sweep(
    backend: SweepBackend,
    config: SweepConfig,
    *,
    caps: PowerCaps | None = None,
    clocks: LockedClocks | None = None,
    stop: threading.Event | None = None,
    on_point: Callable[[PointRun, int], None] | None = None,
    done: list[PointRun] | None = None,
    on_checkpoint: Callable[[SweepData], None] | None = None,
) -> SweepData:
    """Run every point of the plan (randomized order); a failed point is kept with its error.

    A power-cap axis needs ``caps`` (NVML limits, restored by the caller's ``with``) and a
    GPU-frequency axis ``clocks`` (locked SM clocks, reset by the caller's ``with``) unless the
    backend is the simulator, whose model takes both as knobs. ``done`` holds the runs
    of an interrupted sweep of the same plan (``--resume``): their points are not run again,
    except those that failed. ``on_checkpoint`` gets the sweep so far after every point (the
    caller stores it, so that a kill loses at most the point in progress).
    """
    stop = stop or threading.Event()
    points = plan_points(config.axes, config.repeats, config.seed)
    if "power_cap_w" in config.axes and backend.name != "sim" and caps is None:
        raise BadInputError(f"a {option('power-cap')} axis on real GPUs needs NVML power limits")
    if "gpu_frequency_mhz" in config.axes and backend.name != "sim" and clocks is None:
        raise BadInputError(
            f"a {option('gpu-frequency')} axis on real GPUs needs NVML locked clocks"
        )
    plates = {d.nameplate_w for d in backend.devices}
    data = SweepData(
        config,
        backend.name,
        getattr(getattr(backend, "preset", None), "name", None),
        plates.pop() if len(plates) == 1 else None,
        len(backend.devices),
        dict(backend.defaults),
    )
    data.runs = [r for r in done or [] if r.error is None]
    finished = {r.point.order for r in data.runs}
    ran = 0
    for point in points:
        if point.order in finished:
            continue
        if stop.is_set():
            data.interrupted = True
            break
        if ran and config.cooldown_s:
            backend.cooldown(config.cooldown_s, stop)
        if caps is not None and backend.name != "sim":
            caps.set(point.power_cap_w)
        if clocks is not None and backend.name != "sim":
            clocks.set(point.gpu_frequency_mhz)
        run = backend.run(point, config.warmup_s, config.point_s, config.interval_s, stop)
        ran += 1
        data.runs.append(run)
        if on_point:
            on_point(run, len(points))
        if on_checkpoint and not stop.is_set():
            data.interrupted = len(data.runs) < len(points)  # stored as unfinished until the end
            on_checkpoint(data)
    data.runs.sort(key=lambda r: r.point.order)
    if stop.is_set():
        data.interrupted = True
    return data


def write_sweep(data: SweepData, path: Path, host: str) -> Path:
    """Write every measured sample (with its point's knobs) and the runs to Parquet."""
    tables = []
    for run in data.runs:
        n = run.times_s.size
        if n == 0:
            continue
        gpus = run.power_w.shape[0]
        ts = np.tile(np.round((run.epoch_s + run.times_s) * 1e6).astype(np.int64), gpus)
        columns: dict[str, Any] = {
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "host": pa.array([host] * (n * gpus)),
            "gpu": pa.array(np.repeat(np.arange(gpus), n).astype(np.int16)),
            "power_w": pa.array(run.power_w.ravel().astype(np.float32)),
            "energy_j": pa.nulls(n * gpus, pa.float64()),
            "order": pa.array(np.full(n * gpus, run.point.order, np.int32)),
        }
        for knob in KNOBS:
            value = getattr(run.point, knob)
            kind = pa.int32() if knob in ("group_size", "concurrency") else pa.float32()
            columns[knob] = pa.array([value] * (n * gpus), kind)
        tables.append(pa.table(columns))
    if not tables:
        raise BadInputError("no point produced samples; nothing to write")
    table = pa.concat_tables(tables).sort_by(
        [("host", "ascending"), ("gpu", "ascending"), ("ts", "ascending")]
    )
    meta = TraceMeta(source=f"sweep-{data.backend}", interval_s=data.config.interval_s)
    meta.extra[SWEEP_KEY] = {
        "config": asdict(data.config),
        "backend": data.backend,
        "preset": data.preset,
        "nameplate_w": data.nameplate_w,
        "gpus": data.gpus,
        "defaults": data.defaults,
        "interrupted": data.interrupted,
        "job": data.job,
        "labels": data.labels,
        "runs": [
            {
                "point": asdict(r.point),
                "epoch_s": r.epoch_s,
                "tokens_per_s": r.tokens_per_s,
                "duration_s": r.duration_s,
                "error": r.error,
                "samples": int(r.times_s.size),
                "features": r.features,
            }
            for r in data.runs
        ],
    }
    meta.gpus = [GpuMeta(host, g, nameplate_w=data.nameplate_w) for g in range(data.gpus)]
    return write_trace(table, meta, path)


def checkpoint_path(out: Path) -> Path:
    """Where a sweep into ``out`` is kept while it is unfinished (``NAME.unfinished.parquet``):
    ``out`` itself is written only once every point has run, so an earlier result there is
    never replaced by part of a new one, whatever stops the sweep."""
    return unfinished_path(out)


def unfinished_note(data: SweepData, path: Path) -> str | None:
    """A line saying that the sweep stored at ``path`` did not finish; None when it did."""
    if not data.interrupted:
        return None
    return (
        f"{path}: an unfinished sweep ({len(data.runs)} run(s) stored); continue it with "
        f"the command that started it plus {option('resume')}"
    )


def resumable(
    path: Path, config: SweepConfig, backend: str, preset: str | None, job: str | None
) -> SweepData:
    """Return the interrupted sweep stored at ``path`` when ``--resume`` may continue it: the
    same plan (axes, repeats, seed, durations), backend, preset and job; else BadInputError."""
    if not path.exists():
        raise BadInputError(f"{option('resume')}: {path} does not exist (nothing to continue)")
    previous = read_sweep(path)
    mine, theirs = asdict(config), asdict(previous.config)
    differ = [k for k in mine if mine[k] != theirs.get(k)]
    for name, a, b in (
        ("backend", backend, previous.backend),
        ("preset", preset, previous.preset),
        ("job", job, previous.job),
    ):
        if a != b:
            differ.append(name)
    if differ:
        raise BadInputError(
            f"{option('resume')}: {path} was a different sweep ({', '.join(differ)} differ); "
            "give the "
            "options it was started with"
        )
    if not previous.interrupted:
        raise BadInputError(f"{option('resume')}: {path} is a finished sweep (nothing left to run)")
    return previous


def stored_sweep(path: Path) -> dict[str, Any] | None:
    """Return the sweep metadata of a Parquet file, or None when it is not a sweep file."""
    check_regular(path)
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise BadInputError(f"{path}: not a readable Parquet file ({exc})") from None
    raw = (schema.metadata or {}).get(b"powerkit")
    stored = json.loads(TraceMeta.from_json(raw).to_json())["extra"].get(SWEEP_KEY) if raw else None
    return stored or None


def read_sweep(path: Path) -> SweepData:
    """Return a stored sweep (for ``sweep show``)."""
    stored = stored_sweep(path)
    if not stored:
        raise BadInputError(f"{path}: not a sweep file (no sweep metadata)")
    table = pq.read_table(path, columns=["ts", "gpu", "power_w", "order"])
    order = table.column("order").to_numpy()
    gpu = table.column("gpu").to_numpy()
    ts = table.column("ts").cast(pa.int64()).to_numpy() / 1e6
    power = table.column("power_w").to_numpy().astype(np.float64)
    config = SweepConfig(**stored["config"])
    data = SweepData(
        config,
        stored["backend"],
        stored["preset"],
        stored["nameplate_w"],
        stored["gpus"],
        stored["defaults"],
        interrupted=stored["interrupted"],
        job=stored.get("job"),
        labels=stored.get("labels") or {},
    )
    for r in stored["runs"]:
        point = Point(**r["point"])
        sel = order == point.order
        gpus = int(gpu[sel].max()) + 1 if sel.any() else 0
        per_gpu = [power[sel & (gpu == g)] for g in range(gpus)]
        times = ts[sel & (gpu == 0)] - r["epoch_s"] if gpus else np.empty(0)
        run = PointRun(
            point,
            r["epoch_s"],
            times,
            np.stack(per_gpu) if per_gpu else np.empty((0, 0)),
            r["tokens_per_s"],
            r["duration_s"],
            r["error"],
            r.get("features") or {},
        )
        data.runs.append(run)
    return data
