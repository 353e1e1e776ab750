"""``powerkit top``: the live view an operator keeps open (Rich Live, keys from the tty)."""

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

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.core.choices import GpuBackend, TopScope
from powerkit.core.units import (
    parse_duration,
    parse_durations,
    parse_gpus,
    parse_power,
)
from powerkit.telemetry.recorder import stop_on_signals
from powerkit.top.session import TopSession, TopSnapshot
from powerkit.top.sources import TopOptions, open_session
from powerkit.top.view import view

__all__ = ["top"]


@cli.handle_errors
def top(
    backend: Annotated[GpuBackend | None, typer.Option(help="Default: the GPUs found.")] = None,
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
    gpus: opt.Gpus = None,
    preset: Annotated[str, typer.Option(help="sim: the workload preset.")] = "a100-7b",
    seed: Annotated[int, typer.Option(min=0, help="sim: random seed.")] = 0,
    nameplate: Annotated[str | None, typer.Option(help="Prometheus: per-GPU nameplate.")] = None,
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Live GPU power against a budget: trailing means, violations, headroom, throttling."""
    interval_s = parse_duration(interval)
    duration_s = interval_s if once else None  # (--once: a tick, unless --duration says)
    if duration is not None:  # ('' is refused, never taken for no duration)
        duration_s = parse_duration(duration)
    opts = cli.options_from(  # (interval_s, duration_s, preset, seed, force by their names)
        TopOptions,
        locals(),
        backend=backend and str(backend),
        source_url=source,
        windows_s=parse_durations(windows),
        budget=parse_power(budget),
        record_to=record,
        gpus=parse_gpus(gpus),
        nameplate_w=parse_power(nameplate).resolve(None) if nameplate is not None else None,
    )
    session = open_session(opts)
    session.start()
    # SIGINT, SIGTERM, SIGHUP end the session as q does: --record is finalized
    with stop_on_signals(session.stop):
        if once or json_out or not sys.stdout.isatty():
            _wait(session)
            cli.finish(
                session.snapshot(scope.value),
                json_out,
                lambda s: cli.out_console().print(view(s), soft_wrap=True),  # (a row a line)
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
                session.scale_budget(1.05 if key == "+" else 1 / 1.05)
            if not paused or key:
                shown = session.snapshot(scope)
            live.update(view(shown, paused), refresh=True)
    session.finish()
    return session.snapshot(scope)


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
