"""Sharing a power cut among jobs: equal-weight, PFI-aware, predicted-PFI-aware, and an oracle.

Synthetic workloads are drawn from measured job curves. Under a cut c the workload's power
budget is (1 - c) · Σ P_max. Proportional policies cut job j by λ·w_j (w_j = P_max for
equal-weight, (P_max/T_max)·PFI for the PFI-aware ones), each job held inside the power range
its curve was measured over, λ chosen so the budget is met exactly. The oracle maximizes total
throughput on the piecewise-linear curves: greedy on each curve's upper concave hull (exact for
concave curves); where a curve is not concave the hull value bounds the exact optimum from
above, and that bound's gap to what the oracle achieves is reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.schemas import field_properties, type_schema
from powerkit.core.tables import Column
from powerkit.pfi.curves import JobCurve
from powerkit.pfi.index import PfiResult

__all__ = [
    "POLICIES",
    "AllocJob",
    "AllocationResult",
    "CutResult",
    "allocate",
    "allocation_columns",
    "draw_workloads",
    "interp_curves",
    "jobs_from_curves",
    "oracle",
    "proportional",
    "upper_hull",
]

POLICIES = ("equal", "pfi", "predicted-pfi", "oracle")
_MIN_WEIGHT_PFI = 0.05  # a PFI (or a predicted one) below this is taken as this


@dataclass
class AllocJob:
    """A measured job's curve for allocation: points ascending in power (at measured size)."""

    job: str
    power_w: np.ndarray
    tokens_per_s: np.ndarray
    p_max_w: float  # the reference run (for the weights)
    t_max: float
    pfi: float
    predicted_pfi: float | None = None


@dataclass
class CutResult:
    """One cut level: per policy, mean workload throughput and mean throughput per job."""

    cut: float
    tokens_per_s: dict[str, float]
    per_job_tokens_per_s: dict[str, dict[str, float]]
    gap_recovered: dict[str, float | None]
    oracle_gap_bound: float  # (hull bound - oracle) / oracle, mean over workloads


@dataclass(frozen=True)
class AllocationResult(Document):
    """Every cut level of one run (``pfi allocate``)."""

    COMMAND: ClassVar[str] = "pfi allocate"
    NAME: ClassVar[str] = "`powerkit pfi allocate --json`"

    cuts: list[CutResult]
    policies: list[str]
    workloads: int
    jobs_per_workload: int
    seed: int
    size_spread: float
    uncapped_tokens_per_s: float
    notes: list[str] = field(default_factory=list)

    @classmethod
    def schema_body(cls, defs: dict[str, Any]) -> dict[str, Any]:
        """The schema of :meth:`body` (docs/schemas/)."""
        number = type_schema(float, defs)
        per_policy = {
            "type": "object",
            "properties": {
                "tokens_per_s": number,
                "per_job_tokens_per_s": {"type": "object", "additionalProperties": number},
            },
            "required": ["tokens_per_s", "per_job_tokens_per_s"],
        }
        cut = {
            "type": "object",
            "properties": {
                "cut": number,
                "policies": {"type": "object", "additionalProperties": per_policy},
                "gap_recovered": {"type": "object", "additionalProperties": number},
                "oracle_gap_bound": number,
            },
            "required": ["cut", "policies", "gap_recovered"],
        }
        properties, required = field_properties(cls, defs)
        del properties["policies"]
        required.remove("policies")
        return {
            "properties": {**properties, "cuts": {"type": "array", "items": cut}},
            "required": required,
        }

    def body(self) -> dict[str, Any]:
        """The ``pfi allocate --json`` document's contents (:meth:`from_body` reads them)."""
        return {
            "cuts": [
                {
                    "cut": c.cut,
                    "policies": {
                        p: {
                            "tokens_per_s": c.tokens_per_s[p],
                            "per_job_tokens_per_s": c.per_job_tokens_per_s[p],
                        }
                        for p in self.policies
                    },
                    "gap_recovered": c.gap_recovered,
                    "oracle_gap_bound": c.oracle_gap_bound,
                }
                for c in self.cuts
            ],
            "workloads": self.workloads,
            "jobs_per_workload": self.jobs_per_workload,
            "seed": self.seed,
            "size_spread": self.size_spread,
            "uncapped_tokens_per_s": self.uncapped_tokens_per_s,
            "notes": self.notes,
        }

    def summary(self) -> str:
        """The run in a line: its workloads and their uncapped throughput."""
        return (
            f"{self.workloads} workloads x {self.jobs_per_workload} jobs (seed {self.seed}); "
            f"uncapped {self.uncapped_tokens_per_s:,.0f} tok/s per workload"
        )

    @classmethod
    def from_body(cls, doc: dict[str, Any]) -> AllocationResult:
        """The result a ``pfi allocate --json`` document holds (for ``report``)."""
        try:
            cuts_doc = doc["cuts"]
            assert isinstance(cuts_doc, list) and cuts_doc
            policies = list(cuts_doc[0]["policies"])
            cuts = [
                CutResult(
                    float(c["cut"]),
                    {p: float(c["policies"][p]["tokens_per_s"]) for p in policies},
                    {p: dict(c["policies"][p]["per_job_tokens_per_s"]) for p in policies},
                    {p: _share(c["gap_recovered"].get(p)) for p in policies},
                    float(c.get("oracle_gap_bound") or 0.0),
                )
                for c in cuts_doc
            ]
            return cls(
                cuts,
                policies,
                int(doc["workloads"]),
                int(doc["jobs_per_workload"]),
                int(doc["seed"]),
                float(doc.get("size_spread") or 1.0),
                float(doc["uncapped_tokens_per_s"]),
                [str(n) for n in doc.get("notes") or []],
            )
        except (KeyError, TypeError, ValueError, AssertionError, IndexError):
            raise BadInputError("cuts, policies or figures missing") from None


def _share(value: Any) -> float | None:
    return None if value is None else float(value)


def _gap(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def allocation_columns(policies: list[str]) -> tuple[Column, ...]:
    """The table of ``pfi allocate``, a row per cut: each policy's throughput and the share
    of the equal-weight-to-oracle gap it recovers, and the oracle's bound."""

    def policy(p: str) -> Column:
        def cell(c: CutResult) -> str:
            return f"{c.tokens_per_s[p]:,.0f} ({_gap(c.gap_recovered[p])})"

        return Column(f"{p} tok/s (gap)", cell)

    return (
        Column("cut", lambda c: f"{100 * c.cut:g}%"),
        *(policy(p) for p in policies),
        Column("oracle bound", "oracle_gap_bound", ".2f", "%", scale=100),
    )


def upper_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The upper concave hull of points (x ascending), from the first to the last x."""
    hx: list[float] = []
    hy: list[float] = []
    for px, py in zip(x.tolist(), y.tolist(), strict=True):
        if hx and px == hx[-1]:
            if py <= hy[-1]:
                continue
            hx.pop()
            hy.pop()
        while len(hx) >= 2:
            # drop the last vertex if it lies on or below the chord to the new point
            cross = (hx[-1] - hx[-2]) * (py - hy[-2]) - (hy[-1] - hy[-2]) * (px - hx[-2])
            if cross >= 0:
                hx.pop()
                hy.pop()
            else:
                break
        hx.append(px)
        hy.append(py)
    return np.array(hx), np.array(hy)


def _pad(arrays: list[np.ndarray]) -> np.ndarray:
    k = max(a.size for a in arrays)
    return np.stack([np.concatenate([a, np.full(k - a.size, a[-1])]) for a in arrays])


def interp_curves(xs: np.ndarray, ys: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Piecewise-linear value of each curve at ``p``: xs, ys (..., K) ascending; p (...)."""
    k = xs.shape[-1]
    if k == 1:
        return ys[..., 0] + 0 * p
    i = np.clip((xs <= p[..., None]).sum(axis=-1) - 1, 0, k - 2)
    x0 = np.take_along_axis(xs, i[..., None], -1)[..., 0]
    x1 = np.take_along_axis(xs, i[..., None] + 1, -1)[..., 0]
    y0 = np.take_along_axis(ys, i[..., None], -1)[..., 0]
    y1 = np.take_along_axis(ys, i[..., None] + 1, -1)[..., 0]
    width = x1 - x0
    frac = np.where(width > 0, (p - x0) / np.where(width > 0, width, 1.0), 0.0)
    return np.asarray(y0 + np.clip(frac, 0.0, 1.0) * (y1 - y0))


def draw_workloads(
    n_jobs: int, workloads: int, jobs_per_workload: int, seed: int, size_spread: float
) -> tuple[np.ndarray, np.ndarray]:
    """(job index, size factor) per (workload, slot): jobs drawn uniformly with replacement,
    sizes log-uniform in [1, size_spread] (a factor on the measured job's power and speed)."""
    if workloads < 1 or jobs_per_workload < 1:
        raise BadInputError(
            f"{option('workloads')} and {option('jobs-per-workload')} must be at least 1"
        )
    if not size_spread >= 1:
        raise BadInputError(
            f"{option('size-spread')} must be at least 1 (1: every job at its measured size)"
        )
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_jobs, size=(workloads, jobs_per_workload))
    scale = np.exp(rng.uniform(0.0, math.log(size_spread), size=idx.shape))
    return idx, scale


def proportional(
    p_min: np.ndarray, p_max: np.ndarray, weight: np.ndarray, budget: np.ndarray
) -> np.ndarray:
    """p = clip(p_max - λ·weight, p_min, p_max) per row, λ per row so that Σ p = budget.

    Arrays are (workloads, jobs); ``budget`` (workloads,). Bisection to machine precision.
    """
    span = np.where(weight > 0, (p_max - p_min) / np.where(weight > 0, weight, 1.0), 0.0)
    lo = np.zeros(budget.shape)
    hi = span.max(axis=1)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        total = np.clip(p_max - mid[:, None] * weight, p_min, p_max).sum(axis=1)
        over = total > budget
        lo = np.where(over, mid, lo)
        hi = np.where(over, hi, mid)
        if np.all(hi - lo <= 1e-12 * np.maximum(hi, 1e-300)):
            break
    return np.asarray(np.clip(p_max - hi[:, None] * weight, p_min, p_max))


def oracle(
    hull_x: np.ndarray, hull_y: np.ndarray, scale: np.ndarray, budget: np.ndarray
) -> np.ndarray:
    """Power per job maximizing Σ T on the concave hulls under the budget (greedy, exact).

    hull_x, hull_y: (workloads, jobs, K) at measured size, padded with the last vertex;
    scale: (workloads, jobs). Watts are taken off hull segments in order of increasing
    throughput per watt (the top of a concave hull first); a segment whose throughput falls
    with power is always taken off.
    """
    w, j, k = hull_x.shape
    p_max = hull_x[..., -1] * scale
    if k == 1:
        return np.asarray(p_max)
    width = np.diff(hull_x, axis=-1) * scale[..., None]  # (w, j, k-1)
    rise = np.diff(hull_y, axis=-1) * scale[..., None]
    slope = np.where(width > 0, rise / np.where(width > 0, width, 1.0), np.inf)
    power = np.empty((w, j))
    slot = np.broadcast_to(np.arange(j)[:, None], (j, k - 1)).ravel()
    for r in range(w):
        s, wd = slope[r].ravel(), width[r].ravel()
        order = np.argsort(s, kind="stable")
        s, wd, owner = s[order], wd[order], slot[order]
        need = max(p_max[r].sum() - budget[r], float(wd[s < 0].sum()))
        before = np.concatenate([[0.0], np.cumsum(wd)[:-1]])
        take = np.clip(need - before, 0.0, wd)
        power[r] = p_max[r] - np.bincount(owner, weights=take, minlength=j)
    return power


def allocate(
    jobs: list[AllocJob],
    cuts: list[float],
    policies: list[str],
    *,
    workloads: int = 500,
    jobs_per_workload: int = 100,
    seed: int = 0,
    size_spread: float = 1.0,
    progress: Callable[[int, int], None] | None = None,
) -> AllocationResult:
    """Run every policy at every cut over the same synthetic workloads."""
    if not jobs:
        raise BadInputError("no job curves to allocate among")
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise BadInputError(f"unknown policy {unknown[0]!r} (one of {', '.join(POLICIES)})")
    if "predicted-pfi" in policies and any(j.predicted_pfi is None for j in jobs):
        raise BadInputError("the predicted-pfi policy needs a predicted PFI for every job")
    for c in cuts:
        if not 0 <= c < 1:
            raise BadInputError(f"{option('cut')} {100 * c:g}%: expected 0% to below 100%")
    notes: list[str] = []
    idx, scale = draw_workloads(len(jobs), workloads, jobs_per_workload, seed, size_spread)
    xs = _pad([j.power_w for j in jobs])
    ys = _pad([j.tokens_per_s for j in jobs])
    hulls = [upper_hull(j.power_w, j.tokens_per_s) for j in jobs]
    hx, hy = _pad([h[0] for h in hulls]), _pad([h[1] for h in hulls])
    concave = all(h[0].size == np.unique(j.power_w).size for h, j in zip(hulls, jobs, strict=True))
    if not concave:
        notes.append(
            "some curves are not concave: the oracle is greedy on their concave hulls, within "
            "the reported bound of the exact optimum"
        )
    p_lo = xs[idx, 0] * scale
    p_hi = xs[idx, -1] * scale
    finite = [j.pfi for j in jobs if math.isfinite(j.pfi)]
    big = 1000.0 * max([*finite, 1.0])

    def pfi_weight(values: list[float]) -> np.ndarray:
        v = np.array(values, dtype=float)
        v = np.where(np.isnan(v), 1.0, np.where(np.isinf(v), big, v))
        unit = np.array([j.p_max_w / j.t_max for j in jobs]) * np.maximum(v, _MIN_WEIGHT_PFI)
        return np.asarray(unit[idx])

    weights = {
        "equal": p_hi,
        "pfi": pfi_weight([j.pfi for j in jobs]),
    }
    if "predicted-pfi" in policies:
        weights["predicted-pfi"] = pfi_weight([float(j.predicted_pfi or 0.0) for j in jobs])
    total_max = p_hi.sum(axis=1)
    floor = p_lo.sum(axis=1)
    deepest = float((1.0 - floor / total_max).min())
    uncapped = ys[idx, -1] * scale  # every job at its highest measured power
    curve_x, curve_y, hull_x, hull_y = xs[idx], ys[idx], hx[idx], hy[idx]
    draws = np.bincount(idx.ravel(), minlength=len(jobs))
    drawn = np.flatnonzero(draws)
    results = []
    wanted = list(dict.fromkeys(["equal", *policies, "oracle"]))
    for n, cut in enumerate(cuts):
        budget = (1.0 - cut) * total_max
        if np.any(floor > budget * (1 + 1e-12)):
            raise BadInputError(
                f"{option('cut')} {100 * cut:g}% is deeper than these jobs can go: the deepest "
                "cut every "
                f"workload can meet within the measured caps is {100 * deepest:.1f}%"
            )
        totals: dict[str, np.ndarray] = {}
        per_job: dict[str, dict[str, float]] = {}
        bound = 0.0
        for policy in wanted:
            if policy == "oracle":
                p = oracle(hull_x, hull_y, scale, budget)
            else:
                p = proportional(p_lo, p_hi, weights[policy], budget)
            unit = interp_curves(curve_x, curve_y, p / scale)  # at measured size
            totals[policy] = (unit * scale).sum(axis=1)
            if policy == "oracle":
                hull_t = (interp_curves(hull_x, hull_y, p / scale) * scale).sum(axis=1)
                bound = float(np.mean((hull_t - totals[policy]) / totals[policy]))
            mean = np.bincount(idx.ravel(), weights=unit.ravel(), minlength=len(jobs)) / np.maximum(
                draws, 1
            )
            per_job[policy] = {jobs[i].job: float(mean[i]) for i in drawn}
        gap = float((totals["oracle"] - totals["equal"]).sum())
        scale_ref = float(totals["oracle"].sum())
        recovered: dict[str, float | None] = {
            p: (
                float((totals[p] - totals["equal"]).sum()) / gap
                if gap > 1e-9 * max(scale_ref, 1.0)
                else None
            )
            for p in policies
        }
        results.append(
            CutResult(
                cut,
                {p: float(totals[p].mean()) for p in policies},
                {p: per_job[p] for p in policies},
                recovered,
                bound,
            )
        )
        if progress:
            progress(n + 1, len(cuts))
    return AllocationResult(
        results,
        policies,
        workloads,
        jobs_per_workload,
        seed,
        size_spread,
        float(uncapped.sum(axis=1).mean()),
        notes,
    )


def jobs_from_curves(
    curves: list[JobCurve], results: list[PfiResult], predicted: np.ndarray | None = None
) -> list[AllocJob]:
    """Allocation inputs: each curve's per-cap means, ascending in power, with its PFI."""
    out = []
    for i, (curve, result) in enumerate(zip(curves, results, strict=True)):
        points = sorted(curve.points(), key=lambda p: (p.power_w, p.tokens_per_s))
        out.append(
            AllocJob(
                curve.job,
                np.array([p.power_w for p in points]),
                np.array([p.tokens_per_s for p in points]),
                result.p_max_w,
                result.t_max,
                result.pfi,
                None if predicted is None else float(predicted[i]),
            )
        )
    return out
