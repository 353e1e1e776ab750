"""Self-contained HTML reports: Plotly figures (inlined) with a caption each."""

from powerkit.report.page import Section, render_page, write_page

__all__ = ["Section", "render_page", "write_page"]
