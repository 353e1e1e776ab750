"""Fleet composition and safe oversubscription (``powerkit oversub``).

Definitions (docs/oversub.md): each GPU series of each trace is a member (``path:count``
repeats a trace's members); members go on the grid relative to their own first cell and are
cut to the shortest member (the fleet horizon); composition shifts each member circularly
(aligned: no shift; random: uniform offsets, per draw; staggered: evenly spread); fleet power
is the sum of members per cell (present where every member is); the peak at a window is the
largest complete rolling mean; peak fraction = peak / (sum of members' nameplates); safe
oversubscription = 1 / (peak fraction x (1 + margin)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from powerkit.analysis.fill import NO_FILL, FillPolicy, SeriesCoverage, coverage_warning
from powerkit.analysis.grid import series_cells
from powerkit.analysis.rolling import PrefixSums, exceeds, rolling
from powerkit.analysis.windows import check_grid, window_cells
from powerkit.errors import BadInputError
from powerkit.trace.model import Trace
from powerkit.trace.semantics import averaging_s, averaging_warning, resolved_semantics
from powerkit.units import PowerSpec, format_duration

__all__ = ["COMPOSE", "FleetReport", "FleetTimeline", "FleetWindow", "compose_fleet"]

COMPOSE = ("aligned", "random", "staggered")


@dataclass
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


@dataclass
class FleetReport:
    """What ``powerkit oversub`` reports."""

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
    members: list[dict[str, object]] = field(default_factory=list)
    windows: list[FleetWindow] = field(default_factory=list)
    fill: str = "none"
    #: horizon cells where every member is present (after fill) / horizon cells, mean over draws
    coverage: float | None = None
    member_coverage: list[SeriesCoverage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class FleetTimeline:
    """One composed fleet (the first draw), for figures: power per cell and present cells."""

    grid_s: float
    power_w: np.ndarray
    present: np.ndarray


@dataclass
class _Member:
    values: np.ndarray  # float32 cell means from the member's first cell; 0 where missing
    missing: np.ndarray | None  # bool, None when no cell is missing
    nameplate_w: float


def _members(
    traces: list[tuple[Trace, int]], grid_s: float, nameplate_w: float | None, fill: FillPolicy
) -> tuple[list[_Member], list[dict[str, object]], list[SeriesCoverage]]:
    members: list[_Member] = []
    described: list[dict[str, object]] = []
    coverage: list[SeriesCoverage] = []
    for trace, count in traces:
        if count < 1:
            raise BadInputError(f"{trace.origin}: a member count must be at least 1")
        own: list[_Member] = []
        for s in series_cells(trace, grid_s, fill):
            check_grid(s, grid_s)
            coverage.append(s.coverage(trace.origin))
            plate = nameplate_w or trace.meta.nameplate_w(s.host, s.gpu) or trace.meta.nameplate_w()
            if plate is None:
                raise BadInputError(
                    f"{trace.origin}: nameplate of host={s.host} gpu={s.gpu} is unknown "
                    "(give --nameplate)"
                )
            missing = None if s.present.all() else ~s.present
            own.append(_Member(s.values.astype(np.float32), missing, plate))
        members.extend(own * count)
        described.append({"path": trace.origin, "count": count, "gpus": len(own),
                          "power_semantics": resolved_semantics(trace.meta)})  # fmt: skip
    if not members:
        raise BadInputError("no members: give at least one trace")
    return members, described, coverage


def _offsets(compose: str, members: int, horizon: int, rng: np.random.Generator) -> np.ndarray:
    if compose == "aligned":
        return np.zeros(members, dtype=np.int64)
    if compose == "staggered":
        return (np.arange(members) * horizon) // members
    return rng.integers(0, horizon, members)


def _compose(members: list[_Member], offsets: np.ndarray,
             horizon: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Return (fleet power per cell, present mask) for members shifted circularly."""
    power = np.zeros(horizon)
    missing = np.zeros(horizon, dtype=np.int32)
    for m, o in zip(members, offsets.tolist(), strict=True):
        v = m.values[:horizon]
        power[o:] += v[: horizon - o]
        power[:o] += v[horizon - o :]
        if m.missing is not None:
            gone = m.missing[:horizon]
            missing[o:] += gone[: horizon - o]
            missing[:o] += gone[horizon - o :]
    present = missing == 0
    # A cell where a member is missing holds only part of the fleet: it is missing as a whole,
    # and its partial sum must not reach the window sums (which add every cell's value).
    power[~present] = 0.0
    return power, present


def compose_fleet(
    traces: list[tuple[Trace, int]],
    windows_s: list[float],
    *,
    compose: str = "aligned",
    draws: int = 200,
    seed: int = 0,
    nameplate_w: float | None = None,
    capacity: PowerSpec | None = None,
    margin: float = 0.0,
    grid_s: float = 0.5,
    fill: FillPolicy = NO_FILL,
    on_draw: Callable[[], None] | None = None,
) -> tuple[FleetReport, FleetTimeline]:
    """Return the fleet's peaks per window, and the first composed fleet for figures.

    ``fill`` fills each member's gaps on the grid before the fleet is summed; the report
    carries the coverage (fleet cells and window positions) its peaks rest on.
    """
    if compose not in COMPOSE:
        raise BadInputError(f"--compose {compose!r}: one of {', '.join(COMPOSE)}")
    if draws < 1:
        raise BadInputError("--draws must be at least 1")
    if margin < 0:
        raise BadInputError("--margin must not be negative")
    cells = window_cells(windows_s, grid_s)
    members, described, member_coverage = _members(traces, grid_s, nameplate_w, fill)
    horizon = min(m.values.size for m in members)
    fleet_nameplate = float(sum(m.nameplate_w for m in members))
    capacity_w = capacity.resolve(fleet_nameplate) if capacity is not None else None
    n_draws = draws if compose == "random" else 1
    rng = np.random.default_rng(seed)
    peaks = np.full((n_draws, len(cells)), np.nan)
    rates = np.full((n_draws, len(cells)), np.nan)
    complete = np.zeros((n_draws, len(cells)))
    fleet_present = np.zeros(n_draws)
    timeline: FleetTimeline | None = None
    for d in range(n_draws):
        if on_draw is not None:
            on_draw()
        power, present = _compose(members, _offsets(compose, len(members), horizon, rng), horizon)
        if timeline is None:
            timeline = FleetTimeline(grid_s, power, present)
        fleet_present[d] = np.count_nonzero(present) / horizon
        prefix = PrefixSums(power, present)
        for j, n in enumerate(cells):
            pos = rolling(prefix, n, grid_s)
            means = pos.means if pos.all_complete else pos.means[pos.complete]
            complete[d, j] = means.size / pos.means.size if pos.means.size else np.nan
            if means.size:
                peaks[d, j] = means.max()
                if capacity_w is not None:
                    rates[d, j] = np.count_nonzero(exceeds(means, capacity_w)) / means.size
    assert timeline is not None
    plates = {m.nameplate_w for m in members}
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
        fill=str(fill),
        coverage=float(fleet_present.mean()),
        member_coverage=member_coverage,
    )
    for j, (w, n) in enumerate(zip(windows_s, cells, strict=True)):
        window = _window(w, n, peaks[:, j], rates[:, j], fleet_nameplate, margin, compose,
                         capacity_w)  # fmt: skip
        shares = complete[:, j][~np.isnan(complete[:, j])]
        window.coverage = float(shares.mean()) if shares.size else None
        report.windows.append(window)
    empty = [w.window for w in report.windows if w.peak_w is None]
    averaged = [m for m in described if averaging_s(str(m["power_semantics"])) is not None]
    lines = [
        averaging_warning(
            str(averaged[0]["power_semantics"]),
            windows_s,
            f"{len(averaged)} of {len(described)} trace(s) ("
            + ", ".join(Path(str(m["path"])).name for m in averaged)
            + ")",
        )
        if averaged
        else None,
        coverage_warning(member_coverage, report.coverage, empty, fill),
    ]
    report.warnings = [line for line in lines if line]
    return report, timeline


def _window(w: float, n: int, peaks: np.ndarray, rates: np.ndarray, nameplate: float,
            margin: float, compose: str, capacity_w: float | None) -> FleetWindow:  # fmt: skip
    ok = peaks[~np.isnan(peaks)]
    if ok.size == 0:  # the window is longer than the fleet horizon (or no complete position)
        return FleetWindow(format_duration(w), w, n, None, None, None, None, None, None)
    fractions = ok / nameplate
    p50, p95, top = (float(x) for x in np.quantile(fractions, [0.5, 0.95, 1.0]))
    headline = p95 if compose == "random" else float(fractions[0])
    window = FleetWindow(
        window=format_duration(w),
        window_s=w,
        cells=n,
        peak_w=headline * nameplate,
        peak_fraction=headline,
        safe_oversubscription=1.0 / (headline * (1.0 + margin)) if headline > 0 else None,
        peak_fraction_p50=p50,
        peak_fraction_p95=p95,
        peak_fraction_max=top,
    )
    if capacity_w is not None:
        r = rates[~np.isnan(rates)]
        window.capacity_violation_rate = float(r.mean())
        window.capacity_violation_rate_p95 = float(np.quantile(r, 0.95))
    return window
