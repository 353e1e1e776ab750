"""Progress bars for long work: on a terminal's stderr only, never on stdout or in a pipe."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from powerkit.cli.boundary import err
from powerkit.core.shown import visible

__all__ = ["percent_done", "progress"]


@contextlib.contextmanager
def progress(
    label: str, total: float | None, *, quiet: bool = False
) -> Iterator[Callable[..., None]]:
    """Yield ``advance(n=1, note="")``: a Rich bar on stderr when it is a terminal; piped, each
    note becomes a plain log line there instead; ``quiet`` (e.g. ``--json``) shows neither.
    Stdout is never touched."""
    if quiet:
        yield lambda n=1, note="": None
        return
    if not err.is_terminal:

        def log(n: float = 1, note: str = "") -> None:
            if note:
                err.print(note, markup=False)

        yield log
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn(f"{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[note]}", markup=False),  # (a note names files: data)
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=total, note="")

        def advance(n: float = 1, note: str = "") -> None:
            bar.update(task, advance=n, note=visible(note))

        yield advance


def percent_done(advance: Callable[..., None], what: str) -> Callable[[int, int], None]:
    """``on_block(done, total)`` moving a ``progress(label, 100)`` bar; piped, a line a tenth."""
    shown = [0, 0]  # percent advanced, tenths noted

    def on_block(done: int, total: int) -> None:
        percent = int(100 * done / total) if total else 100
        tenth = percent // 10
        note = f"{what}: {percent} % done" if tenth > shown[1] else ""
        advance(percent - shown[0], note)
        shown[:] = [percent, max(shown[1], tenth)]

    return on_block
