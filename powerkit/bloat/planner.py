"""The iteration time-energy frontier of a pipeline and the energy bloat it removes.

Model (docs/bloat.md): every computation of the schedule's DAG runs at one of its profile's
frequencies; the iteration time T is the DAG's makespan; the iteration energy at a length
L >= T is Σ computation energy + P_idle × Σ over stages of (L − busy time). With
g = e − P_idle·t per computation this is Σ g + S·P_idle·L, so for a deadline D the cheapest
plan minimises Σ g subject to makespan <= D.

That is a discrete time-cost trade-off on a DAG, solved per deadline as a mixed-integer
program (binary choice per computation and option, a start time per computation, one row per
dependency) by HiGHS through ``scipy.optimize.milp``:

* ``exact``: the MILP itself, on each computation's non-dominated options (slower and
  costlier options can never help). Optimal; for small pipelines.
* ``relaxed``: its LP relaxation on the lower convex hull of each computation's (t, g)
  options, where an optimum mixes at most two neighbouring options — running part of the
  computation at each frequency, the continuous model Perseus also plans with. Each computation
  is then rounded to the *faster* of the options it uses, so the deadline still holds; the LP
  optimum is a lower bound, and the gap between the two is reported per point.
* ``auto`` (default): exact while the MILP has at most 300 binaries, relaxed beyond.

The frontier runs from the all-max-clock makespan (the fastest iteration) to the makespan of
the unconstrained cheapest plan, over ``points`` deadlines; points another point dominates are
dropped. Intrinsic bloat: all-max energy minus the cheapest plan at the all-max time. Extrinsic
bloat for a straggler factor s: the same at deadline s × the all-max time, both measured over
the straggler's iteration length (the fast pipelines wait, idle, until it).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from powerkit.bloat.profile import Choices, Profile
from powerkit.bloat.schedule import MAX_IDLE_W, MAX_POINTS, Dag, build_dag
from powerkit.core.errors import BadInputError, option

__all__ = ["EXACT_LIMIT", "PlanPoint", "PlanResult", "plan"]

EXACT_LIMIT = 300  # binaries up to which ``auto`` solves the MILP itself


@dataclass
class PlanPoint:
    """One plan: its iteration time and energy, and each computation's option index."""

    time_s: float
    energy_j: float
    choice: np.ndarray  # (N,) index into the computation's options (0 = fastest)
    lower_bound_j: float | None = None  # relaxed: the LP's energy at this deadline
    deadline_s: float = 0.0

    @property
    def gap_pct(self) -> float | None:
        if self.lower_bound_j is None or self.lower_bound_j <= 0:
            return None
        return 100 * (self.energy_j - self.lower_bound_j) / self.lower_bound_j


@dataclass
class Bloat:
    straggler: float
    deadline_s: float
    baseline_j: float  # all-max clocks, idle until the deadline
    planned_j: float
    saved_j: float
    saved_pct: float
    plan: PlanPoint | None = None  # the cheapest plan for this deadline


@dataclass
class PlanResult:
    """What ``bloat plan`` finds."""

    dag: Dag
    profile: Profile
    idle_power_w: float
    method: str
    all_max: PlanPoint
    frontier: list[PlanPoint]
    intrinsic: Bloat
    extrinsic: list[Bloat] = field(default_factory=list)

    def frequencies(self, point: PlanPoint) -> np.ndarray:
        """The SM frequency (MHz) of every computation in ``point``."""
        return np.array([self._options(n).frequency[point.choice[n]] for n in range(self.dag.size)])

    def schedule_of(self, point: PlanPoint) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start s, duration s, energy J) of every computation of ``point``, each starting
        as early as its dependencies allow."""
        opts = [self._options(n) for n in range(self.dag.size)]
        duration = np.array([o.time[point.choice[n]] for n, o in enumerate(opts)])
        energy = np.array([o.energy[point.choice[n]] for n, o in enumerate(opts)])
        return self.dag.finish_times(duration) - duration, duration, energy

    def stage_energy(self, point: PlanPoint) -> tuple[np.ndarray, np.ndarray]:
        """(busy s, energy J) per stage over the point's iteration: its computations' energy
        plus idle power while the stage waits."""
        _, duration, energy = self.schedule_of(point)
        stages = self.dag.stages
        busy = np.bincount(self.dag.stage, weights=duration, minlength=stages)
        compute = np.bincount(self.dag.stage, weights=energy, minlength=stages)
        return busy, compute + self.idle_power_w * (point.time_s - busy)

    def _options(self, n: int) -> Choices:
        return self.profile.options[(int(self.dag.stage[n]), str(self.dag.instruction[n]))]


class _Model:
    """The per-computation options and the program every deadline shares: only the bound of
    the last computations' rows (finish <= deadline) changes from one deadline to the next."""

    def __init__(self, dag: Dag, profile: Profile, idle_w: float, hull: bool) -> None:
        self.dag = dag
        self.keep: list[np.ndarray] = []  # option indices kept per computation
        self.t: list[np.ndarray] = []
        self.g: list[np.ndarray] = []
        cache: dict[tuple[int, str], np.ndarray] = {}
        for n in range(dag.size):
            key = (int(dag.stage[n]), str(dag.instruction[n]))
            opts = profile.options[key]
            g = opts.energy - idle_w * opts.time
            if key not in cache:
                cache[key] = _hull(opts.time, g) if hull else _frontier(opts.time, g)
            keep = cache[key]
            self.keep.append(keep)
            self.t.append(opts.time[keep])
            self.g.append(g[keep])
        self.offset = np.concatenate(([0], np.cumsum([k.size for k in self.keep])))
        self.nx = int(self.offset[-1])
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        lo: list[float] = []
        hi: list[float] = []

        def options(n: int) -> list[int]:
            return list(range(self.offset[n], self.offset[n + 1]))

        for n in range(dag.size):  # one option per computation
            rows += [len(lo)] * len(options(n))
            cols += options(n)
            vals += [1.0] * len(options(n))
            lo.append(1.0)
            hi.append(1.0)
        for u, v in dag.edges.tolist():  # start(v) >= start(u) + duration(u)
            rows += [len(lo)] * (2 + len(options(u)))
            cols += [self.nx + v, self.nx + u, *options(u)]
            vals += [1.0, -1.0, *(-self.t[u]).tolist()]
            lo.append(0.0)
            hi.append(np.inf)
        has_succ = np.zeros(dag.size, dtype=bool)
        has_succ[dag.edges[:, 0]] = True
        self.deadline_rows = np.arange(len(lo), len(lo) + int((~has_succ).sum()))
        for n in np.flatnonzero(~has_succ).tolist():  # start(n) + duration(n) <= deadline
            rows += [len(lo)] * (1 + len(options(n)))
            cols += [self.nx + n, *options(n)]
            vals += [1.0, *self.t[n].tolist()]
            lo.append(-np.inf)
            hi.append(np.inf)  # set per deadline
        import scipy.sparse as sp  # (SciPy is loaded where used: its import costs every command)
        from scipy.optimize import Bounds

        nvar = self.nx + dag.size
        self.matrix = sp.csr_array((vals, (rows, cols)), shape=(len(lo), nvar))
        self.lo = np.array(lo)
        self.hi = np.array(hi)
        self.cost = np.concatenate([np.concatenate(self.g), np.zeros(dag.size)])
        self.bounds = Bounds(
            np.zeros(nvar), np.concatenate([np.ones(self.nx), np.full(dag.size, np.inf)])
        )

    def solve(self, deadline: float, integral: bool) -> tuple[np.ndarray, float]:
        """Return (option index per computation, into ``keep``; the objective Σ g)."""
        hi = self.hi.copy()
        hi[self.deadline_rows] = deadline
        from scipy.optimize import LinearConstraint, milp

        integrality = np.concatenate([np.full(self.nx, int(integral)), np.zeros(self.dag.size)])
        with _solver_quiet():
            res = milp(
                self.cost,
                constraints=LinearConstraint(self.matrix, self.lo, hi),
                integrality=integrality,
                bounds=self.bounds,
                options={"mip_rel_gap": 1e-9},
            )
        if res.x is None:  # pragma: no cover - every deadline >= the fastest time is feasible
            raise BadInputError(f"no plan meets the deadline {deadline:.6g} s ({res.message})")
        x = res.x[: self.nx]
        choice = np.empty(self.dag.size, dtype=np.int64)
        for n in range(self.dag.size):
            share = x[self.offset[n] : self.offset[n + 1]]
            used = np.flatnonzero(share > 1e-7)
            # options are fastest first: the fastest one used keeps the deadline
            choice[n] = used[0] if used.size else int(np.argmax(share))
        return choice, float(res.fun)


@contextlib.contextmanager
def _solver_quiet() -> Iterator[None]:
    """HiGHS prints solver notes straight to file descriptor 1: keep them off stdout (which may
    carry a --json document)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _frontier(t: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Indices of the options no other option beats on both time and g, fastest first."""
    keep: list[int] = []
    best = np.inf
    for k in np.lexsort((g, t)):
        if not keep or g[k] < best - 1e-12 * max(1.0, abs(best)):
            keep.append(int(k))
            best = g[k]
    return np.array(keep, dtype=np.int64)


def _hull(t: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Indices of the lower convex hull of the non-dominated (t, g) points, fastest first."""
    front = _frontier(t, g)
    hull: list[int] = []
    for k in front.tolist():
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (t[b] - t[a]) * (g[k] - g[a]) - (g[b] - g[a]) * (t[k] - t[a])
            if cross <= 0:
                hull.pop()
            else:
                break
        hull.append(k)
    return np.array(hull, dtype=np.int64)


def plan(
    profile: Profile,
    *,
    stages: int,
    microbatches: int,
    schedule: str = "1f1b",
    idle_power_w: float = 75.0,
    stragglers: tuple[float, ...] = (1.1, 1.2, 1.5),
    points: int = 20,
    method: str = "auto",
    on_point: Callable[[int, int], None] | None = None,
) -> PlanResult:
    """Return the frontier and the bloat of ``profile`` on the schedule's DAG."""
    if profile.stages != stages:
        raise BadInputError(f"{profile.origin}: profiles {profile.stages} stage(s), not {stages}")
    if not 0 <= idle_power_w <= MAX_IDLE_W:
        raise BadInputError(
            f"{option('idle-power')} {idle_power_w:g} W: from 0 to {MAX_IDLE_W:,.0f} W"
        )
    if not 2 <= points <= MAX_POINTS:
        raise BadInputError(f"{option('points')} {points}: from 2 to {MAX_POINTS:,}")
    if any(not s >= 1 for s in stragglers):
        raise BadInputError(f"{option('straggler')} factors must be at least 1 (1.2 = 20 % slower)")
    if method not in ("auto", "exact", "relaxed"):
        raise BadInputError(f"{option('method')} {method!r}: auto, exact or relaxed")
    dag = build_dag(stages, microbatches, schedule)
    exact_model = _Model(dag, profile, idle_power_w, hull=False)
    if method == "auto":
        method = "exact" if exact_model.nx <= EXACT_LIMIT else "relaxed"
    model = exact_model if method == "exact" else _Model(dag, profile, idle_power_w, hull=True)
    idle_total = stages * idle_power_w

    def evaluate(choice: np.ndarray, deadline: float, bound: float | None = None) -> PlanPoint:
        durations = np.array([model.t[n][choice[n]] for n in range(dag.size)])
        g = float(sum(model.g[n][choice[n]] for n in range(dag.size)))
        makespan = dag.makespan(durations)
        full = np.array([model.keep[n][choice[n]] for n in range(dag.size)])
        lower = None if bound is None else bound + idle_total * makespan
        return PlanPoint(makespan, g + idle_total * makespan, full, lower, deadline)

    # all-max clocks: every computation at its profile's highest frequency (option 0)
    opts = [profile.options[(int(dag.stage[n]), str(dag.instruction[n]))] for n in range(dag.size)]
    max_durations = np.array([o.time[0] for o in opts])
    t_min = dag.makespan(max_durations)
    all_max_g = float(sum(o.energy[0] - idle_power_w * o.time[0] for o in opts))
    all_max = PlanPoint(
        t_min, all_max_g + idle_total * t_min, np.zeros(dag.size, dtype=np.int64), None, t_min
    )
    cheapest = np.array([int(np.argmin(model.g[n])) for n in range(dag.size)])
    t_star = max(t_min, evaluate(cheapest, 0.0).time_s)
    deadlines = np.linspace(t_min, t_star, points)
    solved: dict[float, PlanPoint] = {}

    def best(deadline: float) -> PlanPoint:
        if deadline not in solved:
            choice, objective = model.solve(deadline, integral=method == "exact")
            solved[deadline] = evaluate(choice, deadline, None if method == "exact" else objective)
        return solved[deadline]

    found = []
    for k, deadline in enumerate(deadlines.tolist(), start=1):
        found.append(best(deadline))
        if on_point:
            on_point(k, points)
    frontier: list[PlanPoint] = []
    for p in sorted(found, key=lambda p: (p.time_s, p.energy_j)):
        if not frontier or p.energy_j < frontier[-1].energy_j - 1e-9 * abs(p.energy_j):
            frontier.append(p)

    def bloat(straggler: float) -> Bloat:
        deadline = straggler * t_min
        chosen = best(min(deadline, t_star))
        planned_g = chosen.energy_j - idle_total * chosen.time_s
        baseline = all_max_g + idle_total * deadline
        saved = all_max_g - planned_g
        return Bloat(
            straggler,
            deadline,
            baseline,
            planned_g + idle_total * deadline,
            saved,
            100 * saved / baseline if baseline > 0 else 0.0,
            chosen,
        )

    return PlanResult(
        dag,
        profile,
        idle_power_w,
        method,
        all_max,
        frontier,
        bloat(1.0),
        [bloat(s) for s in stragglers],
    )
