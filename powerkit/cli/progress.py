"""Progress bars for long work: on a terminal's stderr only, never on stdout or in a pipe."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from powerkit.cli.boundary import err

__all__ = ["progress"]


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

    columns = (TextColumn(f"{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[note]}"))  # fmt: skip
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=total, note="")

        def advance(n: float = 1, note: str = "") -> None:
            bar.update(task, advance=n, note=note)

        yield advance
