"""The command line's Rich consoles: text from data shown with its control characters written
out (powerkit.core.shown) and markup off; tables never cut a number. Rich is loaded with this
module, when something is first drawn (design note 173)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from powerkit.core.shown import visible

__all__ = ["SafeConsole", "TableConsole"]


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
