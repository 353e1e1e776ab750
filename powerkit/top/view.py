"""The screen of ``powerkit top``: a snapshot laid out as a Rich renderable (a header line, a
row per GPU, host or the fleet, the keys), for a live display or to print once::

    from rich.console import Console
    Console().print(view(session.snapshot("gpu")))
"""

from __future__ import annotations

from rich.console import Group
from rich.markup import escape
from rich.text import Text

from powerkit.core.shown import visible
from powerkit.core.units import format_duration, format_energy
from powerkit.top.session import TopSnapshot

__all__ = ["KEYS", "view"]

_BLOCKS = " ▁▂▃▄▅▆▇█"
#: the keys the live display reads
KEYS = "g/h/f scope · +/- budget 5% · p pause · q quit"


def _spark(values: list[float], top_w: float) -> str:
    if not values or top_w <= 0:
        return ""
    return "".join(_BLOCKS[min(8, max(0, round(8 * v / top_w)))] for v in values[-30:])


def _w(value: float | None, fmt: str = ".0f") -> str:
    """A figure of the screen; one that rounds to zero is ``0``, never ``-0``."""
    if value is None:
        return "-"
    text = format(value, fmt)
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def view(s: TopSnapshot, paused: bool = False) -> Group:
    """The screen: a header line, a row per GPU (host, fleet), the keys. The table is laid out
    by hand, one Text a line: a Rich Table costs ten times the CPU at every refresh."""
    head = Text.from_markup(
        f"[bold]powerkit top[/] {escape(visible(s.source))} · scope {s.scope} · grid "
        f"{format_duration(s.grid_s)}"
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
        "energy",
        "power",
    ]
    rows = [
        [
            visible(r.name),
            _w(r.power_w),
            _w(r.budget_w),
            *(_w(m) for m in r.means_w),
            *(f"{v:,}" for v in r.violations),
            _w(r.headroom_w),
            _w(r.nameplate_headroom_w),
            _w(r.limit_w),
            visible(",".join(r.throttle)),
            "-" if r.energy_j is None else format_energy(r.energy_j),
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
    parts = [
        head,
        *lines,
        Text(KEYS, style="dim"),
        *(Text(visible(w), style="yellow") for w in s.warnings),
    ]
    return Group(*parts)
