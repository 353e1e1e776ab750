"""``powerkit record``: sample GPUs (NVML) or the simulator into a canonical Parquet trace."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.core.choices import Backend, GpuBackend
from powerkit.core.units import format_energy, parse_duration, parse_gpus
from powerkit.sweep.plan import KNOB_MAX
from powerkit.telemetry.base import TelemetrySource
from powerkit.telemetry.job import RecordOptions, run_recording
from powerkit.telemetry.recorder import RecordResult, RecordStatus, Recovered
from powerkit.telemetry.recorder import recover as recover_recording
from powerkit.trace.timeparse import parse_start

__all__ = ["record"]


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
            console=cli.err,
            transient=True,
        )
        self.task = self.progress.add_task("record", total=duration_s or None)
        self.live = Live(console=cli.err, refresh_per_second=4, transient=True)

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


def _recover(out: Path, dataset: bool, force: bool, json_out: bool) -> None:
    def render(done: Recovered) -> None:
        cli.err.print(
            f"{out}: the unfinished recording held no whole part; its folder was removed"
            if done.path is None
            else f"recovered {done.samples:,} samples from {done.parts} part(s) into {done.path}"
        )

    cli.finish(recover_recording(out, dataset=dataset, force=force), json_out, render)


@cli.handle_errors
def record(
    ctx: typer.Context,
    out_text: Annotated[
        str, typer.Option("--out", "-o", help="Parquet file to write, or DIR/ for a dataset.")
    ],
    backend: Annotated[GpuBackend | None, typer.Option(help="Default: the GPUs found.")] = None,
    interval: Annotated[str, typer.Option(help="Sampling interval, e.g. 0.5s, 100ms.")] = "0.5s",
    duration: Annotated[
        str | None,
        typer.Option(help="How long to record (e.g. 10m); nvml: until Ctrl-C if omitted."),
    ] = None,
    gpus: opt.Gpus = None,
    preset: Annotated[str, typer.Option(help="sim: workload preset.")] = "a100-7b",
    seed: Annotated[int, typer.Option(min=0, help="sim: random seed.")] = 0,
    group_size: Annotated[
        int | None, typer.Option(min=1, max=KNOB_MAX["group_size"], help="sim: GRPO group size.")
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, max=KNOB_MAX["concurrency"], help="sim: generation concurrency."),
    ] = None,
    power_cap: Annotated[
        str | None, typer.Option(help="sim: per-GPU cap, e.g. 300W or 75%.")
    ] = None,
    drift: Annotated[str, typer.Option(help="sim: response lengths: none or grpo.")] = "none",
    realtime: Annotated[bool, typer.Option(help="sim: run at wall-clock speed.")] = False,
    sensor: Annotated[
        str | None,
        typer.Option(help="sim: the power sensor to read through (see docs/trust.md)."),
    ] = None,
    truth_out: Annotated[
        str | None, typer.Option(help="sim: also write the true power (every 5 ms) here.")
    ] = None,
    start: Annotated[str | None, typer.Option(help="sim: ISO time of the first sample.")] = None,
    host: Annotated[
        str | None, typer.Option(help="Host name to store (default: this host, or 'sim').")
    ] = None,
    flush: Annotated[str, typer.Option(help="Write a chunk this often.")] = "5s",
    annotate_from: Annotated[
        Path | None,
        typer.Option(help="JSON-lines file the workload appends step/phase/tokens/knobs to."),
    ] = None,
    serve_metrics: Annotated[
        str | None,
        typer.Option(
            help="Serve live power, energy and window means to Prometheus at [HOST:]PORT "
            "(localhost unless a host is given)."
        ),
    ] = None,
    windows: Annotated[
        str, typer.Option(help="--serve-metrics: trailing windows, e.g. 1s,30s,5m.")
    ] = "1s,30s,5m",
    budget: Annotated[
        str | None, typer.Option(help="--serve-metrics: per-GPU budget for violation counts.")
    ] = None,
    force: opt.Force = False,
    recover: Annotated[
        bool,
        typer.Option(help="Finish what a killed recording into --out left (its parts), then stop."),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No live display or summary.")
    ] = False,
    json_out: opt.Json = False,
) -> None:
    """Record GPU power (and clocks, utilization, temperature, energy) to canonical Parquet."""
    if recover:
        cli.only_with(ctx, "recover", "out_text", "force", "json_out", "quiet")
        _recover(Path(out_text), out_text.endswith(("/", "\\")), force, json_out)
        return
    opts = cli.options_from(
        RecordOptions,
        locals(),
        out=out_text,
        backend=backend and Backend(backend),
        gpus=parse_gpus(gpus),
        interval_s=parse_duration(interval),
        duration_s=parse_duration(duration) if duration is not None else None,
        flush_s=parse_duration(flush),
        start_epoch_s=parse_start(start).timestamp() if start else None,
    )

    def started() -> None:
        if backend == Backend.sim and not quiet and not json_out:
            cli.err.print(
                f"recording the simulator (preset {preset}, seed {seed}); "
                "use --backend nvml for real GPUs"
            )

    show = not quiet and sys.stderr.isatty()

    @contextlib.contextmanager
    def display(source: TelemetrySource, duration_s: float | None) -> Iterator[Any]:
        with _Display(source, duration_s, show) as shown:
            yield shown.update

    result = run_recording(
        opts, display=display, info=cli.err.print, note=cli.warn, started=started
    )
    cli.finish(result, json_out, lambda r: None if quiet else _render(r))


def _render(result: RecordResult) -> None:
    """The line a finished recording prints."""
    j = result.lateness_ms
    late = f"; lateness p50/p99/max {j['p50']:.2f}/{j['p99']:.2f}/{j['max']:.2f} ms" if j else ""
    cli.err.print(
        f"wrote {result.path}: {result.samples:,} samples from {result.gpus} GPU(s), "
        f"{result.ticks:,} ticks, {result.missed_ticks} missed{late}; energy "
        + ", ".join(format_energy(e) for e in result.energy_j)
    )
    if result.truth is not None:
        cli.err.print(f"wrote {result.truth}: the true power, every 5 ms")
