"""The report's windowed-violations section, from ``powerkit windows --json``."""

from __future__ import annotations

from powerkit.analysis.windows import WindowsReport
from powerkit.core.units import format_value
from powerkit.report.page import Section

__all__ = ["windows_section"]


def windows_section(report: WindowsReport) -> Section:
    """Return the section: violations per window length against the budget."""
    budget = report.budget_w
    rows = [
        [
            w.window,
            f"{w.violations:,} / {w.positions:,}",
            format_value(None if w.violation_rate is None else 100 * w.violation_rate, ".3f") + "%",
            format_value(w.max_mean_w, ".1f"),
            format_value(w.excess_energy_j / 1e3, ".2f"),
            format_value(w.longest_violation_s, ".1f"),
        ]
        for w in report.windows
    ]
    header = ["window", "violations", "rate", "max mean W", "excess kJ", "longest s"]
    return Section(
        title=f"Windows: budget {budget:g} W ({report.mode}, per {report.scope})",
        intro=(
            f"How often the mean power of {report.trace or 'the trace'} over each window "
            f"length exceeds the budget (fill {report.fill}, coverage "
            f"{format_value(report.coverage, '.1%')}); a trace given with it is drawn with the "
            "budget, the times over it shaded."
        ),
        tables=[(header, rows)],
    )
