"""What ``powerkit jobs`` is given and what it reports: its options, a row per job, the sums
``--by`` asks for, and the terminal's tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.core.documents import Document
from powerkit.core.tables import Column
from powerkit.core.units import PowerSpec, format_energy
from powerkit.engine import LOCAL, Engine

__all__ = [
    "BY",
    "GROUP_COLUMNS",
    "JOB_COLUMNS",
    "GroupRow",
    "JobRow",
    "JobsOptions",
    "JobsReport",
    "JobsTimeline",
    "TimelineGroup",
]

#: what ``--by`` sums jobs by
BY = ("job", "user", "account", "partition")


@dataclass(frozen=True)
class JobsOptions:
    """What ``powerkit jobs`` is given besides the trace.

    Attributes:
        sacct, scontrol: Slurm's ``sacct -P`` output, and ``scontrol show job -d`` output for
            the GPU indices of jobs on shared nodes.
        allocations: a plain ``job,host,gpus,start,end[,user,account]`` CSV instead.
        by_label: instead of records, a label of the trace's samples (``pod``).
        tz: the zone of record times that carry none (None: UTC, said).
        idle_below: the power under which a GPU is idle (W, or a share of its nameplate).
        price_per_kwh: energy price (None: no cost).
        region, intensity, intensity_csv: the grid's carbon intensity as ``carbon`` takes it
            (a bundled region, a constant ``250g/kWh``, or hourly rows); none: no carbon.
        by: sum by ``job`` (none), ``user``, ``account`` or ``partition``.
        fill, engine: the gap fill and where the per-series work runs.
    """

    sacct: Path | None = None
    scontrol: Path | None = None
    allocations: Path | None = None
    by_label: str | None = None
    tz: str | None = None
    idle_below: PowerSpec | None = field(
        default_factory=lambda: PowerSpec(fraction=0.25, text="25%")
    )
    price_per_kwh: float | None = None
    region: str | None = None
    intensity: str | None = None
    intensity_csv: Path | None = None
    by: str = "job"
    fill: FillPolicy = NO_FILL
    engine: Engine = LOCAL


@dataclass(frozen=True)
class JobRow:
    """One job's GPUs, time, energy, cost and carbon (module docstring of jobs.attribute)."""

    job: str
    user: str | None
    account: str | None
    partition: str | None
    state: str | None
    start: str  # ISO 8601, UTC
    end: str | None  # None: still running at the end of the trace
    hosts: list[str]
    gpus: float  # GPUs held (a share of a host's where the indices are unknown)
    gpu_hours: float  # held GPU-time, h (a running job's up to the trace's end)
    energy_j: float
    coverage: float | None  # GPU-time the trace integrated ÷ held GPU-time
    mean_power_w: float | None  # per GPU, over the integrated time
    peak_power_w: float | None  # the highest sample of a GPU it held
    j_per_gpu_hour: float | None  # energy ÷ integrated GPU-hours
    idle_share: float | None  # integrated GPU-time below the idle power
    cost: float | None  # energy × --price
    co2_kg: float | None
    overlap_s: float  # time it shared a GPU with another holder (flagged when > 0)
    indices_known: bool  # the GPU indices of every host it ran on are known


@dataclass(frozen=True)
class GroupRow:
    """The jobs of one user, account or partition, summed."""

    key: str | None
    jobs: int
    gpu_hours: float
    energy_j: float
    share: float  # of the attributed energy
    cost: float | None
    co2_kg: float | None


@dataclass(frozen=True)
class TimelineGroup:
    """One group's attributed energy per clock hour (J)."""

    key: str | None
    energy_j: list[float]


@dataclass(frozen=True)
class JobsTimeline:
    """The attributed energy per group of jobs (``--by``'s key; the account with ``--by
    job``) and UTC clock hour: what ``report --jobs`` plots over time."""

    by: str
    hour_starts: list[str]  # ISO 8601, UTC
    groups: list[TimelineGroup]


@dataclass(frozen=True)
class JobsReport(Document):
    """What ``powerkit jobs`` reports: a row per job (every one, largest energy first), the
    sums ``--by`` asks for, and the fleet's energy split into attributed and not."""

    COMMAND: ClassVar[str] = "jobs"

    source: str  # sacct, allocations, or label:NAME
    jobs: list[JobRow]
    total_j: float  # the fleet's energy, as `info` integrates it
    attributed_j: float
    unattributed_j: float  # energy of GPUs no job held
    by: str = "job"
    groups: list[GroupRow] | None = None
    idle_below: str | None = None
    price_per_kwh: float | None = None
    carbon_source: str | None = None
    tz: str = "UTC"
    notes: list[str] = field(default_factory=list)
    timeline: JobsTimeline | None = None


#: the terminal's table of jobs (every figure is in --json)
JOB_COLUMNS = (
    Column("job", "job", key=True),
    Column("user", "user", text=True),
    Column("account", "account", text=True),
    Column("GPUs", "gpus", "g"),
    Column("GPU-h", "gpu_hours", ",.1f"),
    Column("energy", lambda r: format_energy(r.energy_j), text=False),
    Column("cover", "coverage", ".1%"),
    Column("W/GPU", "mean_power_w", ".0f"),
    Column("peak W", "peak_power_w", ".0f"),
    Column("idle", "idle_share", ".0%"),
    Column("cost", "cost", ",.2f"),
    Column("kg CO2e", "co2_kg", ",.2f"),
    Column(
        "state", lambda r: r.state if r.overlap_s == 0 else f"{r.state or ''} shared", text=True
    ),
)

#: the terminal's table of sums (``--by``)
GROUP_COLUMNS = (
    Column("key", lambda g: g.key if g.key is not None else "(none)", key=True),
    Column("jobs", "jobs", ","),
    Column("GPU-h", "gpu_hours", ",.1f"),
    Column("energy", lambda g: format_energy(g.energy_j)),
    Column("share", "share", ".1%"),
    Column("cost", "cost", ",.2f"),
    Column("kg CO2e", "co2_kg", ",.2f"),
)
