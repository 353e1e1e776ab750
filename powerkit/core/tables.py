"""Tables declared once: each column's header, where its value comes from, its format and
unit; the command line renders them with Rich, the HTML report as HTML, from one declaration.

A column's value is an attribute of the row (``"peak_w"``) or a function of it; a missing
value (None) shows as ``-``; ``scale`` multiplies it first (``1e-3`` for kJ from J, ``100``
for a percentage shown with its sign in the unit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from powerkit.core.units import format_value

__all__ = ["Column", "cells", "headers"]


@dataclass(frozen=True)
class Column:
    """One column: ``header``, the ``value`` (attribute name or function of the row), the
    ``fmt`` of a number (a format spec; ``""``: the value as text), a ``unit`` written after
    each number (``"%"``, ``" W"``), whether it is the row's key (first, left-aligned), and
    whether it is text to left-align (a note, a verdict) rather than a figure."""

    header: str
    value: str | Callable[[Any], Any]
    fmt: str = ""
    unit: str = ""
    scale: float = 1.0
    key: bool = False
    text: bool = False

    def of(self, row: Any) -> Any:
        """The column's raw value for ``row``."""
        return getattr(row, self.value) if isinstance(self.value, str) else self.value(row)

    def cell(self, row: Any) -> str:
        """The column's text for ``row``."""
        value = self.of(row)
        if value is None:
            return "-"
        if isinstance(value, str) or not self.fmt:
            return f"{value}{self.unit}" if not isinstance(value, str) else value
        return format_value(value * self.scale if self.scale != 1 else value, self.fmt) + self.unit


def headers(columns: Sequence[Column]) -> list[str]:
    """The columns' headers."""
    return [c.header for c in columns]


def cells(columns: Sequence[Column], rows: Iterable[Any]) -> list[list[str]]:
    """Each row's cells, one per column."""
    return [[c.cell(row) for c in columns] for row in rows]
