"""Capping policies: given each GPU's demand (its uncapped power now) and the limit, the cap
each GPU gets (inf: none). One small interface, so a policy of one's own is a function.

- ``none``: no caps (what ``oversub`` sees).
- ``uniform``: every GPU the same cap, the highest that brings the fleet to the limit (as a
  BMC power brake does), never below a GPU's floor.
- ``pfi``: the least throughput lost per watt shed: each GPU's cost of shedding is its kept
  share of throughput against its cap (powerkit.cap.response); watts are shed greedily from
  the cheapest, a GPU's own watts in the order its cap falls. GPUs whose job has no curve are
  shed last (their cost is unknown).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from powerkit.cap.response import Response

__all__ = ["POLICIES", "TOLERANCE", "Fleet", "Policy", "pfi", "polca", "priority", "uniform"]


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


#: ``policy(demand_w, limit_w, fleet) -> caps_w`` (inf: no cap on that GPU)
Policy = Callable[[np.ndarray, float, Fleet], np.ndarray]

#: POLCA's thresholds, as shares of the limit: low-priority jobs are capped from T1 (to hold
#: the fleet there), every job from T2 (to hold it at the limit), and released below RELEASE
POLCA_T1, POLCA_T2, POLCA_RELEASE = 0.90, 1.00, 0.85


def no_caps(demand_w: np.ndarray, limit_w: float, fleet: Fleet) -> np.ndarray:
    """Never cap."""
    return np.full(demand_w.size, np.inf)


def uniform(demand_w: np.ndarray, limit_w: float, fleet: Fleet) -> np.ndarray:
    """One cap for every GPU: the highest c with sum(min(demand, max(c, floor))) <= limit."""
    return _uniform(demand_w, limit_w, fleet.floors_w)


def _uniform(demand_w: np.ndarray, limit_w: float, floors_w: np.ndarray) -> np.ndarray:
    """The water level: drawn(c) = sum(min(demand, max(c, floor))) is piecewise linear in c,
    its breaks at the floors and demands, so a binary search over the sorted breaks and one
    interpolation give c exactly."""
    if demand_w.sum() <= limit_w:
        return np.full(demand_w.size, np.inf)
    free = demand_w > floors_w  # (a GPU below its floor draws its demand whatever the cap)
    base = float(demand_w[~free].sum())
    f, d = floors_w[free].astype(float), demand_w[free].astype(float)
    if base + f.sum() > limit_w:  # the floors alone are over the limit: every GPU at its floor
        return floors_w.astype(float).copy()

    def drawn(c: float) -> float:
        return base + float(np.clip(c, f, d).sum())

    breaks = np.unique(np.concatenate([f, d]))
    lo, hi = 0, breaks.size - 1  # drawn(breaks[lo]) <= limit < drawn(breaks[hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if drawn(float(breaks[mid])) <= limit_w else (lo, mid)
    c0 = float(breaks[lo])
    slope = int(((f <= c0) & (d > c0)).sum())  # GPUs whose draw rises with c just above c0
    level = c0 + (limit_w - drawn(c0)) / slope if slope else c0
    return np.maximum(level, floors_w).astype(float)


def pfi(demand_w: np.ndarray, limit_w: float, fleet: Fleet) -> np.ndarray:
    """Shed the watts that cost the least throughput first (module docstring)."""
    need = float(demand_w.sum()) - limit_w
    caps = np.full(demand_w.size, np.inf)
    if need <= 0:
        return caps
    parts = [_pieces(idx, r, demand_w, fleet.floors_w) for r, idx in fleet.by_response()]
    cost, gpu, hi, lo = (np.concatenate([p[k] for p in parts]) for k in range(4))
    order = np.lexsort((-hi, gpu, cost))  # cheapest first; a GPU's own watts from the top
    cost, gpu, hi, lo = cost[order], gpu[order], hi[order], lo[order]
    taken = np.cumsum(hi - lo)
    last = int(np.searchsorted(taken, need))  # the piece that covers what is still needed
    if last >= taken.size:  # every watt down to the floors is not enough: all of them
        np.minimum.at(caps, gpu, lo)
        return caps
    np.minimum.at(caps, gpu[:last], lo[:last])
    before = float(taken[last - 1]) if last else 0.0
    caps[gpu[last]] = min(caps[gpu[last]], float(hi[last] - (need - before)))
    return caps


def _pieces(idx: np.ndarray, r: Response | None, demand_w: np.ndarray,
            floors_w: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """The sheddable watts of the GPUs ``idx`` (one response ``r``) as pieces (cost per
    watt, GPU, from, to), from each GPU's demand down to its floor along the response's
    hull; the cost of setting a cap at all joins the top piece, which is pooled with the ones
    below it while they are cheaper per watt (so that taking the cheapest first takes a
    GPU's watts in order). GPUs without a response: one piece of unknown (inf) cost."""
    empty = np.empty(0)
    if idx.size == 0:
        return empty, empty.astype(int), empty, empty
    d, floor = demand_w[idx].astype(float), floors_w[idx].astype(float)
    live = d > floor
    idx, d, floor = idx[live], d[live], floor[live]
    if r is None or idx.size == 0:
        return np.full(idx.size, np.inf), idx, d, floor
    c = r.caps_w.astype(float)
    # pieces from the top: [top cap, demand] (no cost), then each hull interval, downwards
    tops = np.concatenate([[np.inf], c[::-1]])  # upper bounds of the pieces
    bottoms = np.concatenate([c[::-1], [-np.inf]])  # their lower bounds
    hi = np.minimum(tops[None, :], d[:, None])
    lo = np.maximum(bottoms[None, :], floor[:, None])
    watts = np.clip(hi - lo, 0.0, None)
    cost = r.rate(np.maximum(hi, lo)) - r.rate(lo)  # (rate is 1 above the top cap)
    entry = 1.0 - r.rate(d)
    first = np.argmax(watts > 0, axis=1)  # each GPU's top piece
    rows = np.arange(idx.size)
    cost[rows, first] += entry
    # pool the top piece with the next ones while it costs more per watt than the next
    cum_c, cum_w = np.cumsum(cost, axis=1), np.cumsum(watts, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        avg = cum_c / cum_w
        unit = np.where(watts > 0, cost / watts, np.inf)
    nxt = np.concatenate([unit[:, 1:], np.full((idx.size, 1), np.inf)], axis=1)
    cols = np.arange(watts.shape[1])[None, :]
    stop = (cols >= first[:, None]) & (avg <= nxt)
    end = np.argmax(stop, axis=1)  # the last piece of the pooled block
    keep = (cols > end[:, None]) & (watts > 0)
    block_cost = cum_c[rows, end] / cum_w[rows, end]
    out_cost = np.concatenate([block_cost, unit[keep]])
    out_gpu = np.concatenate([idx, np.broadcast_to(idx[:, None], watts.shape)[keep]])
    out_hi = np.concatenate([d, hi[keep]])
    out_lo = np.concatenate([lo[rows, end], lo[keep]])
    return out_cost, out_gpu, out_hi, out_lo


def polca(demand_w: np.ndarray, limit_w: float, fleet: Fleet) -> np.ndarray:
    """POLCA's two thresholds (arXiv 2308.12908): above T1 of the limit the low-priority jobs
    (class 1 and up) are capped, one cap for them all, to hold the fleet at T1; above T2 every
    job is, to hold it at the limit; the caps stay until the demand falls below RELEASE of the
    limit (hysteresis: until then a cap only tightens)."""
    total = float(demand_w.sum())
    level = int(fleet.state.get("polca", 0))
    if total > POLCA_T2 * limit_w:
        level = 2
    elif total > POLCA_T1 * limit_w:
        level = max(level, 1)
    elif total < POLCA_RELEASE * limit_w:
        level = 0
    fleet.state["polca"] = level
    if level == 0:
        fleet.state.pop("caps", None)
        return np.full(demand_w.size, np.inf)
    low = fleet.classes >= 1
    caps = np.full(demand_w.size, np.inf)
    if low.any():  # the low-priority jobs hold the fleet at T1 as far as their floors allow
        others = float(demand_w[~low].sum())
        budget = max(0.0, POLCA_T1 * limit_w - others)
        caps[low] = _uniform(demand_w[low], budget, fleet.floors_w[low])
    if level == 2 and float(np.minimum(demand_w, caps).sum()) > limit_w:
        caps = np.minimum(caps, _uniform(np.minimum(demand_w, caps), limit_w, fleet.floors_w))
    held = fleet.state.get("caps")
    if held is not None:  # (hysteresis: a cap set is only loosened below RELEASE)
        caps = np.minimum(caps, held)
    fleet.state["caps"] = caps
    return caps


#: the throughput each priority class tolerates losing (after Emerald AI's Flex 0-3)
TOLERANCE = (0.0, 0.10, 0.25, 0.50)


def priority(demand_w: np.ndarray, limit_w: float, fleet: Fleet) -> np.ndarray:
    """Classes shed in turn, the most tolerant first (class 3, then 2, then 1), each GPU down
    to the cap at which its job keeps 1 - its class's tolerance (``TOLERANCE``), one cap for
    a class; class 0 and GPUs without a curve only when that is not enough: then every GPU
    is capped to the limit (the tolerances broken, as the run's losses show)."""
    if demand_w.sum() <= limit_w:
        return np.full(demand_w.size, np.inf)
    classes = np.minimum(fleet.classes, len(TOLERANCE) - 1)
    lowest = np.array([
        np.inf if r is None or classes[i] == 0
        else max(float(fleet.floors_w[i]), r.cap_for(1.0 - TOLERANCE[classes[i]]))
        for i, r in enumerate(fleet.responses)
    ])  # fmt: skip
    caps = np.full(demand_w.size, np.inf)
    for c in range(len(TOLERANCE) - 1, 0, -1):
        drawn = np.minimum(demand_w, caps)
        if drawn.sum() <= limit_w:
            break
        sel = (classes == c) & np.isfinite(lowest)
        if sel.any():
            budget = max(0.0, limit_w - float(drawn[~sel].sum()))
            caps[sel] = np.minimum(caps[sel], _uniform(drawn[sel], budget, lowest[sel]))
    drawn = np.minimum(demand_w, caps)
    if drawn.sum() > limit_w:  # the tolerances are not enough: everyone to the limit
        caps = np.minimum(caps, _uniform(drawn, limit_w, fleet.floors_w))
    return caps


POLICIES: dict[str, Policy] = {
    "none": no_caps, "uniform": uniform, "pfi": pfi, "polca": polca, "priority": priority,
}  # fmt: skip
