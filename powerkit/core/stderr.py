"""The command line's stderr: one line a message, plain when piped, Rich's on a terminal (Rich
loaded only then: design note 173)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["Stderr"]


class Stderr:
    """stderr: one line a message, never wrapped by powerkit (grep-able when piped). The
    console is made (and Rich loaded) when something is drawn on a terminal: piped (and with
    no ``FORCE_COLOR``), a message is the same plain line written directly, so that a run
    that only warns or fails never loads Rich."""

    _console: Any = None

    @staticmethod
    def _made() -> Any:
        if Stderr._console is None:
            from powerkit.core.consoles import SafeConsole

            Stderr._console = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
        return Stderr._console

    @staticmethod
    def plain() -> bool:
        """Whether a line goes to stderr as plain text: piped, with no console made and no
        colour forced (what Rich itself would write there, without loading it)."""
        import os

        return (
            Stderr._console is None
            and "FORCE_COLOR" not in os.environ
            and "TTY_COMPATIBLE" not in os.environ
            and not sys.stderr.isatty()
        )

    def line(self, label: str, text: str, style: str) -> None:
        """``label: text``: ``text`` from data (never markup, control characters written
        out), ``label`` in ``style`` on a terminal."""
        if self.plain():
            self._write(f"{label}: {text}")
            return
        from rich.markup import escape

        self._made().print(f"[{style}]{label}:[/] {escape(text)}", soft_wrap=True, markup=True)

    def print(self, *objects: Any, **options: Any) -> None:
        """Rich's ``print``; piped, text with no markup asked for is written as it is."""
        if self.plain() and not options.get("markup") and all(isinstance(o, str) for o in objects):
            self._write(" ".join(objects))
        else:
            self._made().print(*objects, **options)

    @staticmethod
    def _write(text: str) -> None:
        from powerkit.core.shown import visible

        sys.stderr.write(visible(text) + "\n")
        sys.stderr.flush()

    @property
    def is_terminal(self) -> bool:
        return not self.plain() and bool(self._made().is_terminal)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._made(), name)

    # (Rich's progress bars and live views enter their console: `with` is not looked up
    # through __getattr__)
    def __enter__(self) -> Any:
        return self._made().__enter__()

    def __exit__(self, *exc: object) -> None:
        self._made().__exit__(*exc)
