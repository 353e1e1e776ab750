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

import numpy as np

from powerkit.analysis.members import FleetMembers
from powerkit.cap.breaker import Breaker, BreakerState
from powerkit.cap.document import CapRun, JobCost, Timeline
from powerkit.cap.events import Event, Window, event_limits, event_result
from powerkit.cap.policies import POLICIES, SLACK, STATELESS, Fleet
from powerkit.cap.response import Response
from powerkit.cap.schedule import Schedule
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import format_duration

__all__ = ["replay", "replay_all"]

#: the longest a policy's period or its latency may be (a policy that decides once a day or
#: less, or takes that long to act, caps nothing a breaker or a feed would see in time)
MAX_DECISION_S = 86_400.0
#: cells of every member held at once (a block), whatever the horizon
BLOCK_CELLS = 4096


#: the most points a run's timeline holds (its cells gathered into as many spans)
TIMELINE_POINTS = 1200


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
    breaker: Breaker | None = None,
    schedule: Schedule | None = None,
) -> CapRun:
    """Replay ``fleet`` (composed with ``offsets``) under ``limit_w`` with ``policy``; each
    member's job is ``jobs[i]`` with response ``responses[i]`` (None: no curve)."""
    (run,) = replay_all(
        fleet,
        offsets,
        [(limit_w, ratio, policy)],
        responses,
        jobs,
        period_s=period_s,
        latency_s=latency_s,
        classes=classes,
        events=events,
        breaker=breaker,
        schedule=schedule,
    )
    return run


def replay_all(
    fleet: FleetMembers,
    offsets: np.ndarray,
    runs: Sequence[tuple[float, float | None, str]],
    responses: Sequence[Response | None],
    jobs: Sequence[str | None],
    *,
    period_s: float,
    latency_s: float = 0.0,
    classes: Sequence[int] | None = None,
    events: Sequence[Event] = (),
    breaker: Breaker | None = None,
    schedule: Schedule | None = None,
    on_block: Callable[[int, int], None] | None = None,
) -> list[CapRun]:
    """Replay ``fleet`` once for every (limit W, ratio, policy) of ``runs``, reading each
    block of cells once for all of them; ``on_block(done, horizon)`` hears the cells done.
    With a ``schedule`` the limit of every cell is the schedule's (the runs' limit W is its
    highest)."""
    for _, _, policy in runs:
        if policy not in POLICIES:
            raise BadInputError(f"{option('policy')} {policy!r}: one of {', '.join(POLICIES)}")
    for limit_w, _, _ in runs:
        if not limit_w > 0 or not math.isfinite(limit_w):
            raise BadInputError(f"the limit must be a positive power (got {limit_w!r} W)")
    grid = fleet.grid_s
    for name, value in (("period", period_s), ("latency", latency_s)):
        if not (math.isfinite(value) and value <= MAX_DECISION_S):
            raise BadInputError(
                f"{option(name)} {format_duration(value) if math.isfinite(value) else value}: "
                f"at most {format_duration(MAX_DECISION_S)}"
            )
    period = max(1, round(period_s / grid))
    if abs(period * grid - period_s) > 1e-9 * max(1.0, period_s) or period_s < grid:
        raise BadInputError(
            f"{option('period')} {format_duration(period_s)} is not a whole number of "
            f"{format_duration(grid)} cells"
        )
    latency = round(latency_s / grid)
    if abs(latency * grid - latency_s) > 1e-9 * max(1.0, latency_s) or latency_s < 0:
        raise BadInputError(
            f"{option('latency')} {format_duration(latency_s)} is not a whole number of "
            f"{format_duration(grid)} cells (give {option('grid')} to refine the cells)"
        )
    klass = np.asarray(classes if classes is not None else [0] * len(responses), dtype=int)
    demand = _demand(fleet, offsets) if events else None
    base = None if schedule is None else schedule.cells(grid, fleet.horizon)
    # the uncapped fleet's breaker is the same for every policy: one per rating, fed once
    uncapped: dict[float, BreakerState] = {}
    if breaker is not None:
        for limit_w, _, _ in runs:
            rating = breaker.rating_for(limit_w if base is None else float(base.max()))
            uncapped.setdefault(rating, BreakerState(breaker, rating, grid))
    replays = [
        _Replay(
            fleet,
            limit_w,
            ratio,
            policy,
            responses,
            jobs,
            klass,
            period,
            latency,
            events,
            demand,
            breaker,
            base,
            uncapped,
        )
        for limit_w, ratio, policy in runs
    ]
    block = max(period, (BLOCK_CELLS // period) * period)
    for start in range(0, fleet.horizon, block):
        stop = min(fleet.horizon, start + block)
        power, missing = fleet.block(offsets, start, stop)
        power[missing] = 0.0
        demand_sum = power.sum(axis=0)
        for r in replays:
            r.feed(start, power, demand_sum)
        for state in uncapped.values():
            state.feed(demand_sum)
        if on_block is not None:
            on_block(stop, fleet.horizon)
    return [r.result() for r in replays]


def _pick(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``table[index]`` where the index is 0 or more, -1 where it is negative."""
    if not table.size:
        return np.full(index.shape, -1)
    return np.where(index >= 0, table[np.maximum(index, 0)], -1)


#: the most (GPUs x cells) of caps applied at once
_APPLY = 1 << 22


class _Replay:
    """One policy under one limit, fed the fleet's blocks of cells in order (module
    docstring): the decisions of a block are made together (a stateful policy walks them in
    order), and each cell takes the caps of the last decision ``latency`` or more before it."""

    def __init__(
        self,
        fleet: FleetMembers,
        limit_w: float,
        ratio: float | None,
        policy: str,
        responses: Sequence[Response | None],
        jobs: Sequence[str | None],
        klass: np.ndarray,
        period: int,
        latency: int,
        events: Sequence[Event],
        demand: np.ndarray | None,
        breaker: Breaker | None,
        base: np.ndarray | None,
        uncapped: dict[float, BreakerState],
    ) -> None:
        n = len(fleet.members)
        self.n, self.grid, self.horizon = n, fleet.grid_s, fleet.horizon
        self.policy, self.limit_w, self.ratio = policy, limit_w, ratio
        self.responses, self.jobs, self.klass = responses, jobs, klass
        self.period, self.latency = period, latency
        self.decide = POLICIES[policy]
        self.stateless = policy in STATELESS
        floors = np.array([0.0 if r is None else r.floor_w for r in responses])
        self.known = Fleet(responses, floors, klass)
        self.limits = np.full(self.horizon, limit_w) if base is None else base
        self.events, self.demand = list(events), demand
        self.windows: list[Window] = []
        self.capped: np.ndarray | None = None
        self.lost_by_class: np.ndarray | None = None
        # what a decision aims at: the limit in force when it takes effect (the feed and its
        # schedule are known ahead; an event from ``notice`` before its start)
        tail = np.full(min(latency, self.horizon), self.limits[-1])
        self.planned = np.concatenate([self.limits[latency:], tail])
        if events and demand is not None:
            self.limits, self.windows = event_limits(self.events, demand, self.limits, self.grid)
            self.capped = np.zeros(self.horizon)
            self.lost_by_class = np.zeros((int(klass.max()) + 1, self.horizon))
            for e, (first, last, _, target) in zip(self.events, self.windows, strict=True):
                made = np.arange(max(0, first - latency), max(0, last - latency))
                made = made[made >= first - round(e.notice_s / self.grid)]
                self.planned[made] = np.minimum(self.planned[made], target)
        # the decisions a cell may still need from the block before (their caps, or -1)
        self.back = latency // period + 1
        self.carry_ids = np.full(self.back, -1)
        self.carry_caps = np.empty((n, 0))
        self.lost = np.zeros(n)  # seconds of reference throughput lost, per member
        self.capped_s = np.zeros(n)
        self.energy = self.uncapped = self.over_energy = self.over_peak = 0.0
        self.over_cells = self.capped_cells = 0
        self.runs: list[int] = []  # each cap event's length (cells)
        self.run = 0  # the cap event going on (cells)
        # the breaker of the capped fleet, and the uncapped fleet's (shared, fed by replay_all)
        self.breaker: BreakerState | None = None
        self.breaker_uncapped: BreakerState | None = None
        if breaker is not None:
            rating = breaker.rating_for(limit_w if base is None else float(base.max()))
            self.breaker = BreakerState(breaker, rating, self.grid)
            self.breaker_uncapped = uncapped[rating]
        # the timeline: each cell's span, and per span the sums and extremes it reports
        self.span = max(1, -(-self.horizon // TIMELINE_POINTS))
        spans = -(-self.horizon // self.span)
        names = sorted({j for j in jobs if j is not None})
        self.job_names = names
        job_of = np.array([names.index(j) if j is not None else -1 for j in jobs])
        self.job_masks = [job_of == j for j in range(len(names))]
        self.tl_uncapped, self.tl_capped = np.zeros(spans), np.zeros(spans)
        self.tl_limit = np.full(spans, np.inf)
        self.tl_gpus, self.tl_kept = np.zeros(spans), np.zeros((len(names), spans))

    def _decisions(
        self, power: np.ndarray, demand_sum: np.ndarray, limits: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The block's decisions (one every period from its first cell, each aiming at its
        ``limits``): the caps of those that cap something, and each decision's column among
        them (-1: no caps)."""
        at = np.arange(0, power.shape[1], self.period)
        if self.stateless:
            over = np.flatnonzero(demand_sum[at] > limits[at] * (1 + SLACK))
            caps = (
                self.decide(power[:, at[over]], limits[at[over]], self.known)
                if over.size
                else np.empty((self.n, 0))
            )
            ids = np.full(at.size, -1)
            ids[over] = np.arange(over.size)
        else:
            caps, ids = self.decide(power[:, at], limits[at], self.known), np.arange(at.size)
        some = np.isfinite(caps).any(axis=0)
        column = np.where(some, np.cumsum(some) - 1, -1)
        ids = _pick(column, ids)
        return caps[:, some], ids

    def _kept(self, caps: np.ndarray) -> np.ndarray:
        """The throughput share each member keeps under each column of ``caps``."""
        out = np.ones(caps.shape)
        for r, idx in self.known.by_response():
            if r is None:
                continue
            sub = caps[idx]
            on = np.isfinite(sub)
            if on.any():
                part = np.ones(sub.shape)
                part[on] = r.rate(sub[on])
                out[idx] = part
        return out

    def feed(self, start: int, power: np.ndarray, demand_sum: np.ndarray) -> None:
        """The next block of cells: every member's power (n x cells) from cell ``start``."""
        m, grid = power.shape[1], self.grid
        stop = start + m
        limits = self.limits[start:stop]
        self.uncapped += float(demand_sum.sum()) * grid
        caps, ids = self._decisions(power, demand_sum, self.planned[start:stop])
        # every decision a cell of this block may take: the carried ones, then the block's
        first = start // self.period - self.back  # the decision carry_ids[0] is
        every = np.hstack([self.carry_caps, caps])
        ids = np.concatenate(
            [self.carry_ids, np.where(ids >= 0, ids + self.carry_caps.shape[1], -1)]
        )
        decision = (np.arange(start, stop) - self.latency) // self.period - first
        cell_ids = _pick(ids, decision)
        on = np.flatnonzero(cell_ids >= 0)
        fleet_w = demand_sum.astype(float)
        step = max(1, _APPLY // max(1, self.n))
        for a in range(0, on.size, step):
            cells = on[a : a + step]
            fleet_w[cells] = np.minimum(power[:, cells], every[:, cell_ids[cells]]).sum(axis=0)
        self.energy += float(fleet_w.sum()) * grid
        excess = fleet_w - limits
        over = excess > 1e-9 * limits
        if over.any():
            self.over_cells += int(over.sum())
            self.over_energy += float(excess[over].sum()) * grid
            self.over_peak = max(self.over_peak, float(excess[over].max()))
        if on.size:
            counts = np.bincount(cell_ids[on], minlength=every.shape[1])
            used = np.flatnonzero(counts)
            share = self._kept(every[:, used])
            lost = 1.0 - share
            self.lost += lost @ (counts[used] * grid)
            self.capped_s += np.isfinite(every[:, used]) @ (counts[used] * grid)
            if self.lost_by_class is not None:
                by_class = np.zeros((self.lost_by_class.shape[0], every.shape[1]))
                for c in range(by_class.shape[0]):
                    by_class[c, used] = lost[self.klass == c].sum(axis=0) * grid
                self.lost_by_class[:, start + on] = by_class[:, cell_ids[on]]
        self.capped_cells += int(on.size)
        self._count_events(cell_ids >= 0)
        if not on.size:
            used, share = np.empty(0, dtype=int), np.empty((self.n, 0))
        self._timeline(start, demand_sum, fleet_w, limits, cell_ids, every, used, share)
        if self.capped is not None:
            self.capped[start:stop] = fleet_w
        if self.breaker is not None:
            self.breaker.feed(fleet_w)
        # carry the last decisions (and their caps) a cell of the next block may take
        tail = ids[-self.back :]
        keep = np.unique(tail[tail >= 0])
        where = np.full(every.shape[1], -1)
        where[keep] = np.arange(keep.size)
        self.carry_ids = _pick(where, tail)
        self.carry_caps = every[:, keep]

    def _timeline(
        self,
        start: int,
        demand_sum: np.ndarray,
        fleet_w: np.ndarray,
        limits: np.ndarray,
        cell_ids: np.ndarray,
        every: np.ndarray,
        used: np.ndarray,
        share: np.ndarray,
    ) -> None:
        """Gather the block's cells into the timeline's spans (``share``: the kept throughput
        of every member under each ``used`` column of ``every``)."""
        span = (start + np.arange(demand_sum.size)) // self.span
        first = np.flatnonzero(np.diff(span, prepend=-1))  # (spans are runs of cells)
        at = span[first]
        self.tl_uncapped[at] = np.maximum(
            self.tl_uncapped[at], np.maximum.reduceat(demand_sum, first)
        )
        self.tl_capped[at] = np.maximum(self.tl_capped[at], np.maximum.reduceat(fleet_w, first))
        self.tl_limit[at] = np.minimum(self.tl_limit[at], np.minimum.reduceat(limits, first))
        gpus = np.zeros(demand_sum.size)  # the share of GPUs capped, and each job's kept share
        kept = np.ones((len(self.job_names), demand_sum.size))
        on = np.flatnonzero(cell_ids >= 0)
        if on.size:
            column = np.full(every.shape[1], -1)
            column[used] = np.arange(used.size)
            picks = column[cell_ids[on]]
            gpus[on] = (np.isfinite(every[:, used]).sum(axis=0) / max(1, self.n))[picks]
            for j, mine in enumerate(self.job_masks):
                kept[j, on] = (share[mine].sum(axis=0) / max(1, int(mine.sum())))[picks]
        self.tl_gpus[at] += np.add.reduceat(gpus, first)
        self.tl_kept[:, at] += np.add.reduceat(kept, first, axis=1)

    def _count_events(self, on: np.ndarray) -> None:
        """Cap events: runs of capped cells, carried from block to block."""
        if not on.any():
            if self.run:
                self.runs.append(self.run)
            self.run = 0
            return
        edges = np.diff(np.concatenate([[0], on.astype(np.int8), [0]]))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        lengths = (ends - starts).tolist()
        if starts[0] == 0:
            lengths[0] += self.run
        elif self.run:
            self.runs.append(self.run)
        self.run = lengths.pop() if ends[-1] == on.size else 0
        self.runs.extend(lengths)

    def result(self) -> CapRun:
        """The run's figures (the class docstring, CapRun)."""
        runs = [*self.runs, self.run] if self.run else self.runs
        lengths = np.array(runs, dtype=float) * self.grid
        known_i = [i for i, r in enumerate(self.responses) if r is not None]
        span, horizon, lost = self.horizon * self.grid, self.horizon, self.lost
        events = []
        if self.capped is not None and self.demand is not None and self.lost_by_class is not None:
            events = [
                event_result(
                    e, w, self.capped, self.demand, self.lost_by_class, self.grid, self.period
                )
                for e, w in zip(self.events, self.windows, strict=True)
            ]
        return CapRun(
            policy=self.policy,
            limit_w=self.limit_w,
            ratio=self.ratio,
            capped_share=self.capped_cells / horizon,
            cap_events=len(runs),
            longest_event_s=float(lengths.max()) if lengths.size else 0.0,
            p95_event_s=float(np.quantile(lengths, 0.95)) if lengths.size else None,
            over_limit_share=self.over_cells / horizon,
            over_limit_energy_j=self.over_energy,
            over_limit_peak_w=self.over_peak,
            energy_j=self.energy,
            uncapped_energy_j=self.uncapped,
            lost_share=float(lost[known_i].sum() / (span * len(known_i))) if known_i else None,
            lost_gpu_hours=float(lost[known_i].sum() / 3600) if known_i else None,
            jobs=_job_costs(self.jobs, self.responses, lost, self.capped_s, span),
            events=events,
            breaker=None if self.breaker is None else self.breaker.result(),
            breaker_uncapped=(
                None if self.breaker_uncapped is None else self.breaker_uncapped.result()
            ),
            timeline=self._timeline_result(),
        )

    def _timeline_result(self) -> Timeline:
        cells = np.bincount(np.arange(self.horizon) // self.span).astype(float)
        return Timeline(
            span_s=self.span * self.grid,
            uncapped_w=self.tl_uncapped,
            capped_w=self.tl_capped,
            limit_w=self.tl_limit,
            capped_gpus=self.tl_gpus / cells,
            kept={name: self.tl_kept[j] / cells for j, name in enumerate(self.job_names)},
        )


def _demand(fleet: FleetMembers, offsets: np.ndarray) -> np.ndarray:
    """The uncapped fleet's power per cell (a member missing in a cell draws nothing)."""
    out = np.zeros(fleet.horizon)
    for start in range(0, fleet.horizon, BLOCK_CELLS):
        stop = min(fleet.horizon, start + BLOCK_CELLS)
        power, missing = fleet.block(offsets, start, stop)
        power[missing] = 0.0
        out[start:stop] = power.sum(axis=0)
    return out


def _job_costs(
    jobs: Sequence[str | None],
    responses: Sequence[Response | None],
    lost: np.ndarray,
    capped_s: np.ndarray,
    span: float,
) -> list[JobCost]:
    out = []
    names = sorted({j or "(no job)" for j in jobs})
    for name in names:
        idx = [i for i, j in enumerate(jobs) if (j or "(no job)") == name]
        has_curve = all(responses[i] is not None for i in idx)
        total = float(lost[idx].sum())
        out.append(
            JobCost(
                job=name,
                gpus=len(idx),
                capped_share=float(capped_s[idx].sum() / (span * len(idx))),
                lost_share=total / (span * len(idx)) if has_curve else None,
                lost_gpu_hours=total / 3600 if has_curve else None,
            )
        )
    return out
