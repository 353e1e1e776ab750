"""The HTML page: sections of captioned figures and tables, Plotly inlined once (offline)."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from powerkit import __version__
from powerkit.core.outputs import write_text

__all__ = ["MARGIN", "Figure", "Section", "render_page", "write_page"]

# Plot margins (px) every section's figures use, so that their axes line up down the page.
MARGIN = {"l": 60, "r": 20, "t": 30, "b": 40}

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; }
h1 { font-size: 1.6rem; }
h2 { font-size: 1.25rem; margin-top: 2.5rem; border-bottom: 1px solid #ddd; }
figure { margin: 1rem 0 2rem 0; } figcaption { color: #555; font-size: 0.9rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1.5rem 0; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f5f5f5; } td:first-child, th:first-child { text-align: left; }
.meta { color: #666; font-size: 0.85rem; }
"""


@dataclass
class Figure:
    """A Plotly figure and the one line that says what it shows."""

    figure: go.Figure
    caption: str


@dataclass
class Section:
    """A titled part of the report: an intro line, figures, and simple tables."""

    title: str
    intro: str = ""
    figures: list[Figure] = field(default_factory=list)
    tables: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_page(title: str, sections: list[Section], plotly_js: str = "inline") -> str:
    """Return the whole report as one HTML document.

    ``plotly_js``: ``inline`` (Plotly's JavaScript in the page, once: it opens offline),
    ``cdn`` (loaded from Plotly's CDN: a small page that needs the network), or the path of a
    script file relative to the page (pages that share one copy).
    """
    parts = [f"<h1>{html.escape(title)}</h1>"]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f'<p class="meta">powerkit {__version__}, written {stamp}</p>')
    first = True
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        if section.intro:
            parts.append(f"<p>{html.escape(section.intro)}</p>")
        for header, rows in section.tables:
            parts.append(_table(header, rows))
        for fig in section.figures:
            include: bool | str = first if plotly_js == "inline" else False
            if plotly_js == "cdn" and first:
                include = "cdn"
            div = pio.to_html(
                fig.figure, full_html=False, include_plotlyjs=include, config={"displaylogo": False}
            )
            first = False
            parts.append(
                f"<figure>{div}<figcaption>{html.escape(fig.caption)}</figcaption></figure>"
            )
    body = "\n".join(parts)
    script = (
        ""
        if plotly_js in ("inline", "cdn")
        else f'<script src="{html.escape(plotly_js)}" charset="utf-8"></script>'
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title><style>{_STYLE}</style>{script}</head><body>\n{body}\n</body></html>\n"
    )


def write_page(path: Path, title: str, sections: list[Section], plotly_js: str = "inline") -> Path:
    """Write the report atomically and return its path.

    ``plotly_js`` as for :func:`render_page`, or ``FILE``: a path for Plotly's JavaScript
    (written there once, unless it already holds this Plotly version), referenced from the page
    relative to it, so that several pages share one copy.
    """
    path = Path(path)
    reference = plotly_js
    if plotly_js not in ("inline", "cdn"):
        script = Path(plotly_js)
        if not script.is_absolute():
            script = Path.cwd() / script
        bundle = pio_js()
        if not script.exists() or script.read_text(errors="replace") != bundle:
            write_text(script, bundle)
        reference = os.path.relpath(script.resolve(), path.resolve().parent)
    return write_text(path, render_page(title, sections, reference))


def pio_js() -> str:
    """Return Plotly's JavaScript bundle (the one ``inline`` pages embed)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()
