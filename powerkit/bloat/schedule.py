"""The computation DAG of one pipeline-parallel training iteration (1F1B or GPipe).

Nodes are the forward (F) and backward (B) computations of every stage for every microbatch.
Edges: a stage runs its computations one after another in the schedule's order; F(s, m) needs
F(s-1, m); B(s, m) needs B(s+1, m); the last stage's B(S-1, m) needs its F(S-1, m).

* **1F1B** (PipeDream-Flush, as in Megatron-LM): stage s runs min(S-s-1, M) warm-up forwards,
  then alternates one forward and one backward, then the remaining backwards.
* **GPipe**: every stage runs all M forwards, then all M backwards (microbatch order).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from powerkit.core.errors import BadInputError, option

__all__ = [
    "MAX_COMPUTATIONS",
    "MAX_IDLE_W",
    "MAX_MICROBATCHES",
    "MAX_POINTS",
    "MAX_STAGES",
    "SCHEDULES",
    "Dag",
    "build_dag",
]

SCHEDULES = ("1f1b", "gpipe")
#: the largest pipeline a plan may describe: stages, microbatches and computations (2·S·M);
#: far past any real pipeline, and what keeps a DAG (and its planner) within memory
MAX_STAGES = 256
MAX_MICROBATCHES = 4096
MAX_COMPUTATIONS = 65_536
#: the largest idle power and number of frontier points a plan may name (the planner takes
#: no more, so that a plan it writes can be read back)
MAX_IDLE_W = 10_000.0
MAX_POINTS = 10_000


@dataclass
class Dag:
    """Nodes in a topological order, with each node's stage, instruction and microbatch."""

    stages: int
    microbatches: int
    schedule: str
    stage: np.ndarray  # (N,) int
    instruction: np.ndarray  # (N,) "forward" / "backward"
    microbatch: np.ndarray  # (N,) int
    edges: np.ndarray  # (E, 2) int: u before v, u < v (topological numbering)

    @property
    def size(self) -> int:
        return int(self.stage.size)

    def makespan(self, durations: np.ndarray) -> float:
        """The iteration time: the longest path with these node durations (s)."""
        return float(self.finish_times(durations).max())

    def finish_times(self, durations: np.ndarray) -> np.ndarray:
        """Earliest finish time of every node (nodes are numbered in topological order)."""
        start = np.zeros(self.size)
        preds = self._preds()
        finish = np.empty(self.size)
        for v in range(self.size):
            p = preds[v]
            start[v] = finish[p].max() if p.size else 0.0
            finish[v] = start[v] + durations[v]
        return finish

    def _preds(self) -> list[np.ndarray]:
        cached: list[np.ndarray] | None = getattr(self, "_pred_cache", None)
        if cached is None:
            order = np.argsort(self.edges[:, 1], kind="stable")
            by_v = self.edges[order]
            cuts = np.searchsorted(by_v[:, 1], np.arange(self.size + 1))
            cached = [by_v[cuts[v] : cuts[v + 1], 0] for v in range(self.size)]
            self._pred_cache = cached
        return cached


def _stage_order(s: int, stages: int, microbatches: int, schedule: str) -> list[tuple[str, int]]:
    if schedule == "gpipe":
        return [("F", m) for m in range(microbatches)] + [("B", m) for m in range(microbatches)]
    warmup = min(stages - s - 1, microbatches)
    seq = [("F", m) for m in range(warmup)]
    for i in range(microbatches - warmup):
        seq += [("F", warmup + i), ("B", i)]
    seq += [("B", m) for m in range(microbatches - warmup, microbatches)]
    return seq


def build_dag(stages: int, microbatches: int, schedule: str = "1f1b") -> Dag:
    """Return the DAG of one iteration, nodes numbered in a topological order."""
    if schedule not in SCHEDULES:
        raise BadInputError(f"{option('schedule')} {schedule!r}: one of {', '.join(SCHEDULES)}")
    if stages < 1 or microbatches < 1:
        raise BadInputError(f"{option('stages')} and {option('microbatches')} must be at least 1")
    if stages > MAX_STAGES or microbatches > MAX_MICROBATCHES:
        raise BadInputError(
            f"{option('stages')} {stages} / {option('microbatches')} {microbatches}: at most "
            f"{MAX_STAGES} stages "
            f"and {MAX_MICROBATCHES} microbatches"
        )
    if 2 * stages * microbatches > MAX_COMPUTATIONS:
        raise BadInputError(
            f"{option('stages')} {stages} x {option('microbatches')} {microbatches}: "
            f"{2 * stages * microbatches:,} "
            f"computations, more than the {MAX_COMPUTATIONS:,} a plan may hold"
        )
    orders = [_stage_order(s, stages, microbatches, schedule) for s in range(stages)]
    edges: list[tuple[tuple[int, str, int], tuple[int, str, int]]] = []
    for s, seq in enumerate(orders):
        edges += [((s, *a), (s, *b)) for a, b in itertools.pairwise(seq)]
        for m in range(microbatches):
            if s > 0:
                edges.append(((s - 1, "F", m), (s, "F", m)))
            if s < stages - 1:
                edges.append(((s + 1, "B", m), (s, "B", m)))
    for m in range(microbatches):
        edges.append(((stages - 1, "F", m), (stages - 1, "B", m)))
    # Kahn's algorithm for a topological numbering
    nodes = [(s, *op) for s, seq in enumerate(orders) for op in seq]
    succ: dict[tuple[int, str, int], list[tuple[int, str, int]]] = {n: [] for n in nodes}
    indeg = dict.fromkeys(nodes, 0)
    for u, v in edges:
        succ[u].append(v)
        indeg[v] += 1
    ready = [n for n in nodes if indeg[n] == 0]
    number: dict[tuple[int, str, int], int] = {}
    while ready:
        u = ready.pop()
        number[u] = len(number)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    if len(number) != len(nodes):  # pragma: no cover - the schedules above are acyclic
        raise AssertionError("the schedule has a cycle")
    by_number = sorted(number, key=number.__getitem__)
    return Dag(
        stages,
        microbatches,
        schedule,
        np.array([n[0] for n in by_number]),
        np.array(["forward" if n[1] == "F" else "backward" for n in by_number]),
        np.array([n[2] for n in by_number]),
        np.array([(number[u], number[v]) for u, v in edges], dtype=np.int64),
    )
