"""Whose energy it was: each GPU's energy split among the jobs that held it, exactly.

For one GPU series, the energy up to time t is the cumulative energy ``info`` and ``energy``
integrate (the counter's where the series has a trusted one, else the trapezoids of the gap
rule and ``--fill``), linear between samples: E(t). A job that held the GPU from a to b
(clipped to the series) gets E(b) − E(a), so a job that starts or ends between two samples
gets the share of that step its time covers, and a step the gap rule leaves out gives
nobody anything (it is uncovered time, reported as the job's coverage).

Holds on one GPU may overlap (MPS, MIG slices without instances in the trace, records that
disagree) and a job whose indices on a shared host are unknown holds ``count ÷ GPUs of the
host`` of each of the host's GPUs. The series' time is cut at every hold's start and end
into segments; in each, the holders' weights w (1 for a GPU named, the share for a count)
sum to W:

* W ≤ 1: each holder gets w × the segment's energy, and (1 − W) × it is unattributed;
* W > 1 (more holders than the GPU): each gets w ÷ W × it (an equal split of the GPU among
  whole holders), and the segment's time counts as overlap for each: flagged.

So the attributed and unattributed energy of every GPU add up to its energy, and those of
the fleet to the fleet's, to rounding. Coverage, idle time and overlap are a job's own
GPU-time (w × the segment's covered seconds), not scaled by W.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.cells.grid import RawSeries
from powerkit.cells.steps import counter_of, series_steps
from powerkit.core.units import PowerSpec
from powerkit.engine import LOCAL, Engine, reduce
from powerkit.jobs.records import Job
from powerkit.trace.model import Trace

__all__ = ["Attribution", "Timeline", "attribute"]


@dataclass(frozen=True)
class Timeline:
    """Energy per group of jobs (an account, a user) and clock hour: ``group[k]`` the group of
    job k, the hours from ``first_hour_s`` on."""

    group: np.ndarray
    groups: int
    first_hour_s: float
    hours: int

    def add(
        self,
        by_hour: np.ndarray,
        bounds: np.ndarray,
        share: np.ndarray,
        k: np.ndarray,
        w: np.ndarray,
        first: np.ndarray,
        last: np.ndarray,
    ) -> None:
        """Each segment's energy as its holders' groups got it, in the hour it lies in (the
        segments are cut at clock hours)."""
        hour = np.floor((bounds[:-1] - self.first_hour_s) / 3600).astype(np.int64)
        hour = np.clip(hour, 0, self.hours - 1)
        groups = self.group[k]
        for g in np.unique(groups).tolist():
            on = groups == g
            held = np.zeros(bounds.size)
            np.add.at(held, first[on], w[on])
            np.add.at(held, last[on], -w[on])
            np.add.at(by_hour[g], hour, np.cumsum(held)[:-1] * share)


@dataclass
class Attribution:
    """Per job (in the order given): energy (J), covered and idle GPU-seconds, overlapped
    seconds, the highest sample of a GPU it held (W), grams of CO2e; the fleet's energy,
    what no job held, and the hosts the trace has."""

    energy_j: np.ndarray
    covered_s: np.ndarray
    idle_s: np.ndarray
    idle_known_s: np.ndarray  # covered seconds of GPUs whose idle threshold is known
    overlap_s: np.ndarray
    peak_w: np.ndarray
    grams: np.ndarray
    by_hour: np.ndarray  # J per (group, clock hour of the timeline)
    total_j: float = 0.0
    unattributed_j: float = 0.0
    hosts: set[str] = field(default_factory=set)

    @classmethod
    def empty(cls, jobs: int, groups: int = 0, hours: int = 0) -> Attribution:
        z = np.zeros(jobs)
        nan = np.full(jobs, np.nan)
        return cls(
            z, z.copy(), z.copy(), z.copy(), z.copy(), nan, z.copy(), np.zeros((groups, hours))
        )

    def merge(self, other: Attribution) -> Attribution:
        names = ("energy_j", "covered_s", "idle_s", "idle_known_s", "overlap_s", "grams", "by_hour")
        for name in names:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.peak_w = np.fmax(self.peak_w, other.peak_w)
        self.total_j += other.total_j
        self.unattributed_j += other.unattributed_j
        self.hosts |= other.hosts
        return self


@dataclass
class _HostHolds:
    """The holds on one host, as arrays: job index, start, end, count, and GPU indices (None
    where unknown)."""

    job: np.ndarray
    start: np.ndarray
    end: np.ndarray
    count: np.ndarray
    gpus: list[frozenset[int] | None]


def _by_host(jobs: list[Job]) -> dict[str, _HostHolds]:
    rows: dict[str, list[tuple[int, float, float, float, frozenset[int] | None]]] = {}
    for k, job in enumerate(jobs):
        for h in job.holds:
            gpus = None if h.gpus is None else frozenset(h.gpus)
            rows.setdefault(h.host, []).append((k, h.start_s, h.end_s, h.count, gpus))
    return {
        host: _HostHolds(
            np.array([r[0] for r in rs], dtype=np.int64),
            np.array([r[1] for r in rs]),
            np.array([r[2] for r in rs]),
            np.array([r[3] for r in rs], dtype=float),
            [r[4] for r in rs],
        )
        for host, rs in rows.items()
    }


def attribute(
    trace: Trace,
    jobs: list[Job],
    host_gpus: dict[str, int],
    *,
    idle_below: PowerSpec | None,
    intensity: Callable[[np.ndarray], np.ndarray] | None = None,
    hourly: bool = False,
    fill: FillPolicy = NO_FILL,
    engine: Engine = LOCAL,
    timeline: Timeline | None = None,
) -> Attribution:
    """Split every series' energy among ``jobs`` (module docstring). ``host_gpus``: each
    host's GPU count (for holds of a count); ``intensity(hour starts s)`` gives g/kWh, the
    segments cut at clock hours where ``hourly``; None: no carbon. ``timeline``: also sum
    the energy per group of jobs and clock hour (``by_hour``)."""
    holds = _by_host(jobs)
    nominal = trace.meta.interval_s
    n_jobs = len(jobs)
    hourly = hourly or timeline is not None

    def add(acc: Attribution, s: RawSeries) -> None:
        acc.hosts.add(s.host)
        t = s.t_us * 1e-6
        steps = series_steps(s, nominal, fill)
        integrated = ~np.isnan(steps.energy_j)
        energy = np.where(integrated, steps.energy_j, 0.0)
        covered = np.where(integrated, steps.dt_s, 0.0)
        counter = counter_of(s)
        cum_e = counter - counter[0] if counter is not None else _cumulative(energy)
        cum_c = _cumulative(covered)
        total = float(cum_e[-1]) if cum_e.size else 0.0
        acc.total_j += total
        here = holds.get(s.host)
        weight = None if here is None else _weights(here, s.gpu, host_gpus.get(s.host, 0))
        if here is None or weight is None or t.size < 2:
            acc.unattributed_j += total
            return
        on = weight > 0
        k, w = here.job[on], weight[on]
        a = np.clip(here.start[on], t[0], t[-1])
        b = np.clip(here.end[on], t[0], t[-1])
        cuts = [t[:1], t[-1:], a, b]
        if hourly:
            cuts.append(np.arange(math.ceil(t[0] / 3600), math.floor(t[-1] / 3600) + 1) * 3600.0)
        bounds = np.unique(np.concatenate(cuts))
        seg_e = np.diff(np.interp(bounds, t, cum_e))
        seg_c = np.diff(np.interp(bounds, t, cum_c))
        first, last = np.searchsorted(bounds, a), np.searchsorted(bounds, b)
        held = np.zeros(bounds.size)
        holders = np.zeros(bounds.size)
        np.add.at(held, first, w)
        np.add.at(held, last, -w)
        np.add.at(holders, first, 1.0)
        np.add.at(holders, last, -1.0)
        held, holders = np.cumsum(held)[:-1], np.cumsum(holders)[:-1]
        held = np.where(np.abs(held) < 1e-12, 0.0, held)  # (the rounding of the running sum)
        share = seg_e / np.maximum(held, 1.0)
        acc.unattributed_j += float((seg_e * np.clip(1.0 - held, 0.0, 1.0)).sum())
        np.add.at(acc.energy_j, k, w * _between(share, first, last))
        np.add.at(acc.covered_s, k, w * _between(seg_c, first, last))
        crowded = np.where((held > 1.0 + 1e-9) | (holders > 1), seg_c, 0.0)
        np.add.at(acc.overlap_s, k, _between(crowded, first, last))
        if timeline is not None:
            timeline.add(acc.by_hour, bounds, share, k, w, first, last)
        if intensity is not None:
            mid = 0.5 * (bounds[1:] + bounds[:-1])
            grams = share / 3.6e6 * intensity(np.floor(mid / 3600) * 3600)
            np.add.at(acc.grams, k, w * _between(grams, first, last))
        nameplate = trace.meta.nameplate_w(s.host, s.gpu)
        if idle_below is not None and (not idle_below.is_relative or nameplate):
            below = idle_below.resolve(nameplate)
            mean = 0.5 * (s.power_w[1:] + s.power_w[:-1])
            seg_i = np.diff(np.interp(bounds, t, _cumulative(np.where(mean < below, covered, 0.0))))
            np.add.at(acc.idle_s, k, w * _between(seg_i, first, last))
            np.add.at(acc.idle_known_s, k, w * _between(seg_c, first, last))
        lo, hi = np.searchsorted(t, a, "left"), np.searchsorted(t, b, "right")
        for job, i, j in zip(k.tolist(), lo.tolist(), hi.tolist(), strict=True):
            if j > i:
                acc.peak_w[job] = np.fmax(acc.peak_w[job], float(s.power_w[i:j].max()))

    def start() -> Attribution:
        if timeline is None:
            return Attribution.empty(n_jobs)
        return Attribution.empty(n_jobs, timeline.groups, timeline.hours)

    def merge(x: Attribution, y: Attribution) -> Attribution:
        return x.merge(y)

    return reduce(trace, start, add, merge, engine=engine, energy=True)


def _cumulative(x: np.ndarray) -> np.ndarray:
    return np.concatenate(([0.0], np.cumsum(x)))


def _between(per_segment: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The sum of ``per_segment`` over segments first..last−1, for each pair."""
    running = _cumulative(per_segment)
    return running[last] - running[first]


def _weights(here: _HostHolds, gpu: int, host_gpus: int) -> np.ndarray | None:
    """Each hold's weight on GPU ``gpu``: 1 where it names the GPU, its count ÷ the host's
    GPUs where it names none, 0 where it names others."""
    out = np.zeros(here.job.size)
    for i, gpus in enumerate(here.gpus):
        if gpus is None:
            out[i] = here.count[i] / host_gpus if host_gpus else 0.0
        elif gpu in gpus:
            out[i] = 1.0
    return out if out.any() else None
