"""The ``bloat plan`` document, and reading one back (by ``bloat run`` and ``report
--bloat``): every shape, size and number checked before it is used, so that a tampered or
truncated plan is one line naming the file and the field, never an internal error, an
all-null result or gigabytes allocated for a DAG it declares."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from powerkit.bloat.schedule import (
    MAX_COMPUTATIONS,
    MAX_IDLE_W,
    MAX_MICROBATCHES,
    MAX_POINTS,
    MAX_STAGES,
    SCHEDULES,
)
from powerkit.core.documents import Document, from_plain
from powerkit.core.errors import BadInputError, option
from powerkit.core.jsonable import OMIT_NONE
from powerkit.core.tables import Column

if TYPE_CHECKING:
    from powerkit.bloat.planner import PlanResult

__all__ = [
    "Bloat",
    "BloatPlan",
    "Computation",
    "PlanPoint",
    "StragglerBloat",
    "check_plan_doc",
    "chosen_point",
    "frontier_columns",
    "plan_document",
]

#: the largest SM clock a plan may name (its idle power and frontier points: schedule.py)
_MAX_MHZ = 10_000.0


class _Checker:
    def fail(self, where: str, what: str) -> BadInputError:
        return BadInputError(f"{where}: {what}")

    def field(self, doc: Any, key: str, where: str) -> Any:
        if not isinstance(doc, dict) or key not in doc:
            raise self.fail(where, f"no {key!r}")
        return doc[key]

    def number(
        self, value: Any, where: str, lo: float = 0.0, hi: float = math.inf, *, strict: bool = False
    ) -> float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if (
            not ok
            or not math.isfinite(value)
            or value < lo
            or value > hi
            or (strict and value <= lo)
        ):
            bound = f"{'more than' if strict else 'at least'} {lo:g}" + (
                f" and at most {hi:g}" if math.isfinite(hi) else ""
            )
            raise self.fail(where, f"{value!r} is not a finite number {bound}")
        return float(value)

    def integer(self, value: Any, where: str, lo: int, hi: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise self.fail(where, f"{value!r} is not a whole number from {lo} to {hi}")
        return value

    def numbers(
        self,
        value: Any,
        where: str,
        length: int,
        lo: float = 0.0,
        hi: float = math.inf,
        *,
        strict: bool = False,
    ) -> None:
        if not isinstance(value, list) or len(value) != length:
            size = len(value) if isinstance(value, list) else type(value).__name__
            raise self.fail(where, f"expected a list of {length} numbers, got {size}")
        for k, x in enumerate(value):
            self.number(x, f"{where}[{k}]", lo, hi, strict=strict)

    def point(self, p: Any, where: str, stages: int, size: int) -> None:
        self.number(self.field(p, "time_s", where), f"{where}.time_s", strict=True)
        self.number(self.field(p, "energy_j", where), f"{where}.energy_j", strict=True)
        self.numbers(
            self.field(p, "frequencies", where),
            f"{where}.frequencies",
            size,
            0.0,
            _MAX_MHZ,
            strict=True,
        )
        for key, length in (
            ("stage_busy_s", stages),
            ("stage_energy_j", stages),
            ("start_s", size),
            ("duration_s", size),
        ):
            if key in p:
                self.numbers(p[key], f"{where}.{key}", length)


def check_plan_doc(doc: Any) -> dict[str, Any]:
    """Return ``doc`` when it is a plan document that ``bloat run`` and the report can use
    whole; else a one-line BadInputError naming the first bad field."""
    c = _Checker()
    if not isinstance(doc, dict):
        raise c.fail("document", "not a JSON object")
    stages = c.integer(c.field(doc, "stages", "document"), "stages", 1, MAX_STAGES)
    microbatches = c.integer(
        c.field(doc, "microbatches", "document"), "microbatches", 1, MAX_MICROBATCHES
    )
    size = 2 * stages * microbatches
    if size > MAX_COMPUTATIONS:
        raise c.fail(
            "stages x microbatches", f"{size:,} computations (at most {MAX_COMPUTATIONS:,})"
        )
    schedule = c.field(doc, "schedule", "document")
    if schedule not in SCHEDULES:
        raise c.fail("schedule", f"{schedule!r} is not one of {', '.join(SCHEDULES)}")
    c.number(c.field(doc, "idle_power_w", "document"), "idle_power_w", 0.0, MAX_IDLE_W)
    c.point(c.field(doc, "all_max", "document"), "all_max", stages, size)
    frontier = c.field(doc, "frontier", "document")
    if not isinstance(frontier, list) or not 1 <= len(frontier) <= MAX_POINTS:
        raise c.fail("frontier", f"expected a list of 1 to {MAX_POINTS:,} points")
    for k, p in enumerate(frontier):
        c.point(p, f"frontier[{k}]", stages, size)
    intrinsic = c.field(doc, "intrinsic", "document")
    for key in ("time_s", "baseline_j", "planned_j", "saved_j", "saved_pct"):
        c.number(c.field(intrinsic, key, "intrinsic"), f"intrinsic.{key}", -math.inf)
    extrinsic = c.field(doc, "extrinsic", "document")
    if not isinstance(extrinsic, list) or len(extrinsic) > MAX_POINTS:
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


@dataclass(frozen=True, kw_only=True)
class PlanPoint:
    """One point of a plan: its iteration time and energy (and the bound under it), each
    computation's SM clock, per stage busy time and energy, and (for the all-max point and the
    frontier's first) each computation's start and duration."""

    time_s: float
    energy_j: float
    lower_bound_j: float | None = field(default=None, metadata=OMIT_NONE)
    gap_pct: float | None = field(default=None, metadata=OMIT_NONE)
    frequencies: list[float]
    stage_busy_s: list[float] | None = field(default=None, metadata=OMIT_NONE)
    stage_energy_j: list[float] | None = field(default=None, metadata=OMIT_NONE)
    start_s: list[float] | None = field(default=None, metadata=OMIT_NONE)
    duration_s: list[float] | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class Bloat:
    """The energy a plan saves against all-max clocks for an iteration of ``time_s``."""

    time_s: float
    baseline_j: float
    planned_j: float
    saved_j: float
    saved_pct: float


@dataclass(frozen=True, kw_only=True)
class StragglerBloat(Bloat):
    """Extrinsic bloat: another pipeline ``straggler`` times slower sets the deadline; the
    plan made for it (None: the frontier has none that meets it)."""

    straggler: float
    plan: PlanPoint | None


@dataclass(frozen=True)
class Computation:
    """One computation of the pipeline's DAG."""

    stage: int
    instruction: str
    microbatch: int


@dataclass(frozen=True, kw_only=True)
class BloatPlan(Document):
    """What ``powerkit bloat plan`` reports (and ``--out`` writes; ``bloat run`` and ``report
    --bloat`` read it): the frontier and the intrinsic and extrinsic bloat it removes."""

    COMMAND: ClassVar[str] = "bloat plan"
    NAME: ClassVar[str] = "`bloat plan --out`"

    profile: str = ""
    stages: int
    microbatches: int
    schedule: str
    idle_power_w: float
    method: str = "?"
    all_max: PlanPoint
    frontier: list[PlanPoint]
    intrinsic: Bloat
    extrinsic: list[StragglerBloat]
    computations: list[Computation]

    def body(self) -> dict[str, Any]:
        """The fields; each straggler's ``straggler`` first, as written before."""
        plain = super().body()
        plain["extrinsic"] = [{"straggler": b.pop("straggler"), **b} for b in plain["extrinsic"]]
        return plain

    @classmethod
    def from_body(cls, doc: dict[str, Any]) -> BloatPlan:
        """The plan a document holds: every shape, size and number checked first
        (:func:`check_plan_doc`), so that a tampered plan never sizes a DAG."""
        return from_plain(cls, check_plan_doc(doc), "document")


def frontier_columns(all_max_j: float) -> tuple[Column, ...]:
    """The frontier table of ``bloat plan``, each point against all-max clocks' energy."""
    return (
        Column("time s", "time_s", ".4f"),
        Column("energy J", "energy_j", ",.1f"),
        Column("vs all-max", lambda p: 100 * (p.energy_j / all_max_j - 1), "+.1f", "%"),
        Column("gap to bound", "gap_pct", ".2f", "%"),
    )


def plan_document(result: PlanResult) -> BloatPlan:
    """The ``bloat plan`` document of a planner's result."""
    dag = result.dag

    def point(p: Any, timeline: bool = False) -> PlanPoint:
        busy, energy = result.stage_energy(p)
        start, duration = result.schedule_of(p)[:2] if timeline else (None, None)
        return PlanPoint(
            time_s=p.time_s,
            energy_j=p.energy_j,
            lower_bound_j=p.lower_bound_j,
            gap_pct=p.gap_pct if p.lower_bound_j is not None else None,
            frequencies=result.frequencies(p).tolist(),
            stage_busy_s=busy.tolist(),
            stage_energy_j=energy.tolist(),
            start_s=None if start is None else start.tolist(),
            duration_s=None if duration is None else duration.tolist(),
        )

    i = result.intrinsic
    return BloatPlan(
        profile=result.profile.origin,
        stages=dag.stages,
        microbatches=dag.microbatches,
        schedule=dag.schedule,
        idle_power_w=result.idle_power_w,
        method=result.method,
        all_max=point(result.all_max, timeline=True),
        frontier=[point(p, timeline=k == 0) for k, p in enumerate(result.frontier)],
        intrinsic=Bloat(i.deadline_s, i.baseline_j, i.planned_j, i.saved_j, i.saved_pct),
        extrinsic=[
            StragglerBloat(
                straggler=b.straggler,
                time_s=b.deadline_s,
                baseline_j=b.baseline_j,
                planned_j=b.planned_j,
                saved_j=b.saved_j,
                saved_pct=b.saved_pct,
                plan=None if b.plan is None else point(b.plan),
            )
            for b in result.extrinsic
        ],
        computations=[
            Computation(int(s), str(i), int(m))
            for s, i, m in zip(dag.stage, dag.instruction, dag.microbatch, strict=True)
        ],
    )


def chosen_point(
    plan: BloatPlan, point: int | None, straggler: float
) -> tuple[int | None, PlanPoint]:
    """(frontier index or None, the plan point) that ``bloat run`` measures: the plan for
    this straggler's deadline where the planner made one (with a straggler, a slower but
    cheaper plan can be best), else the frontier point at that deadline, or ``--point``."""
    if point is None:
        chosen = next(
            (
                b.plan
                for b in plan.extrinsic
                if b.plan is not None and abs(b.straggler - straggler) < 1e-9
            ),
            None,
        )
        if chosen is not None:
            return None, chosen
        deadline = straggler * plan.all_max.time_s
        point = max(k for k, p in enumerate(plan.frontier) if p.time_s <= deadline + 1e-12)
    if point >= len(plan.frontier):
        raise BadInputError(
            f"{option('point')} {point}: the plan has {len(plan.frontier)} points (0-based)"
        )
    return point, plan.frontier[point]
