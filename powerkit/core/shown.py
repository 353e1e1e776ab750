"""Text taken from data (a host, a GPU name, a job, a label) as a terminal may show it: every
control character written out (``\\x1b``), so that a value can neither clear the screen, set
a window title nor move the cursor. Markup is never read from such text: the command line's
consoles print with Rich markup off, and turn it on only for their own fixed words."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["SafeConsole", "TableConsole", "visible"]

#: C0 controls but tab and newline, DEL, C1 controls (ESC, CSI, OSC and the rest)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class SafeConsole(Console):
    """A console for text from data: markup off unless a call turns it on (for its own fixed
    words, data escaped), and every string shown with its control characters written out
    (powerkit.core.shown) — table cells included, which Rich renders through here."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**{"markup": False, **options})

    def render_str(self, text: str, **options: Any) -> Any:
        return super().render_str(visible(text), **options)


class TableConsole(SafeConsole):
    """The command line's stdout console: tables never cut a number (each column but the first
    keeps its widest cell's width); piped, output is as wide as the widest table (a whole line
    per row, for grep)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        tables = [o for o in objects if isinstance(o, Table)]
        for table in tables:
            for i, column in enumerate(table.columns):
                if i == 0:
                    column.overflow, column.no_wrap = "fold", False
                    continue
                cells = [str(c) for c in column.cells if isinstance(c, str)]
                column.min_width = max((len(c) for c in [str(column.header), *cells]), default=1)
        need = 0
        if tables and not self.is_terminal:  # (a terminal's width is what it is)
            unbounded = self.options.update_width(1_000_000)
            need = max(self.measure(t, options=unbounded).maximum for t in tables)
        if need <= self.width:
            super().print(*objects, **kwargs)
            return
        width = self.width
        self.width = need
        try:
            super().print(*objects, **kwargs)
        finally:
            self.width = width
