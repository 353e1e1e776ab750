"""``powerkit record``: sample GPUs (NVML) or the simulator into a canonical Parquet trace."""

from __future__ import annotations

import dataclasses
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from powerkit.choices import Backend, only
from powerkit.cli.common import (
    ForceOpt,
    JsonOpt,
    err,
    finish,
    handle_errors,
    refuse_overwrite,
    warn,
)
from powerkit.errors import BadInputError
from powerkit.outputs import check_dataset_output
from powerkit.sweep.plan import KNOB_MAX
from powerkit.telemetry.base import TelemetrySource
from powerkit.telemetry.recorder import (
    RecordConfig,
    RecordResult,
    RecordStatus,
    Recovered,
    dataset_staging,
    finish_dataset,
    parts_of,
    stop_on_signals,
)
from powerkit.telemetry.recorder import (
    record as run_record,
)
from powerkit.telemetry.recorder import recover as recover_recording
from powerkit.telemetry.sources import make_source
from powerkit.trace.timeparse import TIME_RANGE_S, parse_start
from powerkit.units import parse_duration, parse_gpus

__all__ = ["record"]

_MIN_INTERVAL_S = 0.01


class _Display:
    """Live per-GPU table on a TTY, a progress bar for simulated time, or nothing."""

    def __init__(self, source: TelemetrySource, duration_s: float | None, enabled: bool) -> None:
        self.names = [f"{source.host}:{d.index}" for d in source.devices()]
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("recording"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        )
        self.task = self.progress.add_task("record", total=duration_s or None)
        self.live = Live(console=err, refresh_per_second=4, transient=True)

    def __enter__(self) -> _Display:
        if self.enabled:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.live.__exit__(None, None, None)

    def update(self, status: RecordStatus) -> None:
        if not self.enabled:
            return
        self.progress.update(self.task, completed=status.elapsed_s)
        status_line = Text(
            f"{status.elapsed_s:,.1f} s, {status.samples:,} samples, "
            f"{status.missed_ticks} missed tick(s); Ctrl-C stops and saves"
        )
        table = Table("GPU", "power W", "energy Wh")
        for name, p, e in zip(self.names, status.power_w, status.energy_j, strict=False):
            table.add_row(name, f"{p:.1f}", f"{e / 3600:.2f}")
        self.live.update(Group(self.progress, status_line, table))


def _recover(out: Path, dataset: bool, json_out: bool) -> None:
    def render(done: Recovered) -> None:
        if done.path is None:
            err.print(f"{out}: the unfinished recording held no whole part; its folder was removed")
        else:
            err.print(f"recovered {done.samples:,} samples from {done.parts} part(s) into "
                      f"{done.path}")  # fmt: skip

    finish(recover_recording(out, dataset=dataset), json_out, render)


@handle_errors
def record(
    out_text: Annotated[
        str,
        typer.Option("--out", "-o", help="Parquet file to write, or DIR/ for a dataset."),
    ],
    backend: Annotated[
        Backend, typer.Option("--backend", help="nvml (real GPUs) or sim.")
    ] = Backend.sim,
    interval: Annotated[
        str, typer.Option("--interval", help="Sampling interval, e.g. 0.5s, 100ms.")
    ] = "0.5s",
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration", help="How long to record (e.g. 10m); nvml: until Ctrl-C if omitted."
        ),
    ] = None,
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="nvml: GPU indices, e.g. 0,2 (default all).")
    ] = None,
    preset: Annotated[str, typer.Option("--preset", help="sim: workload preset.")] = "a100-7b",
    seed: Annotated[int, typer.Option("--seed", min=0, help="sim: random seed.")] = 0,
    group_size: Annotated[
        int | None,
        typer.Option(
            "--group-size", min=1, max=KNOB_MAX["group_size"], help="sim: GRPO group size."
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", min=1, max=KNOB_MAX["concurrency"], help="sim: generation concurrency."
        ),
    ] = None,
    power_cap: Annotated[
        str | None, typer.Option("--power-cap", help="sim: per-GPU cap, e.g. 300W or 75%.")
    ] = None,
    realtime: Annotated[
        bool, typer.Option("--realtime", help="sim: run at wall-clock speed.")
    ] = False,
    start: Annotated[
        str | None, typer.Option("--start", help="sim: ISO time of the first sample.")
    ] = None,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Host name to store (default: this host, or 'sim')."),
    ] = None,
    flush: Annotated[str, typer.Option("--flush", help="Write a chunk this often.")] = "5s",
    annotate_from: Annotated[
        Path | None,
        typer.Option(
            "--annotate-from",
            help="JSON-lines file the workload appends step/phase/tokens/knobs to.",
        ),
    ] = None,
    serve_metrics: Annotated[
        str | None,
        typer.Option(
            "--serve-metrics",
            help="Serve live power, energy and window means to Prometheus at [HOST:]PORT "
            "(localhost unless a host is given).",
        ),
    ] = None,
    windows: Annotated[
        str, typer.Option("--windows", help="--serve-metrics: trailing windows, e.g. 1s,30s,5m.")
    ] = "1s,30s,5m",
    budget: Annotated[
        str | None,
        typer.Option("--budget", help="--serve-metrics: per-GPU budget for violation counts."),
    ] = None,
    force: ForceOpt = False,
    recover: Annotated[
        bool,
        typer.Option(
            "--recover",
            help="Finish what a killed recording into --out left (its parts), then stop.",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No live display or summary.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Record GPU power (and clocks, utilization, temperature, energy) to canonical Parquet."""
    only(backend, (Backend.nvml, Backend.sim), "--backend", "record")
    interval_s = parse_duration(interval)
    if interval_s < _MIN_INTERVAL_S:
        raise BadInputError(f"--interval {interval!r}: at least 10ms")
    duration_s = parse_duration(duration) if duration else None
    flush_s = parse_duration(flush)
    dataset = out_text.endswith(("/", "\\"))  # a trailing slash asks for a dataset folder
    folder = Path(out_text)
    if recover:
        _recover(folder, dataset, json_out)
        return
    # a recording into a dataset is kept under a hidden name, then split into partitions
    out = dataset_staging(folder) if dataset else Path(out_text)
    if parts_of(out).exists() or (dataset and out.exists()):
        raise BadInputError(
            f"{out_text}: an unfinished recording is there; finish it with "
            f"'powerkit record --out {out_text} --recover' (or remove {parts_of(out)})"
        )
    if dataset:
        check_dataset_output(folder, force=force)
    else:
        refuse_overwrite(out, force)
    virtual = backend is Backend.sim and not realtime
    if virtual and duration_s is None:
        raise BadInputError("--duration is needed for a simulated recording (or add --realtime)")
    if virtual and annotate_from is not None:
        raise BadInputError("--annotate-from needs a real-time recording (nvml, or sim --realtime)")
    start_epoch = parse_start(start).timestamp() if start else None
    if start_epoch is not None and start_epoch + (duration_s or 0) >= TIME_RANGE_S[1]:
        raise BadInputError(f"--start {start!r} plus --duration runs past 2199")
    if start and not virtual:
        raise BadInputError("--start applies to simulated recordings only")
    source = make_source(
        backend,
        preset=preset,
        seed=seed,
        group_size=group_size,
        concurrency=concurrency,
        power_cap=power_cap,
        realtime=realtime,
        gpus=parse_gpus(gpus),
        host=host,
    )
    if backend is Backend.sim and not quiet and not json_out:
        err.print(
            f"recording the simulator (preset {preset}, seed {seed}); "
            "use --backend nvml for real GPUs"
        )
    cfg = RecordConfig(
        out=out,
        interval_s=interval_s,
        duration_s=duration_s,
        flush_s=flush_s,
        annotate_from=annotate_from,
        start_epoch_s=start_epoch,
    )
    exporter = None
    if serve_metrics is not None:
        from powerkit.telemetry.exporter import start_exporter

        exporter, address = start_exporter(source, serve_metrics, interval_s, windows, budget,
                                           virtual)  # fmt: skip
        err.print(f"serving metrics at {address}")
    stop = threading.Event()
    show = not quiet and sys.stderr.isatty()
    try:
        with stop_on_signals(stop), _Display(source, duration_s, show) as display:
            on_sample = None if exporter is None else exporter.update
            result = run_record(source, cfg, stop=stop, on_progress=display.update,
                                on_sample=on_sample)  # fmt: skip
    finally:
        if exporter is not None:
            exporter.close()
    if result.interrupted:
        warn(f"recording stopped by signal after {result.duration_s:.1f} s; file finalized")
    if dataset and result.path is not None:
        finish_dataset(result.path, folder)
        result = dataclasses.replace(result, path=folder)
    finish(result, json_out, lambda r: None if quiet else _render(r))


def _render(result: RecordResult) -> None:
    """The line a finished recording prints."""
    jitter = result.lateness_ms
    late = (
        f"; lateness p50/p99/max {jitter['p50']:.2f}/{jitter['p99']:.2f}/{jitter['max']:.2f} ms"
        if jitter
        else ""
    )
    err.print(
        f"wrote {result.path}: {result.samples:,} samples from {result.gpus} GPU(s), "
        f"{result.ticks:,} ticks, {result.missed_ticks} missed{late}; energy "
        + ", ".join(f"{e / 3600:.2f} Wh" for e in result.energy_j)
    )
