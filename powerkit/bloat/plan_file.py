"""A ``bloat plan --out`` document read back (by ``bloat run`` and ``report --bloat``): every
shape, size and number checked before it is used, so that a tampered or truncated plan is one
line naming the file and the field, never an internal error, an all-null result or gigabytes
allocated for a DAG it declares."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from powerkit.bloat.schedule import MAX_COMPUTATIONS, MAX_MICROBATCHES, MAX_STAGES, SCHEDULES
from powerkit.errors import BadInputError

if TYPE_CHECKING:
    from powerkit.bloat.planner import PlanResult

__all__ = ["check_plan_doc", "chosen_point", "plan_doc"]

#: the largest SM clock, idle power and number of frontier points a plan may name
_MAX_MHZ = 10_000.0
_MAX_IDLE_W = 10_000.0
_MAX_POINTS = 10_000


class _Checker:
    def __init__(self, path: str | Path) -> None:
        self.path = path

    def fail(self, where: str, what: str) -> BadInputError:
        return BadInputError(f"{self.path}: not a `bloat plan --out` document ({where}: {what})")

    def field(self, doc: Any, key: str, where: str) -> Any:
        if not isinstance(doc, dict) or key not in doc:
            raise self.fail(where, f"no {key!r}")
        return doc[key]

    def number(self, value: Any, where: str, lo: float = 0.0, hi: float = math.inf,
               *, strict: bool = False) -> float:  # fmt: skip
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < lo or value > hi or (
                strict and value <= lo):  # fmt: skip
            bound = f"{'more than' if strict else 'at least'} {lo:g}" + (
                f" and at most {hi:g}" if math.isfinite(hi) else "")  # fmt: skip
            raise self.fail(where, f"{value!r} is not a finite number {bound}")
        return float(value)

    def integer(self, value: Any, where: str, lo: int, hi: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise self.fail(where, f"{value!r} is not a whole number from {lo} to {hi}")
        return value

    def numbers(self, value: Any, where: str, length: int, lo: float = 0.0,
                hi: float = math.inf, *, strict: bool = False) -> None:  # fmt: skip
        if not isinstance(value, list) or len(value) != length:
            size = len(value) if isinstance(value, list) else type(value).__name__
            raise self.fail(where, f"expected a list of {length} numbers, got {size}")
        for k, x in enumerate(value):
            self.number(x, f"{where}[{k}]", lo, hi, strict=strict)

    def point(self, p: Any, where: str, stages: int, size: int) -> None:
        self.number(self.field(p, "time_s", where), f"{where}.time_s", strict=True)
        self.number(self.field(p, "energy_j", where), f"{where}.energy_j", strict=True)
        self.numbers(self.field(p, "frequencies", where), f"{where}.frequencies", size,
                     0.0, _MAX_MHZ, strict=True)  # fmt: skip
        for key, length in (("stage_busy_s", stages), ("stage_energy_j", stages),
                            ("start_s", size), ("duration_s", size)):  # fmt: skip
            if key in p:
                self.numbers(p[key], f"{where}.{key}", length)


def check_plan_doc(doc: Any, path: str | Path) -> dict[str, Any]:
    """Return ``doc`` when it is a plan document that ``bloat run`` and the report can use
    whole; else a one-line BadInputError naming the file and the first bad field."""
    c = _Checker(path)
    if not isinstance(doc, dict):
        raise c.fail("document", "not a JSON object")
    stages = c.integer(c.field(doc, "stages", "document"), "stages", 1, MAX_STAGES)
    microbatches = c.integer(c.field(doc, "microbatches", "document"), "microbatches", 1,
                             MAX_MICROBATCHES)  # fmt: skip
    size = 2 * stages * microbatches
    if size > MAX_COMPUTATIONS:
        raise c.fail("stages x microbatches", f"{size:,} computations (at most "
                                               f"{MAX_COMPUTATIONS:,})")  # fmt: skip
    schedule = c.field(doc, "schedule", "document")
    if schedule not in SCHEDULES:
        raise c.fail("schedule", f"{schedule!r} is not one of {', '.join(SCHEDULES)}")
    c.number(c.field(doc, "idle_power_w", "document"), "idle_power_w", 0.0, _MAX_IDLE_W)
    c.point(c.field(doc, "all_max", "document"), "all_max", stages, size)
    frontier = c.field(doc, "frontier", "document")
    if not isinstance(frontier, list) or not 1 <= len(frontier) <= _MAX_POINTS:
        raise c.fail("frontier", f"expected a list of 1 to {_MAX_POINTS:,} points")
    for k, p in enumerate(frontier):
        c.point(p, f"frontier[{k}]", stages, size)
    intrinsic = c.field(doc, "intrinsic", "document")
    for key in ("time_s", "baseline_j", "planned_j", "saved_j", "saved_pct"):
        c.number(c.field(intrinsic, key, "intrinsic"), f"intrinsic.{key}", -math.inf)
    extrinsic = c.field(doc, "extrinsic", "document")
    if not isinstance(extrinsic, list) or len(extrinsic) > _MAX_POINTS:
        raise c.fail("extrinsic", "expected a list of straggler results")
    for k, b in enumerate(extrinsic):
        where = f"extrinsic[{k}]"
        c.number(c.field(b, "straggler", where), f"{where}.straggler", 1.0, 1000.0)
        for key in ("time_s", "baseline_j", "planned_j", "saved_j", "saved_pct"):
            c.number(c.field(b, key, where), f"{where}.{key}", -math.inf)
        if c.field(b, "plan", where) is not None:
            c.point(b["plan"], f"{where}.plan", stages, size)
    computations = c.field(doc, "computations", "document")
    if not isinstance(computations, list) or len(computations) != size:
        raise c.fail("computations", f"expected {size} computations")
    for k, item in enumerate(computations):
        where = f"computations[{k}]"
        c.integer(c.field(item, "stage", where), f"{where}.stage", 0, stages - 1)
        c.integer(c.field(item, "microbatch", where), f"{where}.microbatch", 0, microbatches - 1)
        if c.field(item, "instruction", where) not in ("forward", "backward"):
            raise c.fail(f"{where}.instruction", "not forward or backward")
    return doc


def plan_doc(result: PlanResult) -> dict[str, Any]:
    """The ``bloat plan --json`` document (also what ``--out`` writes)."""
    dag = result.dag

    def point(p: Any, timeline: bool = False) -> dict[str, Any]:
        doc: dict[str, Any] = {"time_s": p.time_s, "energy_j": p.energy_j}
        if p.lower_bound_j is not None:
            doc["lower_bound_j"] = p.lower_bound_j
            doc["gap_pct"] = p.gap_pct
        doc["frequencies"] = result.frequencies(p).tolist()
        busy, energy = result.stage_energy(p)
        doc["stage_busy_s"], doc["stage_energy_j"] = busy.tolist(), energy.tolist()
        if timeline:
            start, duration, _ = result.schedule_of(p)
            doc["start_s"], doc["duration_s"] = start.tolist(), duration.tolist()
        return doc

    return {
        "profile": result.profile.origin,
        "stages": dag.stages,
        "microbatches": dag.microbatches,
        "schedule": dag.schedule,
        "idle_power_w": result.idle_power_w,
        "method": result.method,
        "all_max": point(result.all_max, timeline=True),
        "frontier": [point(p, timeline=k == 0) for k, p in enumerate(result.frontier)],
        "intrinsic": {
            "time_s": result.intrinsic.deadline_s,
            "baseline_j": result.intrinsic.baseline_j,
            "planned_j": result.intrinsic.planned_j,
            "saved_j": result.intrinsic.saved_j,
            "saved_pct": result.intrinsic.saved_pct,
        },
        "extrinsic": [
            {
                "straggler": b.straggler,
                "time_s": b.deadline_s,
                "baseline_j": b.baseline_j,
                "planned_j": b.planned_j,
                "saved_j": b.saved_j,
                "saved_pct": b.saved_pct,
                "plan": None if b.plan is None else point(b.plan),
            }
            for b in result.extrinsic
        ],
        "computations": [
            {"stage": int(s), "instruction": str(i), "microbatch": int(m)}
            for s, i, m in zip(dag.stage, dag.instruction, dag.microbatch, strict=True)
        ],
    }


def chosen_point(
    doc: dict[str, Any], plan_path: Path, point: int | None, straggler: float
) -> tuple[int | None, dict[str, Any], int]:
    """(frontier index or None, the plan point, stages) that ``bloat run`` measures: the plan
    for this straggler's deadline where the planner made one (with a straggler, a slower but
    cheaper plan can be best), else the frontier point at that deadline, or ``--point``."""
    try:
        frontier, stages = doc["frontier"], int(doc["stages"])
        all_max_s = float(doc["all_max"]["time_s"])
    except (KeyError, TypeError, ValueError):
        raise BadInputError(f"{plan_path}: not a `bloat plan --out` document") from None
    if point is None:
        chosen = next(
            (b["plan"] for b in doc.get("extrinsic", [])
             if b.get("plan") and abs(b["straggler"] - straggler) < 1e-9),
            None,
        )  # fmt: skip
        if chosen is not None:
            return None, chosen, stages
        deadline = straggler * all_max_s
        point = max(k for k, p in enumerate(frontier) if p["time_s"] <= deadline + 1e-12)
    if point >= len(frontier):
        raise BadInputError(f"--point {point}: the plan has {len(frontier)} points (0-based)")
    return point, frontier[point], stages
