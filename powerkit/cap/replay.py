"""A fleet's measured power replayed under a limit (``powerkit cap``).

Definitions (docs/cap.md): the members are oversub's (each GPU series of each trace, on the
grid, composed); every ``period`` a policy sees each GPU's demand (its uncapped power in that
cell) and, when the fleet's demand is over the limit, sets caps (else releases them); a
decision takes effect ``latency`` later and holds until the next one does. A capped GPU
draws min(its power, its cap); while a cap is set it keeps the share of its job's throughput
its cap curve gives at that cap (powerkit.cap.response), whether or not the cap binds at that
moment (the curve was measured with the cap held, peaks and troughs alike). A cell over the
limit is one whose fleet power (capped) exceeds it; a cap event is a run of cells with some
cap in effect.

Memory holds a block of cells of every member, never the fleet's whole horizon.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from powerkit.analysis.fleet import FleetMembers
from powerkit.cap.events import Event, EventResult, event_limits, event_result
from powerkit.cap.policies import POLICIES, Fleet
from powerkit.cap.response import Response
from powerkit.documents import Document
from powerkit.errors import BadInputError
from powerkit.tables import Column
from powerkit.units import format_duration

__all__ = ["CAP_COLUMNS", "CapReport", "CapRun", "JobCost", "replay"]

#: cells of every member held at once (a block), whatever the horizon
BLOCK_CELLS = 4096


@dataclass(frozen=True)
class JobCost:
    """What capping cost one job: its GPUs, the share of their time under a cap, and the
    share of their reference throughput lost (None: the job has no cap curve)."""

    job: str
    gpus: int
    capped_share: float
    lost_share: float | None
    lost_gpu_hours: float | None  # GPU-hours of work at the job's reference speed


@dataclass(frozen=True)
class CapRun:
    """One policy under one limit."""

    policy: str
    limit_w: float
    ratio: float | None  # --ratios: the fleet's nameplate ÷ the limit
    capped_share: float  # cells with some cap in effect ÷ cells
    cap_events: int
    longest_event_s: float
    p95_event_s: float | None
    over_limit_share: float  # cells over the limit ÷ cells
    over_limit_energy_j: float  # energy above the limit (capped fleet)
    over_limit_peak_w: float  # the largest excess over the limit
    energy_j: float  # the capped fleet's
    uncapped_energy_j: float
    lost_share: float | None  # over the GPUs whose jobs have curves, time-weighted
    lost_gpu_hours: float | None
    jobs: list[JobCost] = field(default_factory=list)
    events: list[EventResult] = field(default_factory=list)


#: the table of ``powerkit cap``, a row per (limit, policy)
CAP_COLUMNS = (
    Column("limit", lambda r: f"{r.limit_w / 1e3:,.1f} kW", key=True),
    Column("ratio", "ratio", ".2f"),
    Column("policy", "policy", text=True),
    Column("capped", "capped_share", ".1%"),
    Column("events", "cap_events", ","),
    Column("longest s", "longest_event_s", ",.1f"),
    Column("over", "over_limit_share", ".2%"),
    Column("over kJ", "over_limit_energy_j", ",.1f", scale=1e-3),
    Column("peak over W", "over_limit_peak_w", ",.0f"),
    Column("lost", "lost_share", ".2%"),
    Column("lost GPU-h", "lost_gpu_hours", ",.2f"),
)


@dataclass(frozen=True)
class CapReport(Document):
    """What ``powerkit cap`` reports: the fleet, how it was replayed, a run per limit and
    policy."""

    COMMAND: ClassVar[str] = "cap"

    gpus: int
    fleet_nameplate_w: float
    grid_s: float
    horizon_s: float
    period_s: float
    latency_s: float
    compose: str
    members: list[dict[str, Any]]
    assigned: dict[str, str]  # member (trace) -> job
    runs: list[CapRun]
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """The fleet and how it was replayed, in a line."""
        return (
            f"fleet: {self.gpus} GPUs, {self.fleet_nameplate_w / 1e3:,.1f} kW nameplate, "
            f"{self.compose}, {self.horizon_s / 3600:.2f} h on a {format_duration(self.grid_s)} "
            f"grid; decisions every {format_duration(self.period_s)}, acting after "
            f"{format_duration(self.latency_s)}"
        )


def replay(
    fleet: FleetMembers,
    offsets: np.ndarray,
    limit_w: float,
    policy: str,
    responses: Sequence[Response | None],
    jobs: Sequence[str | None],
    *,
    period_s: float,
    latency_s: float = 0.0,
    ratio: float | None = None,
    classes: Sequence[int] | None = None,
    events: Sequence[Event] = (),
    on_block: Callable[[], None] | None = None,
) -> CapRun:
    """Replay ``fleet`` (composed with ``offsets``) under ``limit_w`` with ``policy``; each
    member's job is ``jobs[i]`` with response ``responses[i]`` (None: no curve)."""
    if policy not in POLICIES:
        raise BadInputError(f"--policy {policy!r}: one of {', '.join(POLICIES)}")
    if not limit_w > 0 or not math.isfinite(limit_w):
        raise BadInputError(f"the limit must be a positive power (got {limit_w!r} W)")
    grid = fleet.grid_s
    period = max(1, round(period_s / grid))
    if abs(period * grid - period_s) > 1e-9 * max(1.0, period_s) or period_s < grid:
        raise BadInputError(
            f"--period {format_duration(period_s)} is not a whole number of "
            f"{format_duration(grid)} cells"
        )
    latency = round(latency_s / grid)
    if abs(latency * grid - latency_s) > 1e-9 * max(1.0, latency_s) or latency_s < 0:
        raise BadInputError(
            f"--latency {format_duration(latency_s)} is not a whole number of "
            f"{format_duration(grid)} cells (give --grid to refine the cells)"
        )
    decide = POLICIES[policy]
    n = len(fleet.members)
    floors = np.array([0.0 if r is None else r.floor_w for r in responses])
    klass = np.asarray(classes if classes is not None else [0] * len(responses), dtype=int)
    known = Fleet(responses, floors, klass)
    limits = np.full(fleet.horizon, limit_w)
    windows: list[tuple[int, int, float, float]] = []
    demand = capped = lost_by_class = None
    if events:  # a pass for the uncapped fleet: each event's baseline is its window's mean
        demand = _demand(fleet, offsets)
        limits, windows = event_limits(list(events), demand, limit_w, grid)
        capped = np.zeros(fleet.horizon)
        lost_by_class = np.zeros((int(klass.max()) + 1, fleet.horizon))
    horizon = fleet.horizon
    caps = np.full(n, np.inf)  # in effect now
    pending: list[tuple[int, np.ndarray]] = []  # (cell it takes effect, caps)
    lost = np.zeros(n)  # seconds of reference throughput lost, per member
    capped_s = np.zeros(n)
    energy = uncapped = over_energy = 0.0
    over_peak = 0.0
    over_cells = capped_cells = 0
    runs: list[int] = []  # each cap event's length (cells)
    run = 0  # the cap event going on (cells)
    keep = np.ones(n)  # the throughput share each member keeps under ``caps``

    def kept(new: np.ndarray) -> np.ndarray:
        out = np.ones(n)
        for r, idx in known.by_response():
            if r is None:
                continue
            on = idx[np.isfinite(new[idx])]
            if on.size:
                out[on] = r.rate(new[on])
        return out

    stateless = policy in (
        "none",
        "uniform",
        "pfi",
        "priority",
    )  # (no state: skip a decision not needed)
    block = max(period, (BLOCK_CELLS // period) * period)
    for start in range(0, horizon, block):
        stop = min(horizon, start + block)
        power, missing = fleet.block(offsets, start, stop)
        power[missing] = 0.0
        demand_sum = power.sum(axis=0)
        uncapped += float(demand_sum.sum()) * grid
        for t in range(start - start % period + (period if start % period else 0), stop, period):
            if stateless and demand_sum[t - start] <= limits[t] and not np.isfinite(caps).any() \
                    and not pending:  # fmt: skip
                continue  # (under the limit with no caps: the decision is "none")
            pending.append((t + latency, decide(power[:, t - start], float(limits[t]), known)))
        # the cells from here to the block's end, in runs of one set of caps
        a = start
        while a < stop:
            while pending and pending[0][0] <= a:
                caps = pending.pop(0)[1]
                keep = kept(caps)
            b = stop if not pending else min(stop, max(a + 1, pending[0][0]))
            cells = b - a
            part = power[:, a - start : b - start]
            on = np.isfinite(caps)
            fleet_w = np.minimum(part, caps[:, None]).sum(axis=0) if on.any() else part.sum(axis=0)
            energy += float(fleet_w.sum()) * grid
            if capped is not None:
                capped[a:b] = fleet_w
            excess = fleet_w - limits[a:b]
            over = excess > 1e-9 * limits[a:b]
            if over.any():
                over_cells += int(over.sum())
                over_energy += float(excess[over].sum()) * grid
                over_peak = max(over_peak, float(excess[over].max()))
            if on.any():
                capped_cells += cells
                run += cells
                lost += (1.0 - keep) * grid * cells
                capped_s[on] += grid * cells
                if lost_by_class is not None:
                    per_cell = np.bincount(klass, (1.0 - keep) * grid, lost_by_class.shape[0])
                    lost_by_class[:, a:b] = per_cell[:, None]
            elif run:
                runs.append(run)
                run = 0
            a = b
        if on_block is not None:
            on_block()
    if run:
        runs.append(run)
    lengths = np.array(runs, dtype=float) * grid
    known_i = [i for i, r in enumerate(responses) if r is not None]
    span = horizon * grid
    return CapRun(
        policy=policy, limit_w=limit_w, ratio=ratio,
        capped_share=capped_cells / horizon, cap_events=len(runs),
        longest_event_s=float(lengths.max()) if lengths.size else 0.0,
        p95_event_s=float(np.quantile(lengths, 0.95)) if lengths.size else None,
        over_limit_share=over_cells / horizon, over_limit_energy_j=over_energy,
        over_limit_peak_w=over_peak, energy_j=energy, uncapped_energy_j=uncapped,
        lost_share=float(lost[known_i].sum() / (span * len(known_i))) if known_i else None,
        lost_gpu_hours=float(lost[known_i].sum() / 3600) if known_i else None,
        jobs=_job_costs(jobs, responses, lost, capped_s, span),
        events=[] if capped is None or demand is None or lost_by_class is None else [
            event_result(e, w, capped, demand, lost_by_class, grid, period)
            for e, w in zip(events, windows, strict=True)],
    )  # fmt: skip


def _demand(fleet: FleetMembers, offsets: np.ndarray) -> np.ndarray:
    """The uncapped fleet's power per cell (a member missing in a cell draws nothing)."""
    out = np.zeros(fleet.horizon)
    for start in range(0, fleet.horizon, BLOCK_CELLS):
        stop = min(fleet.horizon, start + BLOCK_CELLS)
        power, missing = fleet.block(offsets, start, stop)
        power[missing] = 0.0
        out[start:stop] = power.sum(axis=0)
    return out


def _job_costs(jobs: Sequence[str | None], responses: Sequence[Response | None],
               lost: np.ndarray, capped_s: np.ndarray, span: float) -> list[JobCost]:  # fmt: skip
    out = []
    names = sorted({j or "(no job)" for j in jobs})
    for name in names:
        idx = [i for i, j in enumerate(jobs) if (j or "(no job)") == name]
        has_curve = all(responses[i] is not None for i in idx)
        total = float(lost[idx].sum())
        out.append(JobCost(
            job=name, gpus=len(idx), capped_share=float(capped_s[idx].sum() / (span * len(idx))),
            lost_share=total / (span * len(idx)) if has_curve else None,
            lost_gpu_hours=total / 3600 if has_curve else None,
        ))  # fmt: skip
    return out
