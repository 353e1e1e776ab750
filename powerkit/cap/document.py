"""What ``powerkit cap`` reports: a run per limit and policy (CapRun), each job's cost, the
timeline its page draws, and the CapReport document."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from powerkit.analysis.members import FleetMember
from powerkit.cap.breaker import BreakerResult
from powerkit.cap.events import EventResult
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError
from powerkit.core.jsonable import OMIT_NONE
from powerkit.core.tables import Column
from powerkit.core.units import format_duration, format_span

__all__ = ["CAP_COLUMNS", "CapReport", "CapRun", "JobCost", "Timeline"]


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
class Timeline:
    """A run over time for its page, in spans of ``span_s``: the highest power of the
    uncapped and the capped fleet in each span, the lowest limit, the mean share of GPUs under
    a cap, and each job's mean kept throughput share (1: not slowed)."""

    span_s: float
    uncapped_w: np.ndarray
    capped_w: np.ndarray
    limit_w: np.ndarray
    capped_gpus: np.ndarray
    kept: dict[str, np.ndarray]


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
    breaker: BreakerResult | None = field(default=None, metadata=OMIT_NONE)  # the capped fleet's
    breaker_uncapped: BreakerResult | None = field(default=None, metadata=OMIT_NONE)
    timeline: Timeline | None = field(default=None, repr=False, metadata={"doc": False})


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
    members: list[FleetMember]
    assigned: dict[str, str]  # member (trace) -> job
    runs: list[CapRun]
    warnings: list[str] = field(default_factory=list)
    limit_csv: str | None = field(default=None, metadata=OMIT_NONE)  # the limit schedule
    breaker: str | None = field(default=None, metadata=OMIT_NONE)  # the trip curve's name

    def check(self) -> None:
        """Refuse figures ``cap`` never writes: a nameplate or limit that is not a positive
        number, a share outside 0-1 (what ``econ --cap`` would price as -500 % more work)."""
        if not (
            self.gpus > 0 and math.isfinite(self.fleet_nameplate_w) and self.fleet_nameplate_w > 0
        ):
            raise BadInputError(
                f"fleet_nameplate_w {self.fleet_nameplate_w!r} with {self.gpus} GPUs"
            )
        for n, run in enumerate(self.runs):
            if not (math.isfinite(run.limit_w) and run.limit_w > 0):
                raise BadInputError(f"runs[{n}].limit_w {run.limit_w!r} is not a positive number")
            shares = {"capped_share": run.capped_share, "over_limit_share": run.over_limit_share}
            shares["lost_share"] = 0.0 if run.lost_share is None else run.lost_share
            for name, value in shares.items():
                if not 0 <= value <= 1:
                    raise BadInputError(f"runs[{n}].{name} {value!r} is not a share from 0 to 1")

    def summary(self) -> str:
        """The fleet and how it was replayed, in a line."""
        return (
            f"fleet: {self.gpus} GPUs, {self.fleet_nameplate_w / 1e3:,.1f} kW nameplate, "
            f"{self.compose}, {format_span(self.horizon_s)} on a {format_duration(self.grid_s)} "
            f"grid; decisions every {format_duration(self.period_s)}, acting after "
            f"{format_duration(self.latency_s)}"
        )
