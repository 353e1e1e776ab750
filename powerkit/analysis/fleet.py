"""Fleet composition and safe oversubscription (``powerkit oversub``).

Definitions (docs/oversub.md): each GPU series of each trace is a member (``path:count``
repeats a trace's members); members go on the grid relative to their own first cell and are
cut to the shortest member (the fleet horizon); composition shifts each member circularly
(aligned: no shift; random: uniform offsets, per draw; staggered: evenly spread); fleet power
is the sum of members per cell (present where every member is); the peak at a window is the
largest complete rolling mean; peak fraction = peak / (sum of members' nameplates); safe
oversubscription = 1 / (peak fraction x (1 + margin)).

Memory is bounded: members' cells go to a spool file as their series stream past, and draws
are composed in batches that fit ``COMPOSE_MEMORY_BYTES``, each member read once per batch —
memory grows with the horizon and the batch, not with the members or the draws.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from powerkit.analysis.members import (
    COMPOSE,
    FleetMember,
    FleetMembers,
    Member,
    Spool,
    compose_offsets,
)
from powerkit.analysis.windows import window_cells
from powerkit.cells.fill import (
    LOW_COVERAGE,
    NO_FILL,
    FillPolicy,
    SeriesCoverage,
    coverage_warning,
    fill_hint,
)
from powerkit.cells.grid import default_grid_s, default_windows_s
from powerkit.cells.rolling import PrefixSums, exceeds, rolling
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.tables import Column
from powerkit.core.units import PowerSpec, format_duration
from powerkit.engine import LOCAL, Engine
from powerkit.trace.model import Trace
from powerkit.trace.semantics import averaging_s, averaging_warning

__all__ = [
    "CAPACITY_COLUMN",
    "FLEET_COLUMNS",
    "FleetReport",
    "FleetTimeline",
    "FleetWindow",
    "compose_fleet",
]


@dataclass(frozen=True)
class FleetWindow:
    """The fleet's peak at one window length (random: over draws)."""

    window: str
    window_s: float
    cells: int
    peak_w: float | None  # the headline peak: p95 over draws for random, else the one draw
    peak_fraction: float | None
    safe_oversubscription: float | None
    peak_fraction_p50: float | None
    peak_fraction_p95: float | None
    peak_fraction_max: float | None
    capacity_violation_rate: float | None = None  # mean over draws
    capacity_violation_rate_p95: float | None = None
    coverage: float | None = None  # complete positions / positions, mean over draws


#: the table of ``powerkit oversub``, a row per window (``over cap.``: with ``--capacity``)
FLEET_COLUMNS = (
    Column("window", "window", key=True),
    Column("peak W", "peak_w", ",.0f"),
    Column("peak", "peak_fraction", ".1%"),
    Column("p50", "peak_fraction_p50", ".1%"),
    Column("p95", "peak_fraction_p95", ".1%"),
    Column("max", "peak_fraction_max", ".1%"),
    Column("safe x", "safe_oversubscription", ".2f"),
    Column("cover", "coverage", ".1%"),
)
CAPACITY_COLUMN = Column("over cap.", "capacity_violation_rate", ".2%")


@dataclass(frozen=True)
class FleetReport(Document):
    """What ``powerkit oversub`` reports."""

    COMMAND: ClassVar[str] = "oversub"

    gpus: int
    nameplate_w: float | None  # per GPU, when all members share one
    fleet_nameplate_w: float
    compose: str
    draws: int
    seed: int
    grid_s: float
    horizon_s: float
    margin: float
    capacity_w: float | None
    mean_fraction: float | None = None  # mean fleet power / fleet nameplate (for energy)
    members: list[FleetMember] = field(default_factory=list)
    windows: list[FleetWindow] = field(default_factory=list)
    fill: str = "none"
    #: horizon cells where every member is present (after fill) / horizon cells, mean over draws
    coverage: float | None = None
    member_coverage: list[SeriesCoverage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def check(self) -> None:
        """Every figure a reader (econ, pilot, report) uses finite and in range, and the
        windows there: one check, so that no reader renders what another refuses."""

        def number(value: float | None, name: str, lo: float, hi: float) -> None:
            if value is not None and not lo <= value <= hi:
                raise BadInputError(f"{name} must be a number from {lo:g} to {hi:g} ({value!r})")

        if self.gpus < 1:
            raise BadInputError(f"gpus must be a whole number of at least 1 ({self.gpus!r})")
        number(self.fleet_nameplate_w, "fleet_nameplate_w", 1e-9, 1e12)
        number(self.margin, "margin", 0.0, 1.0)
        number(self.mean_fraction, "mean_fraction", 0.0, 10.0)
        if not self.windows:
            raise BadInputError("windows must be a list of windows")
        for k, w in enumerate(self.windows):
            where = f"windows[{k}]"
            number(w.window_s, f"{where}.window_s", 1e-6, 1e9)
            for key in (
                "peak_fraction",
                "peak_fraction_p50",
                "peak_fraction_p95",
                "peak_fraction_max",
            ):
                number(getattr(w, key), f"{where}.{key}", 1e-12, 10.0)
            number(w.peak_w, f"{where}.peak_w", 0.0, 1e12)
            for key in ("capacity_violation_rate", "capacity_violation_rate_p95", "coverage"):
                number(getattr(w, key), f"{where}.{key}", 0.0, 1.0)

    def at(self, window_s: float) -> FleetWindow:
        """The window of length ``window_s``, with a peak; one line naming the windows that
        have one otherwise."""
        match = next((w for w in self.windows if abs(w.window_s - window_s) < 1e-9), None)
        if match is None:
            have = ", ".join(w.window for w in self.windows)
            raise BadInputError(
                f"window {window_s:g} s is not in the oversub result (it has {have})"
            )
        if match.peak_fraction is None:
            empty = [w.window for w in self.windows if w.peak_fraction is None]
            full = [w.window for w in self.windows if w.peak_fraction is not None]
            have = (
                f"windows with a peak: {', '.join(full)} (choose one with {option('window')})"
                if full
                else ("no window has a peak")
            )
            raise BadInputError(
                f"the oversub result has no complete position at {', '.join(empty)}, so no "
                f"peak there; {have}; or rerun oversub with {option('fill')} (e.g. hold:10s)"
            )
        return match


@dataclass
class FleetTimeline:
    """One composed fleet (the first draw), for figures: power per cell and present cells."""

    grid_s: float
    power_w: np.ndarray
    present: np.ndarray


def _compose(
    members: list[Member], spool: Spool, offsets: np.ndarray, horizon: int
) -> tuple[np.ndarray, np.ndarray]:
    """Fleet power per cell and present cells, one row per draw (``offsets``: draws x
    members), members shifted circularly; each member is read once for all the draws."""
    draws = offsets.shape[0]
    power = np.zeros((draws, horizon))
    missing = np.zeros((draws, horizon), dtype=bool)
    for i, m in enumerate(members):
        values, gone = spool.read(m.row, horizon, m.has_missing)
        for d in range(draws):
            o = int(offsets[d, i])
            power[d, o:] += values[: horizon - o]
            power[d, :o] += values[horizon - o :]
            if gone is not None:
                missing[d, o:] |= gone[: horizon - o]
                missing[d, :o] |= gone[horizon - o :]
    # A cell where a member is missing holds only part of the fleet: it is missing as a whole,
    # and its partial sum must not reach the window sums (which add every cell's value).
    power[missing] = 0.0
    return power, ~missing


def compose_fleet(
    traces: list[tuple[Trace, int]],
    windows_s: list[float] | None = None,
    *,
    compose: str = "aligned",
    draws: int = 200,
    seed: int = 0,
    nameplate_w: float | None = None,
    capacity: PowerSpec | None = None,
    margin: float = 0.0,
    grid_s: float | None = None,
    fill: FillPolicy = NO_FILL,
    on_draw: Callable[[], None] | None = None,
    engine: Engine = LOCAL,
    nameplate_required: bool = True,
) -> tuple[FleetReport, FleetTimeline]:
    """Return the fleet's peaks per window, and the first composed fleet for figures.

    ``fill`` fills each member's gaps on the grid before the fleet is summed; the report
    carries the coverage (fleet cells and window positions) its peaks rest on.
    ``nameplate_required`` False: a member of unknown nameplate is composed anyway, its
    nameplate NaN (for a caller that uses the fleet's power and no share of nameplate). ``grid_s``
    None: the coarsest member's own (:func:`powerkit.cells.grid.default_grid_s`);
    ``windows_s`` None: the default windows on that grid.
    """
    given = grid_s is not None
    if grid_s is None:
        grid_s = default_grid_s(*(t for t, _ in traces))
    notes: list[str] = []
    if windows_s is None:
        windows_s, note = default_windows_s(grid_s, given)
        notes += [note] if note else []
    if compose not in COMPOSE:
        raise BadInputError(f"{option('compose')} {compose!r}: one of {', '.join(COMPOSE)}")
    if draws < 1:
        raise BadInputError(f"{option('draws')} must be at least 1")
    if margin < 0:
        raise BadInputError(f"{option('margin')} must not be negative")
    cells = window_cells(windows_s, grid_s)
    with FleetMembers(traces, grid_s, nameplate_w, fill, engine, nameplate_required) as fleet:
        members, spool, horizon = fleet.members, fleet.spool, fleet.horizon
        described, member_coverage = fleet.described, fleet.coverage
        fleet_nameplate = fleet.nameplate_w
        capacity_w = capacity.resolve(fleet_nameplate) if capacity is not None else None
        n_draws = draws if compose == "random" else 1
        rng = np.random.default_rng(seed)
        peaks = np.full((n_draws, len(cells)), np.nan)
        rates = np.full((n_draws, len(cells)), np.nan)
        complete = np.zeros((n_draws, len(cells)))
        fleet_present = np.zeros(n_draws)
        timeline: FleetTimeline | None = None
        batch = max(1, COMPOSE_MEMORY_BYTES // (9 * horizon))
        for first in range(0, n_draws, batch):
            count = min(batch, n_draws - first)
            offsets = np.stack(
                [compose_offsets(compose, len(members), horizon, rng) for _ in range(count)]
            )
            power, present = _compose(members, spool, offsets, horizon)
            for k in range(count):
                d = first + k
                if on_draw is not None:
                    on_draw()
                if timeline is None:
                    timeline = FleetTimeline(grid_s, power[k].copy(), present[k].copy())
                fleet_present[d] = np.count_nonzero(present[k]) / horizon
                prefix = PrefixSums(power[k], present[k])
                for j, n in enumerate(cells):
                    pos = rolling(prefix, n, grid_s)
                    means = pos.means if pos.all_complete else pos.means[pos.complete]
                    complete[d, j] = means.size / pos.means.size if pos.means.size else np.nan
                    if means.size:
                        peaks[d, j] = means.max()
                        if capacity_w is not None:
                            rates[d, j] = np.count_nonzero(exceeds(means, capacity_w)) / means.size
            del power, present
    assert timeline is not None
    plates = {m.nameplate_w for m in members}
    windows = []
    for j, (w, n) in enumerate(zip(windows_s, cells, strict=True)):
        shares = complete[:, j][~np.isnan(complete[:, j])]
        share = float(shares.mean()) if shares.size else None
        windows.append(
            _window(
                w, n, peaks[:, j], rates[:, j], fleet_nameplate, margin, compose, capacity_w, share
            )
        )
    coverage = float(fleet_present.mean())
    empty = [w.window for w in windows if w.peak_w is None]
    averaged = [m for m in described if averaging_s(m.power_semantics) is not None]
    lines = [
        averaging_warning(
            averaged[0].power_semantics,
            windows_s,
            f"{len(averaged)} of {len(described)} trace(s) ("
            + ", ".join(Path(m.path).name for m in averaged)
            + ")",
        )
        if averaged
        else None,
        coverage_warning(member_coverage, coverage, empty, fill),
        _thin_windows(windows, compose, fill),
    ]
    report = FleetReport(
        gpus=len(members),
        nameplate_w=plates.pop() if len(plates) == 1 else None,
        fleet_nameplate_w=fleet_nameplate,
        compose=compose,
        draws=n_draws,
        seed=seed,
        grid_s=grid_s,
        horizon_s=horizon * grid_s,
        margin=margin,
        capacity_w=capacity_w,
        # Circular shifts move power in time, not its total: the first draw's mean is the mean.
        mean_fraction=float(timeline.power_w[timeline.present].mean() / fleet_nameplate)
        if timeline.present.any()
        else None,
        members=described,
        windows=windows,
        fill=str(fill),
        coverage=coverage,
        member_coverage=member_coverage,
        warnings=notes + [line for line in lines if line],
    )
    return report, timeline


def _thin_windows(windows: list[FleetWindow], compose: str, fill: FillPolicy) -> str | None:
    """The warning owed when a window's peaks rest on under half of its positions (members'
    gaps that offsets line up leave most positions incomplete), even where the fleet's cells
    are mostly present."""
    thin = [
        (w.window, w.coverage)
        for w in windows
        if w.coverage is not None and 0 < w.coverage < LOW_COVERAGE
    ]
    if not thin:
        return None
    shown = ", ".join(f"{name} on {100 * share:.1f} %" for name, share in thin)
    why = " (the random offsets line up members' gaps)" if compose == "random" else ""
    return f"peaks rest on few complete positions: {shown}{why}; {fill_hint(fill)}"


def _window(
    w: float,
    n: int,
    peaks: np.ndarray,
    rates: np.ndarray,
    nameplate: float,
    margin: float,
    compose: str,
    capacity_w: float | None,
    coverage: float | None,
) -> FleetWindow:
    ok = peaks[~np.isnan(peaks)]
    if ok.size == 0:  # the window is longer than the fleet horizon (or no complete position)
        return FleetWindow(
            format_duration(w), w, n, None, None, None, None, None, None, coverage=coverage
        )
    fractions = ok / nameplate
    p50, p95, top = (float(x) for x in np.quantile(fractions, [0.5, 0.95, 1.0]))
    headline = p95 if compose == "random" else float(fractions[0])
    r = rates[~np.isnan(rates)]
    return FleetWindow(
        window=format_duration(w),
        window_s=w,
        cells=n,
        peak_w=headline * nameplate,
        peak_fraction=headline,
        safe_oversubscription=1.0 / (headline * (1.0 + margin)) if headline > 0 else None,
        peak_fraction_p50=p50,
        peak_fraction_p95=p95,
        peak_fraction_max=top,
        capacity_violation_rate=None if capacity_w is None else float(r.mean()),
        capacity_violation_rate_p95=None if capacity_w is None else float(np.quantile(r, 0.95)),
        coverage=coverage,
    )


#: memory for the composed draws held at once (fleet power and missing cells per draw); the
#: draws are composed in batches that fit, so memory does not grow with members or draws
COMPOSE_MEMORY_BYTES = 160 * 2**20
