"""Capping policies: given each GPU's demand (its uncapped power now) and the limit, the cap
each GPU gets (inf: none). One small interface, so a policy of one's own is a function.

- ``none``: no caps (what ``oversub`` sees).
- ``uniform``: every GPU the same cap, the highest that brings the fleet to the limit (as a
  BMC power brake does), never below a GPU's floor.
- ``pfi``: the least throughput lost per watt shed: each GPU's cost of shedding is its kept
  share of throughput against its cap (powerkit.cap.response). A GPU's watts from its demand
  down to its floor are pieces, one per segment of its curve's hull, each costing the share
  it loses; the cost of setting a cap at all (1 - r(demand)) joins the top piece, which is
  pooled with the ones below it while they are cheaper per watt. Pieces are taken cheapest
  first (ties GPU by GPU, a GPU's own from the top) until the fleet is at the limit, the last
  in part. GPUs whose job has no curve are shed last (their cost is unknown).
- ``polca``, ``priority``: their functions' docstrings.

A decision is a column: policies take every GPU's demand at many decisions at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from powerkit.cap.response import Response

__all__ = [
    "POLICIES",
    "STATELESS",
    "TOLERANCE",
    "Fleet",
    "Policy",
    "columns",
    "each_decision",
    "pfi",
    "polca",
    "priority",
    "uniform",
    "water_levels",
]


@dataclass
class Fleet:
    """What a policy knows of the GPUs besides their demand: each one's response to a cap
    (None: its job has no curve), its floor (the lowest cap it takes), its job's priority
    class (0: the highest), and a state the policy may keep between decisions."""

    responses: Sequence[Response | None]
    floors_w: np.ndarray
    classes: np.ndarray
    state: dict[str, Any] = field(default_factory=dict)

    def by_response(self) -> list[tuple[Response | None, np.ndarray]]:
        """The GPUs grouped by their response (None: no curve), made once."""
        if "_groups" not in self.state:
            groups: dict[int, tuple[Response | None, list[int]]] = {}
            for i, r in enumerate(self.responses):
                groups.setdefault(id(r), (r, []))[1].append(i)
            self.state["_groups"] = [(r, np.array(idx)) for r, idx in groups.values()]
        found: list[tuple[Response | None, np.ndarray]] = self.state["_groups"]
        return found


#: ``policy(demand_w, limit_w, fleet) -> caps_w``: the demand of each GPU (rows) at each
#: decision (columns, in time order), the limit at each, and the caps (inf: none). A policy
#: in ``STATELESS`` is shown only the decisions where the fleet's demand is over the limit
#: (every other one is "no caps"); any other sees every decision, in order.
Policy = Callable[[np.ndarray, "np.ndarray | float", Fleet], np.ndarray]

#: a fleet within this share over its limit is at it (float rounding), as the replay counts
#: cells over the limit
SLACK = 1e-9

#: the policies whose decisions depend on that moment's demand alone
STATELESS = frozenset({"none", "uniform", "pfi", "priority"})


def columns(policy: Callable[[np.ndarray, np.ndarray, Fleet], np.ndarray]) -> Policy:
    """Let ``policy`` (written for a matrix of decisions) also take one decision: a vector of
    demands and one limit, answered with a vector of caps."""

    @functools.wraps(policy)
    def call(demand_w: np.ndarray, limit_w: np.ndarray | float, fleet: Fleet) -> np.ndarray:
        d = np.asarray(demand_w, dtype=float)
        if d.ndim == 1:
            return policy(d[:, None], np.array([float(limit_w)]), fleet)[:, 0]
        return policy(d, np.asarray(limit_w, dtype=float), fleet)

    return call


def each_decision(decide: Callable[[np.ndarray, float, Fleet], np.ndarray]) -> Policy:
    """A policy written for one decision (a vector of demands, one limit), made to take a
    matrix of them, one at a time in order."""

    @columns
    @functools.wraps(decide)
    def call(demand_w: np.ndarray, limit_w: np.ndarray, fleet: Fleet) -> np.ndarray:
        out = np.full(demand_w.shape, np.inf)
        for j in range(demand_w.shape[1]):
            out[:, j] = decide(demand_w[:, j], float(limit_w[j]), fleet)
        return out

    return call


#: POLCA's thresholds, as shares of the limit: low-priority jobs are capped from T1 (to hold
#: the fleet there), every job from T2 (to hold it at the limit), and released below RELEASE
POLCA_T1, POLCA_T2, POLCA_RELEASE = 0.90, 1.00, 0.85


@columns
def no_caps(demand_w: np.ndarray, limit_w: np.ndarray, fleet: Fleet) -> np.ndarray:
    """Never cap."""
    return np.full(demand_w.shape, np.inf)


@columns
def uniform(demand_w: np.ndarray, limit_w: np.ndarray, fleet: Fleet) -> np.ndarray:
    """One cap for every GPU: the highest c with sum(min(demand, max(c, floor))) <= limit."""
    return water_levels(demand_w, limit_w, fleet.floors_w)


#: the most (decisions x GPUs) sorted at once by ``water_levels``
_CHUNK = 1 << 20


def water_levels(demand_w: np.ndarray, limits_w: np.ndarray, floors_w: np.ndarray) -> np.ndarray:
    """The uniform cap of each decision (column): drawn(c) = sum(min(demand, max(c, floor)))
    is piecewise linear in c, rising by one W/W between a GPU's floor and its demand, so its
    value at every break follows from the sorted breaks, and one interpolation gives c
    exactly. No caps where the demand is under the limit; every GPU at its floor where the
    floors alone are over it."""
    n, k = demand_w.shape
    caps = np.full((n, k), np.inf)
    over = np.flatnonzero(demand_w.sum(axis=0) > limits_w * (1 + SLACK))
    floors = np.asarray(floors_w, dtype=float)[:, None]
    step = max(1, _CHUNK // max(1, 2 * n))
    for first in range(0, over.size, step):
        cols = over[first : first + step]
        d, lim = demand_w[:, cols], limits_w[cols]
        low = np.minimum(d, floors).sum(axis=0)  # every GPU at its floor
        at_floor = low > lim
        caps[:, cols[at_floor]] = floors
        if at_floor.all():
            continue
        keep = ~at_floor
        cols, d, lim, low = cols[keep], d[:, keep], lim[keep], low[keep]
        free = d > floors  # (a GPU at or under its floor draws its demand whatever the cap)
        values = np.concatenate([np.where(free, floors, np.inf), np.where(free, d, np.inf)]).T
        rises = np.concatenate([free, free]).T * np.repeat([1.0, -1.0], n)[None, :]
        order = np.argsort(values, axis=1, kind="stable")
        values = np.take_along_axis(values, order, axis=1)
        slope = np.cumsum(np.take_along_axis(rises, order, axis=1), axis=1)
        with np.errstate(invalid="ignore"):
            gained = np.where(slope[:, :-1] > 0, slope[:, :-1] * np.diff(values, axis=1), 0.0)
        drawn = low[:, None] + np.concatenate(
            [np.zeros((cols.size, 1)), np.cumsum(gained, axis=1)], axis=1
        )
        at = (drawn <= lim[:, None]).sum(axis=1) - 1  # the last break at or under the limit
        rows = np.arange(cols.size)
        c0, s0 = values[rows, at], slope[rows, at]
        level = np.where(s0 > 0, c0 + (lim - drawn[rows, at]) / np.where(s0 > 0, s0, 1), c0)
        caps[:, cols] = np.maximum(level[None, :], floors)
    return caps


@columns
def pfi(demand_w: np.ndarray, limit_w: np.ndarray, fleet: Fleet) -> np.ndarray:
    """Shed the watts that cost the least throughput first (module docstring), exactly as
    taking every GPU's pieces cheapest first would (ties GPU by GPU, a GPU's own watts from
    the top; tests/cap/test_cap.py holds that greedy as the reference), without sorting them: the
    cheapest pieces up to a cost per watt λ bring each GPU that takes its first piece (its
    pooled cost u at most λ) down to the lower of its pooled bottom and the lowest vertex its
    curve reaches through segments of slope at most λ; the shed is a step function of λ,
    its steps at the u's and the slopes; λ* is the first at which it covers what must go,
    and the pieces costing exactly λ* are taken GPU by GPU, the last in part."""
    n, k = demand_w.shape
    caps = np.full((n, k), np.inf)
    need_all = demand_w.sum(axis=0) - limit_w
    over = np.flatnonzero(need_all > 0)
    if not over.size:
        return caps
    t = _pfi_tables(fleet)
    S = t.sigma.size
    step = max(1, _CHUNK // (n * (S + 2)))
    gpus = np.arange(n)
    for first in range(0, over.size, step):
        cols = over[first : first + step]
        kk = cols.size
        d = demand_w[:, cols].T  # decisions x GPUs
        need = need_all[cols]
        u, b = np.full((kk, n), np.inf), np.zeros((kk, n))
        for _, idx, c, rho, theta in t.groups:
            dd = d[:, idx]
            m = np.zeros(dd.shape, dtype=int)
            for j in range(1, c.size):  # the pooled block ends at the lowest vertex it may
                m = np.where((dd > c[j]) & (dd >= theta[j]), j, m)
            live = dd > c[0]
            bottom = c[m]
            with np.errstate(divide="ignore", invalid="ignore"):
                u[:, idx] = np.where(live, (1.0 - rho[m]) / (dd - bottom), np.inf)
            b[:, idx] = bottom
        free = t.free & (d > t.floors)  # (no curve, drawing above its floor)
        b = np.where(np.isfinite(u), b, t.floors)
        # the shed at each slope, every piece costing at most it taken
        level = np.minimum(b[:, None, :], t.reach[None, 1:, :])  # decisions x slopes x GPUs
        shed = ((u[:, None, :] <= t.sigma[None, :, None]) * (d[:, None, :] - level)).sum(axis=2)
        seg = (shed < need[:, None]).sum(axis=1)  # λ* is in (sigma[seg-1], sigma[seg]]
        rows = np.arange(kk)
        bounds = np.concatenate([[-np.inf], t.sigma, [np.inf]])
        lo_s, hi_s = bounds[seg], bounds[seg + 1]
        reach = t.reach[seg]  # the lowest vertex reached through slopes under λ*
        gain = d - np.minimum(b, reach)
        base = np.concatenate([np.zeros((kk, 1)), shed], axis=1)[rows, seg]
        entering = (u > lo_s[:, None]) & (u < hi_s[:, None])
        order = np.argsort(np.where(entering, u, np.inf), axis=1)
        run = base[:, None] + np.cumsum(
            np.take_along_axis(np.where(entering, gain, 0.0), order, axis=1), axis=1
        )
        at = (run < need[:, None]).sum(axis=1)
        first_at = np.minimum(at, n - 1)
        inside = (at < n) & np.take_along_axis(entering, order, 1)[rows, first_at]
        lam = np.where(inside, np.take_along_axis(u, order, 1)[rows, first_at], hi_s)
        below = u < lam[:, None]
        held = np.where(below, np.minimum(b, reach), np.inf)
        rest = need - np.where(below, d - held, 0.0).sum(axis=1)
        # the pieces costing exactly λ*: a GPU's pooled piece, then the segment of slope λ*
        # right under where it stands; no curve: from its demand to its floor (λ* = inf)
        pooled = (u == lam[:, None]) & np.isfinite(u)
        top = np.where(pooled, d, held)
        span = np.where(pooled, d - b, 0.0)
        slope_at = np.searchsorted(t.sigma, lam)  # (the slope λ* is, where it is one)
        is_slope = bounds[slope_at + 1] == lam
        seg_top, seg_bot = t.tie_top[slope_at], t.tie_bot[slope_at]
        stands = np.where(pooled, b, held)
        under = is_slope[:, None] & (pooled | below) & (stands == seg_top)
        span = span + np.where(under, seg_top - seg_bot, 0.0)
        none_left = np.isinf(lam)[:, None] & free
        top = np.where(none_left, d, top)
        span = np.where(none_left, d - t.floors, span)
        total = np.cumsum(span, axis=1)
        p = (total < rest[:, None]).sum(axis=1)  # the GPU whose tie piece covers the rest
        whole = (gpus[None, :] < p[:, None]) & (span > 0)
        out = np.where(whole, top - span, np.where(below, held, np.inf))
        last = p < n
        g = np.minimum(p, n - 1)[last]
        before = np.where(g > 0, total[rows[last], np.maximum(g - 1, 0)], 0.0)
        out[rows[last], g] = top[rows[last], g] - (rest[last] - before)
        caps[:, cols] = out.T
    return caps


@dataclass(frozen=True)
class _PfiTables:
    """What pfi needs of the fleet's responses, made once: the distinct slopes of their
    segments (ascending), the vertex each GPU reaches through slopes up to each of them, the
    segment of each slope on each GPU's curve, and each response's vertices, rates and the
    demand from which its pooled block stops at each vertex."""

    sigma: np.ndarray  # (S,)
    reach: np.ndarray  # (S + 1, n): row 0 no slope (inf), row s + 1 slopes up to sigma[s]
    tie_top: np.ndarray  # (S + 1, n): the top of the GPU's segment of slope sigma[s] (nan: none)
    tie_bot: np.ndarray
    floors: np.ndarray  # (n,)
    free: np.ndarray  # (n,) the GPUs without a curve
    groups: list[tuple[Response, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def _pfi_tables(fleet: Fleet) -> _PfiTables:
    if "pfi" in fleet.state:
        found: _PfiTables = fleet.state["pfi"]
        return found
    n = len(fleet.responses)
    groups = []
    slopes: list[np.ndarray] = []
    for r, idx in fleet.by_response():
        if r is None:
            continue
        c, rho = r.caps_w.astype(float), r.rates.astype(float)
        s = np.diff(rho) / np.diff(c)  # segment j (c[j-1], c[j]) at s[j-1]
        slopes.append(s)
        num = 1.0 - rho
        with np.errstate(divide="ignore", invalid="ignore"):
            jump = np.where(num[1:] == 0, 0.0, num[1:] / s)
        theta = np.concatenate([[-np.inf], c[1:] + jump])  # (pooling to c[j] stops there)
        groups.append((r, idx, c, rho, theta))
    sigma = np.unique(np.concatenate(slopes)) if slopes else np.empty(0)
    S = sigma.size
    reach = np.full((S + 1, n), np.inf)
    tie_top, tie_bot = np.full((S + 1, n), np.nan), np.full((S + 1, n), np.nan)
    for _, idx, c, rho, _ in groups:
        s = np.diff(rho) / np.diff(c)
        for q, lam in enumerate(sigma):
            taken = np.flatnonzero(s <= lam)  # the upper segments (slopes fall going up)
            reach[q + 1, idx] = c[taken[0]] if taken.size else c[-1]
            same = np.flatnonzero(s == lam)
            if same.size:
                tie_top[q, idx], tie_bot[q, idx] = c[same[0] + 1], c[same[0]]
    floors = np.asarray(fleet.floors_w, dtype=float)
    free = np.array([r is None for r in fleet.responses], dtype=bool)
    tables = _PfiTables(sigma, reach, tie_top, tie_bot, floors, free, groups)
    fleet.state["pfi"] = tables
    return tables


@columns
def polca(demand_w: np.ndarray, limit_w: np.ndarray, fleet: Fleet) -> np.ndarray:
    """POLCA's two thresholds (arXiv 2308.12908): above T1 of the limit the low-priority jobs
    (class 1 and up) are capped, one cap for them all, to hold the fleet at T1; above T2 every
    job is, to hold it at the limit; the caps stay until the demand falls below RELEASE of the
    limit (hysteresis: until then a cap only tightens)."""
    n, k = demand_w.shape
    totals = demand_w.sum(axis=0)
    level = int(fleet.state.get("polca", 0))
    levels = np.empty(k, dtype=int)
    for j, (total, lim) in enumerate(zip(totals.tolist(), limit_w.tolist(), strict=True)):
        if total > POLCA_T2 * lim:
            level = 2
        elif total > POLCA_T1 * lim:
            level = max(level, 1)
        elif total < POLCA_RELEASE * lim:
            level = 0
        levels[j] = level
    fleet.state["polca"] = level
    caps = np.full((n, k), np.inf)
    on = np.flatnonzero(levels > 0)
    held = fleet.state.pop("caps", None)  # the last decision's caps, when it capped
    if not on.size:
        return caps
    d, lim = demand_w[:, on], limit_w[on]
    raw = np.full(d.shape, np.inf)
    low = fleet.classes >= 1
    if low.any():  # the low-priority jobs hold the fleet at T1 as far as their floors allow
        budget = np.maximum(0.0, POLCA_T1 * lim - d[~low].sum(axis=0))
        raw[low] = water_levels(d[low], budget, fleet.floors_w[low])
    drawn = np.minimum(d, raw)
    again = (levels[on] == 2) & (drawn.sum(axis=0) > lim * (1 + SLACK))
    if again.any():
        tighter = water_levels(drawn[:, again], lim[again], fleet.floors_w)
        raw[:, again] = np.minimum(raw[:, again], tighter)
    # (hysteresis: through each run of capping decisions a cap only tightens)
    starts = np.flatnonzero(np.diff(on, prepend=-2) != 1)
    for a, b in zip(starts, [*starts[1:], on.size], strict=True):
        part = raw[:, a:b]
        if a == 0 and on[0] == 0 and held is not None:
            part = np.minimum(part, held[:, None])
        raw[:, a:b] = np.minimum.accumulate(part, axis=1)
    caps[:, on] = raw
    if levels[-1] > 0:
        fleet.state["caps"] = caps[:, -1].copy()
    return caps


def _uniform(demand_w: np.ndarray, limit_w: float, floors_w: np.ndarray) -> np.ndarray:
    """The water level of one decision."""
    return water_levels(demand_w[:, None], np.array([limit_w]), floors_w)[:, 0]


#: the throughput each priority class tolerates losing (after Emerald AI's Flex 0-3)
TOLERANCE = (0.0, 0.10, 0.25, 0.50)


@each_decision
def priority(demand_w: np.ndarray, limit_w: float, fleet: Fleet) -> np.ndarray:
    """Classes shed in turn, the most tolerant first (class 3, then 2, then 1), each GPU down
    to the cap at which its job keeps 1 - its class's tolerance (``TOLERANCE``), one cap for
    a class; class 0 and GPUs without a curve only when that is not enough: then every GPU
    is capped to the limit (the tolerances broken, as the run's losses show)."""
    at_limit = limit_w * (1 + SLACK)
    if demand_w.sum() <= at_limit:
        return np.full(demand_w.size, np.inf)
    classes = np.minimum(fleet.classes, len(TOLERANCE) - 1)
    if "lowest" not in fleet.state:  # each GPU's cap at its class's tolerance, made once
        fleet.state["lowest"] = np.array(
            [
                np.inf
                if r is None or classes[i] == 0
                else max(float(fleet.floors_w[i]), r.cap_for(1.0 - TOLERANCE[classes[i]]))
                for i, r in enumerate(fleet.responses)
            ]
        )
    lowest = fleet.state["lowest"]
    caps = np.full(demand_w.size, np.inf)
    for c in range(len(TOLERANCE) - 1, 0, -1):
        drawn = np.minimum(demand_w, caps)
        if drawn.sum() <= at_limit:
            break
        sel = (classes == c) & np.isfinite(lowest)
        if sel.any():
            budget = max(0.0, limit_w - float(drawn[~sel].sum()))
            caps[sel] = np.minimum(caps[sel], _uniform(drawn[sel], budget, lowest[sel]))
    drawn = np.minimum(demand_w, caps)
    if drawn.sum() > at_limit:  # the tolerances are not enough: everyone to the limit
        caps = np.minimum(caps, _uniform(drawn, limit_w, fleet.floors_w))
    return caps


POLICIES: dict[str, Policy] = {
    "none": no_caps,
    "uniform": uniform,
    "pfi": pfi,
    "polca": polca,
    "priority": priority,
}
