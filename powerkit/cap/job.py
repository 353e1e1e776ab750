"""``powerkit cap`` as a library job: a fleet's members (as ``oversub`` reads them), each
assigned to a job with a cap curve, replayed under each limit with each policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from powerkit.analysis.members import FleetMembers
from powerkit.cap.breaker import read_breaker
from powerkit.cap.document import CapReport
from powerkit.cap.events import Event
from powerkit.cap.policies import POLICIES
from powerkit.cap.replay import replay_all
from powerkit.cap.response import Response, response_of
from powerkit.cap.schedule import read_schedule
from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.cells.grid import default_grid_s
from powerkit.core.choices import Compose
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import PowerSpec, parse_pairs
from powerkit.pfi.curves import JobCurve, load_curves
from powerkit.trace.model import Trace

__all__ = ["CapOptions", "parse_assign", "parse_classes", "run_cap"]


@dataclass(frozen=True)
class CapOptions:
    """What ``powerkit cap`` is given, its units parsed.

    Attributes:
        limit: the feed, a power or a share of the fleet's nameplate (or ``ratios``).
        ratios: oversubscription ratios: feeds of the fleet's nameplate ÷ each.
        limit_csv: a limit schedule, rows of ``time,kW`` (None: a constant limit).
        breaker: a trip curve, a TOML file or a bundled curve's name (None: none).
        events: utility curtailments (``parse_event``).
        policies: the capping policies (``uniform``, ``pfi``; any of none, uniform, pfi,
            polca, priority).
        curves: cap curves, pfi sweep files or a jobs table.
        assign: member (path, name or stem) -> the job whose curve its GPUs follow.
        classes: job -> priority class, 0 (the highest) to 3.
        period_s: how often the policy decides, s (1). latency_s: how long a decision takes
            to act, s (0).
        compose: the members' starts (``aligned``). seed: the seed of random offsets.
        grid_s: the cell length, s (None: the traces' interval). fill: the gap fill (none).
        nameplate_w: the per-GPU nameplate, W, over the traces' metadata (None: theirs).
        stat: a cap curve's steady-state power (``top10``).
    """

    limit: PowerSpec | None = None
    ratios: list[float] | None = None
    limit_csv: Path | None = None
    breaker: Path | str | None = None
    events: list[Event] = field(default_factory=list)
    policies: list[str] = field(default_factory=lambda: ["uniform", "pfi"])
    curves: list[Path] = field(default_factory=list)
    assign: dict[str, str] = field(default_factory=dict)
    classes: dict[str, int] = field(default_factory=dict)
    period_s: float = 1.0
    latency_s: float = 0.0
    compose: Compose = Compose.aligned
    seed: int = 0
    grid_s: float | None = None
    fill: FillPolicy = NO_FILL
    nameplate_w: float | None = None
    stat: str = "top10"


def parse_assign(items: list[str]) -> dict[str, str]:
    """``--assign MEMBER=JOB`` (repeatable) as a map."""
    return parse_pairs(items, option("assign"), "MEMBER=JOB", "72b.parquet=moe")


def parse_classes(items: list[str]) -> dict[str, int]:
    """``--classes JOB=N`` (repeatable): each job's priority class, 0 (the highest) to 3."""
    out = {}
    for job, value in parse_pairs(items, option("classes"), "JOB=N", "moe=1").items():
        if value not in ("0", "1", "2", "3"):  # (str.isdigit takes "²")
            raise BadInputError(
                f"{option('classes')} {job}={value}: a class is 0 (the highest) to 3"
            )
        out[job] = int(value)
    return out


def run_cap(
    traces: list[tuple[Trace, int]],
    opts: CapOptions,
    on_block: Callable[[int, int], None] | None = None,
) -> CapReport:
    """Replay the fleet of ``traces`` under every limit with every policy (module docstring);
    ``on_block(cells done, horizon)`` hears the replay's progress."""
    given = [opts.limit is not None, opts.ratios is not None, opts.limit_csv is not None]
    if sum(given) > 1 or (not any(given) and not opts.events):
        raise BadInputError(
            f"give one of {option('limit')} (e.g. 60% or 250kW), {option('ratios')} (e.g. 1,1.5,2) "
            f"or {option('limit-csv')} (time,kW), or an {option('event')}"
        )
    unknown = [p for p in opts.policies if p not in POLICIES]
    if unknown or not opts.policies:
        raise BadInputError(
            f"{option('policy')} {','.join(unknown)!r}: any of {', '.join(POLICIES)}"
        )
    if opts.ratios is not None and any(not r >= 1 for r in opts.ratios):
        raise BadInputError(
            f"{option('ratios')} {opts.ratios}: each at least 1 (nameplate ÷ the feed)"
        )
    if opts.latency_s < 0:
        raise BadInputError(f"{option('latency')} must not be negative")
    curves = {c.job: c for c in load_curves(opts.curves, opts.stat)} if opts.curves else {}
    breaker = None if opts.breaker is None else read_breaker(opts.breaker)
    for asked in sorted((set(opts.assign.values()) | set(opts.classes)) - set(curves)):
        have = ", ".join(sorted(curves)) or f"none: give {option('jobs')}"
        raise BadInputError(
            f"{option('assign')}/{option('classes')}: no cap curve for job {asked!r} (the "
            f"curves have {have})"
        )
    grid_s = opts.grid_s or default_grid_s(*(t for t, _ in traces))
    warnings: list[str] = []
    with FleetMembers(traces, grid_s, opts.nameplate_w, opts.fill) as fleet:
        names = [_member_job(t, opts.assign, curves) for t, _ in traces]
        used = {key for key in opts.assign if any(_names(t, key) for t, _ in traces)}
        for key in set(opts.assign) - used:
            raise BadInputError(f"{option('assign')} {key}=...: no member is named {key!r}")
        made: dict[tuple[str, float], Response] = {}
        jobs: list[str | None] = []
        responses: list[Response | None] = []
        for m in fleet.members:
            job = names[m.trace]
            jobs.append(job)
            if job is None:
                responses.append(None)
                continue
            made_key = (job, m.nameplate_w)
            if made_key not in made:
                made[made_key] = response_of(curves[job], m.nameplate_w)
            responses.append(made[made_key])
        missing = sorted(
            {
                fleet.described[m.trace].path
                for m, j in zip(fleet.members, jobs, strict=True)
                if j is None
            }
        )
        if missing:
            warnings.append(
                f"no cap curve for {', '.join(missing)}: capped for power only, "
                f"its throughput cost unknown (give {option('jobs')} and {option('assign')})"
            )
        offsets = fleet.offsets(opts.compose.value, opts.seed)
        classes = [opts.classes.get(j or "", 0) for j in jobs]
        plate = fleet.nameplate_w
        schedule = None if opts.limit_csv is None else read_schedule(opts.limit_csv)
        limits = (
            [(opts.limit.resolve(plate), None)]
            if opts.limit is not None
            else [(plate / r, r) for r in opts.ratios]
            if opts.ratios
            else [(schedule.highest_w, None)]
            if schedule is not None
            else [(plate, None)]
        )
        runs = replay_all(
            fleet,
            offsets,
            [(w, r, p) for w, r in limits for p in opts.policies],
            responses,
            jobs,
            period_s=opts.period_s,
            latency_s=opts.latency_s,
            classes=classes,
            events=opts.events,
            breaker=breaker,
            schedule=schedule,
            on_block=on_block,
        )
        return CapReport(
            gpus=len(fleet.members),
            fleet_nameplate_w=plate,
            grid_s=grid_s,
            horizon_s=fleet.horizon * grid_s,
            period_s=opts.period_s,
            latency_s=opts.latency_s,
            compose=opts.compose.value,
            members=fleet.described,
            limit_csv=None if schedule is None else schedule.path,
            breaker=None if breaker is None else breaker.name,
            assigned={fleet.described[i].path: j for i, j in enumerate(names) if j},
            runs=runs,
            warnings=warnings,
        )


def _names(trace: Trace, key: str) -> bool:
    """Whether ``key`` names ``trace``: its path as given, its file name or its stem."""
    path = Path(trace.origin)
    return key in (trace.origin, path.name, path.stem)


def _member_job(trace: Trace, assign: dict[str, str], curves: dict[str, JobCurve]) -> str | None:
    """The job of a trace's GPUs: ``--assign``, else a curve named like the trace's file
    (stem) or its simulated preset."""
    for key, job in assign.items():
        if _names(trace, key):
            return job
    for name in (Path(trace.origin).stem, str(trace.meta.extra.get("preset", ""))):
        if name in curves:
            return name
    return None
