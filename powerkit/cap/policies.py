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

__all__ = ["POLICIES", "Fleet", "Policy", "pfi", "polca", "uniform"]


@dataclass
class Fleet:
    """What a policy knows of the GPUs besides their demand: each one's response to a cap
    (None: its job has no curve), its floor (the lowest cap it takes), its job's priority
    class (0: the highest), and a state the policy may keep between decisions."""

    responses: Sequence[Response | None]
    floors_w: np.ndarray
    classes: np.ndarray
    state: dict[str, Any] = field(default_factory=dict)


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
    segments: list[tuple[float, int, float, float]] = []  # (cost per W, GPU, from, to)
    for i, (d, r) in enumerate(zip(demand_w.tolist(), fleet.responses, strict=True)):
        segments += _segments(i, d, r, float(fleet.floors_w[i]))
    segments.sort(key=lambda s: (s[0], s[1], -s[2]))
    for _, i, hi, lo in segments:
        if need <= 0:
            break
        take = min(hi - lo, need)
        caps[i] = hi - take
        need -= take
    return caps


def _segments(i: int, demand: float, r: Response | None,
              floor: float) -> list[tuple[float, int, float, float]]:  # fmt: skip
    """GPU ``i``'s sheddable watts as segments from its demand down to its floor, each with
    its throughput cost per watt; the cost of setting a cap at all joins the first, and
    segments are pooled where a lower one would be cheaper per watt (so that taking the
    cheapest first takes a GPU's watts in order)."""
    if demand <= floor:
        return []
    if r is None:  # unknown cost: after every GPU whose cost is known
        return [(np.inf, i, demand, floor)]
    points = [demand] + [c for c in r.caps_w.tolist()[::-1] if floor < c < demand] + [floor]
    rates = r.rate(np.array(points)).tolist()
    pieces: list[list[float]] = []  # [cost, watts, from, to]
    for k in range(len(points) - 1):
        watts = points[k] - points[k + 1]
        if watts <= 0:
            continue
        cost = rates[k] - rates[k + 1] + (1.0 - rates[0] if k == 0 else 0.0)
        pieces.append([cost, watts, points[k], points[k + 1]])
        while len(pieces) >= 2 and pieces[-2][0] / pieces[-2][1] > pieces[-1][0] / pieces[-1][1]:
            last = pieces.pop()
            prev = pieces[-1]
            prev[0] += last[0]
            prev[1] += last[1]
            prev[3] = last[3]
    return [(cost / watts, i, hi, lo) for cost, watts, hi, lo in pieces]


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


POLICIES: dict[str, Policy] = {"none": no_caps, "uniform": uniform, "pfi": pfi, "polca": polca}
