"""Gap fill on the grid (``--fill``) and the coverage every result reports.

Definitions (../shared/DESIGN.md, "Gap fill" and "Coverage"): ``none`` leaves missing cells
missing; ``hold:D`` gives a run of missing cells no longer than D the value of the last present
cell before it; ``linear:D`` interpolates the run between the present cells on both sides.
Longer runs stay missing; nothing is filled before a series' first or after its last cell.
Coverage of a series is its present cells over the cells from its first to its last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerkit.core.errors import BadInputError, option
from powerkit.core.units import format_duration, parse_duration

__all__ = [
    "FILL_KINDS",
    "NO_FILL",
    "FillPolicy",
    "SeriesCoverage",
    "coverage_warning",
    "fill_cells",
    "fill_hint",
    "parse_fill",
]

FILL_KINDS = ("none", "hold", "linear")
# Below this share of present cells a result rests on too little to be taken at face value.
LOW_COVERAGE = 0.5


@dataclass(frozen=True)
class FillPolicy:
    """How missing grid cells are filled: kind (none, hold, linear) and the longest run (s)."""

    kind: str = "none"
    max_gap_s: float = 0.0

    def __str__(self) -> str:
        return "none" if self.kind == "none" else f"{self.kind}:{format_duration(self.max_gap_s)}"

    def max_cells(self, grid_s: float) -> int:
        """Return the longest run of missing cells this policy fills on a ``grid_s`` grid."""
        return 0 if self.kind == "none" else int(np.floor(self.max_gap_s / grid_s + 1e-9))


NO_FILL = FillPolicy()


def parse_fill(text: str | None) -> FillPolicy:
    """Return ``--fill none|hold:DUR|linear:DUR`` as a FillPolicy."""
    if text is None or text.strip() == "none":
        return NO_FILL
    kind, sep, duration = text.strip().partition(":")
    if kind not in FILL_KINDS or kind == "none" or not sep:
        raise BadInputError(
            f"{option('fill')} {text!r}: none, hold:DUR or linear:DUR (e.g. hold:10s)"
        )
    return FillPolicy(kind, parse_duration(duration))


def fill_cells(
    values: np.ndarray, present: np.ndarray, policy: FillPolicy, grid_s: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """Return (values, present, cells filled) of one series after ``policy``.

    ``values`` holds 0 where a cell is missing. Runs of at most ``policy.max_cells(grid_s)``
    missing cells with a present cell on both sides are filled; the inputs are not modified.
    """
    limit = policy.max_cells(grid_s)
    if limit == 0 or present.all():
        return values, present, 0
    # Runs of missing cells from the edges of the present mask: a few passes over bytes, then
    # work in proportion to the gaps (a long series with few gaps costs little).
    edge = np.diff(present.view(np.int8))
    starts = np.flatnonzero(edge == -1) + 1  # first missing cell of a run
    ends = np.flatnonzero(edge == 1) + 1  # first present cell after a run
    if not present[0]:
        ends = ends[1:]  # a run before the first present cell is never filled
    if not present[-1]:
        starts = starts[:-1]  # nor one after the last
    lengths = ends - starts
    keep = lengths <= limit
    if not keep.any():
        return values, present, 0
    starts, ends, lengths = starts[keep], ends[keep], lengths[keep]
    total = int(lengths.sum())
    # Every cell of every kept run: run start + 0, 1, ... (lengths - 1).
    offsets = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    at = np.repeat(starts, lengths) + offsets
    before = values[starts - 1]
    out = values.copy()
    if policy.kind == "hold":
        out[at] = np.repeat(before, lengths)
    else:
        share = (offsets + 1) / np.repeat(lengths + 1, lengths)
        out[at] = np.repeat(before, lengths) + np.repeat(values[ends] - before, lengths) * share
    mask = present.copy()
    mask[at] = True
    return out, mask, total


@dataclass
class SeriesCoverage:
    """How much of one series' grid a result rests on (after fill)."""

    host: str
    gpu: int
    cells: int  # from the series' first to its last cell
    present: int  # cells holding a sample or a filled value
    filled: int  # of which filled by --fill
    coverage: float  # present / cells
    member: str | None = None  # the trace a fleet member came from


def coverage_warning(
    series: list[SeriesCoverage],
    coverage: float | None,
    empty_windows: list[str],
    policy: FillPolicy,
    too_long: list[str] | None = None,
) -> str | None:
    """Return the one warning line a result owes its user, or None when nothing is amiss.

    It is owed when a requested window has no complete position or the coverage is under
    50 %; it names the series with the most missing cells and suggests ``--fill``.
    """
    low = coverage is not None and coverage < LOW_COVERAGE
    too_long = too_long or []
    if too_long and set(empty_windows) <= set(too_long) and not low:
        longest = max((s.cells for s in series), default=0)
        return (
            f"the trace is shorter than the window(s) {', '.join(too_long)} (its longest "
            f"series spans {longest:,} cell(s)): no position fits, and no {option('fill')} can add "
            "one; use shorter windows"
        )
    empty_windows = [w for w in empty_windows if w not in too_long]
    if not empty_windows and not low:
        return None
    parts = []
    if empty_windows:
        parts.append(f"no complete position at {', '.join(empty_windows)}")
    if coverage is not None:
        parts.append(f"coverage {100 * coverage:.1f} %")
    text = "; ".join(parts)
    if series:
        worst = max(series, key=lambda s: s.cells - s.present)
        where = f"{worst.member}: " if worst.member else ""
        text += (
            f"; most missing cells: {where}host={worst.host} gpu={worst.gpu} "
            f"({worst.cells - worst.present:,} of {worst.cells:,}, "
            f"{100 * (1 - worst.coverage):.1f} %)"
        )
    return f"{text}; {fill_hint(policy)}"


def fill_hint(policy: FillPolicy) -> str:
    """What a warning about missing cells suggests: a fill, or that this one is not enough."""
    return (
        f"try {option('fill')} hold:10s"
        if policy.kind == "none"
        else f"{option('fill')} {policy} is not enough"
    )
