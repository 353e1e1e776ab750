"""A live session of ``powerkit top``: sampling in the background, snapshots on demand.

The GPUs are read through the recorder (``powerkit.telemetry.recorder.record``: the same
sources, schedule and, with ``record_to``, the same one writer as ``powerkit record``); each
tick's samples feed :class:`TopState`. A Prometheus server is polled instead (an instant query
per tick of the GPUs' power metric, each series' newest sample taken once), summed per host.
A snapshot is a typed document (``top --once --json``); the terminal view renders it.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from powerkit.analysis.limits import REASON_COLUMN, THROTTLE_KINDS
from powerkit.analysis.windows import window_cells
from powerkit.cells.grid import clean_grid_s
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import PowerSpec, format_duration
from powerkit.top.stream import StreamSeries

if TYPE_CHECKING:
    from powerkit.telemetry.base import Readings, TelemetrySource

__all__ = [
    "SCOPES",
    "TopRow",
    "TopSession",
    "TopSnapshot",
    "TopState",
]

SCOPES = ("gpu", "host", "fleet")
SPARK_SAMPLES = 60  # the samples a row's sparkline shows


@dataclass(frozen=True)
class TopRow:
    """One row of the view: a GPU, a host's GPUs summed, or the whole fleet summed."""

    name: str  # host:gpu, host, or "fleet"
    gpus: int
    power_w: float | None  # the last sample (summed)
    budget_w: float
    nameplate_w: float | None
    #: per window (the snapshot's ``windows`` order): the latest complete trailing mean (W;
    #: None until the window first fills), the violations and complete positions counted
    means_w: list[float | None]
    violations: list[int]
    positions: list[int]
    headroom_w: float | None  # budget - power now
    nameplate_headroom_w: float | None  # nameplate - power now
    energy_j: float | None  # since the session started
    limit_w: float | None = None  # the enforced power limit now (one GPU)
    throttle: list[str] = field(default_factory=list)  # kinds throttling now (one GPU)
    spark_w: list[float] = field(default_factory=list)  # the last samples, oldest first


@dataclass(frozen=True)
class TopSnapshot(Document):
    """What ``powerkit top`` shows at one moment (``--once --json``)."""

    COMMAND: ClassVar[str] = "top"

    time: str  # ISO 8601, UTC
    source: str
    scope: str
    interval_s: float
    grid_s: float
    windows: list[str]
    elapsed_s: float
    samples: int
    rows: list[TopRow]
    counting_since: str  # when the violations began to be counted (a budget change restarts)
    recording: str | None = None  # the trace being written
    warnings: list[str] = field(default_factory=list)


class TopState:
    """The series of a session: each GPU, each host's sum and the fleet's, their windows."""

    def __init__(
        self,
        keys: list[tuple[str, int]],
        nameplates: list[float | None],
        windows_s: list[float],
        budget: PowerSpec,
        interval_s: float,
        grid_s: float | None = None,
    ) -> None:
        self.keys, self.nameplates = keys, nameplates
        self.grid_s = clean_grid_s(interval_s) if grid_s is None else grid_s
        self.windows_s = windows_s
        self.cells = window_cells(windows_s, self.grid_s)
        self.budgets = self._budgets(budget)
        hosts = dict.fromkeys(h for h, _ in keys)
        self.members = {h: [i for i, (hh, _) in enumerate(keys) if hh == h] for h in hosts}
        self.everyone = list(range(len(keys)))
        self.gpu = [StreamSeries(self.grid_s, self.cells, b) for b in self.budgets]
        self.host = {
            h: StreamSeries(self.grid_s, self.cells, self._sum(m)) for h, m in self.members.items()
        }
        self.fleet = StreamSeries(self.grid_s, self.cells, self._sum(self.everyone))
        self.power = np.full(len(keys), np.nan)
        self.energy: np.ndarray | None = None
        self.limit: np.ndarray | None = None
        self.reasons: np.ndarray | None = None
        self.spark: list[collections.deque[float]] = [
            collections.deque(maxlen=SPARK_SAMPLES) for _ in keys
        ]
        self.index = {k: i for i, k in enumerate(keys)}
        self.fleet_judged = True  # False: the fleet's sum has no common time (Prometheus)
        self.samples = 0
        self.started = time.time()
        self.since = self.started
        self.lock = threading.Lock()

    def _budgets(self, budget: PowerSpec) -> list[float]:
        unknown = [k for k, p in zip(self.keys, self.nameplates, strict=True) if p is None]
        if budget.is_relative and unknown:
            host, gpu = unknown[0]
            raise BadInputError(
                f"{option('budget')} {budget.text} is a share of each GPU's nameplate (100 % "
                f"unless given) and {host}:{gpu} gives none (no model name): give "
                f"{option('nameplate')} 700W, or {option('budget')} in W"
            )
        return [budget.resolve(p) for p in self.nameplates]

    def _sum(self, members: list[int]) -> float:
        return float(sum(self.budgets[i] for i in members))

    def _sums(self) -> list[tuple[list[int], StreamSeries]]:
        """The summed series and their GPUs: each host's, then the fleet's."""
        return [*((m, self.host[h]) for h, m in self.members.items()), (self.everyone, self.fleet)]

    def update(
        self,
        ts_epoch: float,
        power_w: np.ndarray,
        energy_j: np.ndarray | None = None,
        limit_w: np.ndarray | None = None,
        reasons: np.ndarray | None = None,
    ) -> None:
        """One tick: a sample per GPU (NaN: none), at ``ts_epoch`` as the trace stores it."""
        t_us = round(ts_epoch * 1e6)  # the recorder's µs
        p = np.asarray(power_w, dtype=float)
        with self.lock:
            for i, watts in enumerate(p):
                self.gpu[i].add(t_us, float(watts))
                if np.isfinite(watts):
                    self.spark[i].append(float(watts))
            for members, series in self._sums():
                part = p[members]
                if np.isfinite(part).all():  # a sum's cell is present where every GPU's is
                    series.add(t_us, float(part.sum()))
            self.power = p
            self.energy, self.limit, self.reasons = energy_j, limit_w, reasons
            self.samples += int(np.isfinite(p).sum())

    def update_scrapes(self, fresh: dict[tuple[str, int], tuple[float, float]]) -> None:
        """New samples of some GPUs, each at its own time (epoch s; a Prometheus scrape's): a
        host's sum where every GPU of it has a sample of one time."""
        with self.lock:
            for key, (t, watts) in fresh.items():
                i = self.index[key]
                self.gpu[i].add(round(t * 1e6), watts)
                self.spark[i].append(watts)
                self.power[i] = watts
                self.samples += 1
            for h, members in self.members.items():
                times = {fresh[self.keys[i]][0] for i in members if self.keys[i] in fresh}
                if len(times) == 1 and all(self.keys[i] in fresh for i in members):
                    total = sum(fresh[self.keys[i]][1] for i in members)
                    self.host[h].add(round(times.pop() * 1e6), total)

    def set_budget(self, budget: PowerSpec) -> None:
        """Judge against ``budget`` from now on: the violations are counted afresh."""
        budgets = self._budgets(budget)
        with self.lock:
            self.budgets, self.since = budgets, time.time()
            for s, b in zip(self.gpu, budgets, strict=True):
                s.restart(b)
            for members, series in self._sums():
                series.restart(self._sum(members))

    def close(self) -> None:
        """The end: every open cell is judged (as ``windows`` judges the trace's last)."""
        with self.lock:
            for s in [*self.gpu, *(series for _, series in self._sums())]:
                s.close()

    def rows(self, scope: str) -> list[TopRow]:
        """The rows of ``scope`` (gpu, host, fleet) now."""
        with self.lock:
            if scope == "gpu":
                return [
                    self._row(f"{h}:{g}", [i], self.gpu[i]) for i, (h, g) in enumerate(self.keys)
                ]
            if scope == "host":
                return [self._row(h, m, self.host[h]) for h, m in self.members.items()]
            return [self._row("fleet", self.everyone, self.fleet, judged=self.fleet_judged)]

    def _row(self, name: str, members: list[int], s: StreamSeries, judged: bool = True) -> TopRow:
        power = self.power[members]
        now = float(power.sum()) if np.isfinite(power).all() else None
        plates = [self.nameplates[i] for i in members]
        plate = None if any(p is None for p in plates) else float(sum(plates))  # type: ignore[arg-type]
        budget = s.windows[0].budget_w
        energy = None if self.energy is None else float(np.nansum(self.energy[members]))
        one = members[0] if len(members) == 1 else None
        limit = reasons = None
        if one is not None and self.limit is not None and np.isfinite(self.limit[one]):
            limit = float(self.limit[one])
        if one is not None and self.reasons is not None and np.isfinite(self.reasons[one]):
            bits = int(self.reasons[one])
            reasons = [k for k, mask in THROTTLE_KINDS.items() if bits & mask]
        # the members' last samples, summed, over the length all of them have
        length = min(len(self.spark[i]) for i in members)
        tails = [list(self.spark[i])[len(self.spark[i]) - length :] for i in members]
        spark = [float(sum(v)) for v in zip(*tails, strict=True)] if length else []
        return TopRow(
            name,
            len(members),
            now,
            budget,
            plate,
            [w.last_mean_w if judged else None for w in s.windows],
            [w.violations for w in s.windows],
            [w.positions for w in s.windows],
            None if now is None else budget - now,
            None if now is None or plate is None else plate - now,
            energy,
            limit,
            reasons or [],
            spark,
        )


class TopSession:
    """Samples in a background thread and keeps the state; ``snapshot`` at any time.
    ``sampler(session)`` reads until ``session.stop`` is set or the duration is over."""

    def __init__(
        self,
        state: TopState,
        source_name: str,
        interval_s: float,
        sampler: Callable[[TopSession], None],
        duration_s: float | None = None,
    ) -> None:
        self.state, self.source_name, self.sampler = state, source_name, sampler
        self.interval_s, self.duration_s = interval_s, duration_s
        self.stop = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.recording: Path | None = None
        self.warnings: list[str] = []
        self._thread: threading.Thread | None = None

    def scale_budget(self, factor: float) -> None:
        """Scale the budget of every GPU by ``factor`` (violations counted anew); where the GPUs'
        budgets differ (a share of nameplates that differ) nothing changes, and it is said."""
        per_gpu = self.state.budgets
        if len(set(per_gpu)) == 1:
            self.state.set_budget(PowerSpec(watts=per_gpu[0] * factor))
        else:
            self.warnings = ["+/- change one budget for every GPU; these GPUs' budgets differ"]

    @classmethod
    def of_source(
        cls,
        source: TelemetrySource,
        windows_s: list[float],
        budget: PowerSpec,
        interval_s: float,
        duration_s: float | None = None,
        record_to: Path | None = None,
    ) -> TopSession:
        """A session over GPUs read through the recorder (written to ``record_to`` if given)."""
        devices = source.devices()
        keys = [(source.host, d.index) for d in devices]
        state = TopState(keys, [d.nameplate_w for d in devices], windows_s, budget, interval_s)

        def sample(session: TopSession) -> None:
            from powerkit.telemetry.recorder import RecordConfig, record

            def on_sample(ts_epoch: float, reading: Readings, energy_j: np.ndarray) -> None:
                state.update(
                    ts_epoch,
                    reading["power_w"],
                    energy_j,
                    reading.get("power_limit_w"),
                    reading.get(REASON_COLUMN),
                )

            cfg = RecordConfig(out=record_to, interval_s=interval_s, duration_s=duration_s)
            record(source, cfg, stop=session.stop, on_sample=on_sample)

        session = cls(state, source.source_name, interval_s, sample, duration_s)
        session.recording = record_to
        return session

    def start(self) -> None:
        """Begin sampling in the background."""

        def body() -> None:
            try:
                self.sampler(self)
            except BaseException as exc:  # the view reports it; the thread must not die silent
                self.error = exc
            finally:
                self.state.close()
                self.done.set()

        self._thread = threading.Thread(target=body, name="powerkit-top", daemon=True)
        self._thread.start()

    def finish(self, timeout_s: float = 30.0) -> None:
        """Stop sampling, wait for the recording to be finalized; re-raise its error."""
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self.error is not None:
            raise self.error

    def snapshot(self, scope: str = "gpu") -> TopSnapshot:
        """The view now, as a document."""
        if scope not in SCOPES:
            raise BadInputError(f"scope {scope!r}: one of {', '.join(SCOPES)}")
        st = self.state
        now = time.time()
        return TopSnapshot(
            time=_iso(now),
            source=self.source_name,
            scope=scope,
            interval_s=self.interval_s,
            grid_s=st.grid_s,
            windows=[format_duration(w) for w in st.windows_s],
            elapsed_s=now - st.started,
            samples=st.samples,
            rows=st.rows(scope),
            counting_since=_iso(st.since),
            recording=None if self.recording is None else str(self.recording),
            warnings=list(self.warnings),
        )


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
