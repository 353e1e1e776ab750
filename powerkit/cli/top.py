"""``powerkit top``: the live view an operator keeps open (Rich Live; keys read from the
terminal itself, so no other dependency)."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group
from rich.text import Text

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.core.choices import Backend, TopScope, only
from powerkit.core.units import (
    format_duration,
    parse_duration,
    parse_durations,
    parse_gpus,
    parse_power,
)
from powerkit.telemetry.recorder import stop_on_signals
from powerkit.top.session import TopOptions, TopSession, TopSnapshot, open_session

__all__ = ["top"]

_BLOCKS = " ▁▂▃▄▅▆▇█"
_KEYS = "g/h/f scope · +/- budget 5% · p pause · q quit"


@cli.handle_errors
def top(
    backend: Annotated[Backend, typer.Option(help="nvml, amdsmi or sim.")] = Backend.nvml,
    source: Annotated[
        str | None, typer.Option(help="A Prometheus server: prometheus+http://HOST:PORT.")
    ] = None,
    budget: Annotated[str, typer.Option(help="Per-GPU budget, W or % of nameplate.")] = "100%",
    windows: Annotated[str, typer.Option(help="Trailing windows.")] = "1s,30s,5m",
    interval: Annotated[str, typer.Option(help="Sampling interval.")] = "0.5s",
    record: Annotated[Path | None, typer.Option(help="Also write the samples here.")] = None,
    duration: Annotated[str | None, typer.Option(help="Stop after this long.")] = None,
    scope: Annotated[
        TopScope, typer.Option(help="gpu, host or fleet (keys g/h/f switch).")
    ] = TopScope.gpu,
    once: Annotated[bool, typer.Option(help="Sample --duration (or a tick), print.")] = False,
    gpus: Annotated[str | None, typer.Option(help="nvml/amdsmi: GPU indices.")] = None,
    preset: Annotated[str, typer.Option(help="sim: the workload preset.")] = "a100-7b",
    seed: Annotated[int, typer.Option(min=0, help="sim: random seed.")] = 0,
    nameplate: Annotated[str | None, typer.Option(help="Prometheus: per-GPU nameplate.")] = None,
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Live GPU power against a budget: trailing means, violations, headroom, throttling."""
    only(backend, (Backend.nvml, Backend.amdsmi, Backend.sim), "--backend", "top")
    interval_s = parse_duration(interval)
    duration_s = parse_duration(duration) if duration else (interval_s if once else None)
    opts = TopOptions(
        backend=str(backend),
        source_url=source,
        windows_s=parse_durations(windows),
        budget=parse_power(budget),
        interval_s=interval_s,
        duration_s=duration_s,
        record_to=record,
        preset=preset,
        seed=seed,
        gpus=parse_gpus(gpus),
        nameplate_w=parse_power(nameplate).resolve(None) if nameplate else None,
        force=force,
    )
    session = open_session(opts)
    session.start()
    # SIGINT, SIGTERM, SIGHUP end the session as q does: --record is finalized
    with stop_on_signals(session.stop):
        if once or json_out or not sys.stdout.isatty():
            _wait(session)
            cli.finish(
                session.snapshot(scope.value), json_out, lambda s: cli.out_console().print(view(s))
            )
            return
        last = _live(session, scope.value)
    cli.out_console().print(view(last))  # the last view stays on the terminal
    if record is not None:
        cli.err.print(f"wrote {record}")


def _wait(session: TopSession) -> None:
    while not session.done.wait(0.2):
        pass
    session.finish()


def _live(session: TopSession, scope: str) -> TopSnapshot:
    """The full-screen view until q, Ctrl-C or the duration; the last snapshot (all closed)."""
    from rich.live import Live

    paused = False
    shown = session.snapshot(scope)
    refresh = max(0.1, min(1.0, session.interval_s))
    screen = Live(view(shown), console=cli.out_console(), screen=True, auto_refresh=False)
    with screen as live, _keys() as read:
        while not session.done.is_set():
            key = read(refresh)
            if key == "q":
                break
            if key == "p":
                paused = not paused
            elif key in ("g", "h", "f"):
                scope = {"g": "gpu", "h": "host", "f": "fleet"}[key]
            elif key in ("+", "-"):
                _step_budget(session, 1.05 if key == "+" else 1 / 1.05)
            if not paused or key:
                shown = session.snapshot(scope)
            live.update(view(shown, paused), refresh=True)
    session.finish()
    return session.snapshot(scope)


def _step_budget(session: TopSession, factor: float) -> None:
    from powerkit.core.units import PowerSpec

    per_gpu = session.state.budgets
    if len(set(per_gpu)) == 1:  # one budget for every GPU: scale it (counting restarts)
        session.state.set_budget(PowerSpec(watts=per_gpu[0] * factor))
    else:  # (a share of nameplates that differ): said under the table, not ignored
        session.warnings = ["+/- change one budget for every GPU; these GPUs' budgets differ"]


@contextlib.contextmanager
def _keys() -> Iterator[Callable[[float], str]]:
    """``read(timeout_s)``: one key pressed, or "" after the timeout (no terminal: never)."""
    fd = sys.stdin.fileno() if sys.stdin.isatty() else None
    if fd is None:

        def wait(timeout: float) -> str:
            time.sleep(timeout)
            return ""

        yield wait
        return
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        yield (
            lambda timeout: (
                os.read(fd, 1).decode(errors="replace")
                if select.select([fd], [], [], timeout)[0]
                else ""
            )
        )
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _spark(values: list[float], top_w: float) -> str:
    if not values or top_w <= 0:
        return ""
    return "".join(_BLOCKS[min(8, max(0, round(8 * v / top_w)))] for v in values[-30:])


def _w(value: float | None, fmt: str = ".0f") -> str:
    return "-" if value is None else format(value, fmt)


def view(s: TopSnapshot, paused: bool = False) -> Group:
    """The screen: a header line, a row per GPU (host, fleet), the keys. The table is laid out
    by hand, one Text a line: a Rich Table costs ten times the CPU at every refresh."""
    head = Text.from_markup(
        f"[bold]powerkit top[/] {s.source} · scope {s.scope} · grid {format_duration(s.grid_s)}"
        f" · {s.elapsed_s:,.0f} s · {s.samples:,} samples · violations since "
        f"{s.counting_since}" + (" · [yellow]paused[/]" if paused else "")
    )
    headers = [
        "",
        "W",
        "budget",
        *(f"{w} mean" for w in s.windows),
        *(f"{w} viol" for w in s.windows),
        "headroom",
        "to plate",
        "limit",
        "thr",
        "kWh",
        "power",
    ]
    rows = [
        [
            r.name,
            _w(r.power_w),
            _w(r.budget_w),
            *(_w(m) for m in r.means_w),
            *(f"{v:,}" for v in r.violations),
            _w(r.headroom_w),
            _w(r.nameplate_headroom_w),
            _w(r.limit_w),
            ",".join(r.throttle),
            _w(None if r.energy_j is None else r.energy_j / 3.6e6, ".4f"),
            _spark(r.spark_w, max([r.nameplate_w or 0.0, *r.spark_w])),
        ]
        for r in s.rows
    ]
    widths = [max(len(x) for x in column) for column in zip(headers, *rows, strict=True)]
    left = {0, len(headers) - 4, len(headers) - 1}  # name, throttle, sparkline

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if k in left else c.rjust(w)
            for k, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    lines = [Text(line(headers), style="bold")]
    first_mean = 3
    for r, cells in zip(s.rows, rows, strict=True):
        text = Text(line(cells))
        at = sum(w + 2 for w in widths[:first_mean])
        for k, m in enumerate(r.means_w):  # a trailing mean over the budget in red
            width = widths[first_mean + k]
            if m is not None and m > r.budget_w:
                text.stylize("red", at, at + width)
            at += width + 2
        lines.append(text)
    parts = [head, *lines, Text(_KEYS, style="dim"), *(Text(w, style="yellow") for w in s.warnings)]
    return Group(*parts)
