"""``control run``: the policy in the loop, with a safety fallback.

Every period the loop reads power (through the telemetry source), builds the observation the
policy was trained on, and writes the chosen knob through the actuator. It falls back to a
safe setting — and says so — when telemetry goes stale or power stays above the budget by a
hard margin for several periods; it resumes the policy once power has been back under the
budget for as many periods.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from powerkit.actuation.knobs import KnobChannel
from powerkit.control.env import DEFAULT_TARGET, POWER_OBS, Lengths, Period, observe, shielded
from powerkit.control.ppo import PPO
from powerkit.core.errors import DeviceError
from powerkit.sim.model import GrpoSim
from powerkit.sweep.backends import last_json, read_lines
from powerkit.telemetry.base import TelemetrySource
from powerkit.telemetry.schedule import Schedule

__all__ = ["Decision", "LoopConfig", "Plant", "control_loop"]


class Plant:
    """What the loop acts on: ``read`` a period of power, ``apply`` a knob value."""

    def read(self, period_s: float, stop: threading.Event) -> Period | None:
        """Return the last period's readings, or None when telemetry gave nothing."""
        raise NotImplementedError

    def apply(self, value: int) -> None:
        """Put the knob at ``value``."""
        raise NotImplementedError


@dataclass
class LoopConfig:
    """How the loop runs; powers in W, times in s."""

    budget_w: float
    ladder: list[int]
    tokens_ref: float
    target: float = DEFAULT_TARGET
    shield: bool = False  # the policy was trained shielded: apply the same shield here
    period_s: float = 60.0
    periods: int | None = None  # None: until stopped
    fallback_rung: int = 0
    hard_margin: float = 0.10  # fall back when p95 power exceeds budget x (1 + margin) ...
    hard_periods: int = 3  # ... for this many periods in a row
    memory: float = 0.9
    #: the policy observes response lengths: the tracker they start from (None: it observes
    #: power alone)
    lengths: Lengths | None = None


@dataclass
class Decision:
    """One period's decision, kept in the run's trace metadata."""

    period: int
    value: int
    action: str  # "policy" | "shield" | "fallback" | "hold"
    reason: str = ""
    p95_w: float | None = None
    samples: int = 0

    def describe(self, knob: str) -> str:
        """The period's line: ``period 3: p95 412 W -> group_size=8 (policy)``."""
        note = f" ({self.reason})" if self.reason else ""
        p95 = "-" if self.p95_w is None else f"{self.p95_w:.0f} W"
        return f"period {self.period}: p95 {p95} -> {knob}={self.value} ({self.action}){note}"


@dataclass
class _State:
    rung: int
    recent: float = 0.0
    hot: int = 0
    calm: int = 0
    fallback: bool = False
    decisions: list[Decision] = field(default_factory=list)
    lengths: Lengths | None = None


def control_loop(
    agent: PPO,
    plant: Plant,
    cfg: LoopConfig,
    *,
    start_rung: int | None = None,
    stop: threading.Event | None = None,
    on_decision: Callable[[Decision], None] | None = None,
) -> list[Decision]:
    """Run the policy until ``cfg.periods`` periods have passed or ``stop`` is set."""
    stop = stop or threading.Event()
    top = len(cfg.ladder) - 1
    state = _State(top if start_rung is None else start_rung)
    state.lengths = None if cfg.lengths is None else dataclasses.replace(cfg.lengths)
    plant.apply(cfg.ladder[state.rung])
    k = 0
    while not stop.is_set() and (cfg.periods is None or k < cfg.periods):
        period = plant.read(cfg.period_s, stop)
        if stop.is_set():
            break
        decision = _decide(agent, cfg, state, period, k)
        plant.apply(cfg.ladder[state.rung])
        state.decisions.append(decision)
        if on_decision:
            on_decision(decision)
        k += 1
    return state.decisions


def _decide(agent: PPO, cfg: LoopConfig, state: _State, period: Period | None, k: int) -> Decision:
    if period is None or period.power_w.size == 0:
        state.fallback, state.calm = True, 0
        state.rung = cfg.fallback_rung
        return Decision(k, cfg.ladder[state.rung], "fallback", "stale telemetry")
    if state.lengths is not None:  # the steps that ended, even in a period over budget
        for mean, p95_len in period.lengths:
            state.lengths.update(mean, p95_len)
    p95 = float(np.percentile(period.power_w, 95))
    share = float((period.power_w > cfg.budget_w).mean())
    state.recent = cfg.memory * state.recent + (1 - cfg.memory) * share
    state.hot = state.hot + 1 if p95 > cfg.budget_w * (1 + cfg.hard_margin) else 0
    state.calm = state.calm + 1 if p95 <= cfg.budget_w else 0
    samples = int(period.power_w.shape[1])
    if state.hot >= cfg.hard_periods:
        state.fallback, state.rung = True, cfg.fallback_rung
        return Decision(
            k,
            cfg.ladder[state.rung],
            "fallback",
            f"p95 {p95:.0f} W over budget +{100 * cfg.hard_margin:g} % for {state.hot} periods",
            p95,
            samples,
        )
    if state.fallback:
        if state.calm < cfg.hard_periods:
            return Decision(k, cfg.ladder[state.rung], "hold", "waiting to resume", p95, samples)
        state.fallback = False
    obs = observe(
        period,
        cfg.budget_w,
        state.rung,
        len(cfg.ladder),
        cfg.tokens_ref,
        state.recent - cfg.target,
        state.lengths,
    )
    # Without a token count (no --tokens-from) or a temperature, stand in the training
    # values' typical ones: throughput in proportion to the rung's setting, a warm GPU (and,
    # without lengths in the tokens file, the nominal job's lengths: ``Lengths``).
    tokens_at, temp_at = POWER_OBS.index("tokens_rel"), POWER_OBS.index("temp_rel")
    if not np.isfinite(obs[tokens_at]):
        obs[tokens_at] = cfg.ladder[state.rung] / cfg.ladder[-1]
    if not np.isfinite(obs[temp_at]):
        obs[temp_at] = 0.65
    action = agent.act(obs, greedy=True)
    safe = shielded(action, state.recent - cfg.target, share, cfg.target) if cfg.shield else action
    if safe != action:
        state.rung = int(np.clip(state.rung + safe - 1, 0, len(cfg.ladder) - 1))
        return Decision(
            k, cfg.ladder[state.rung], "shield", "recent violations over the target", p95, samples
        )
    state.rung = int(np.clip(state.rung + action - 1, 0, len(cfg.ladder) - 1))
    return Decision(k, cfg.ladder[state.rung], "policy", "", p95, samples)


def _length(value: object) -> bool:
    """A response length the tokens file may give: a finite positive number."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


class SimPlant(Plant):
    """The simulated job in simulated time (periods pass instantly)."""

    def __init__(
        self, sim: GrpoSim, knob: str, interval_s: float = 0.5, within_step: bool = False
    ) -> None:
        self.sim, self.knob, self.interval_s, self.t = sim, knob, interval_s, 0.0
        self.within_step = within_step  # a concurrency change acts in the running rollout
        self.periods: list[Period] = []
        self.reported = -1  # the last step whose lengths a period carried

    def read(self, period_s: float, stop: threading.Event) -> Period | None:
        times = self.t + np.arange(0.0, period_s, self.interval_s)
        s = self.sim.sample(times)
        self.t += period_s
        value = getattr(s, self.knob)[-1]
        ended = int(s.step[-1]) - 1  # the steps before the one running at the period's end
        lengths = self.sim.lengths_between(self.reported, ended)
        self.reported = max(self.reported, ended)
        period = Period(
            times,
            s.power_w,
            float(s.tokens[-1] - s.tokens[0]),
            int(value),
            float(s.temp_c.mean()),
            lengths,
        )
        self.periods.append(period)
        return period

    def apply(self, value: int) -> None:
        knobs = self.sim.knobs.with_knob(self.knob, value)
        self.sim.set_knobs(knobs, now=self.t if self.within_step else None)


class NvmlPlant(Plant):
    """Real GPUs: power through the telemetry source, knobs through the actuator channel."""

    def __init__(
        self,
        source: TelemetrySource,
        channel: KnobChannel,
        knob: str,
        interval_s: float = 0.5,
        tokens_from: Path | None = None,
    ) -> None:
        self.source, self.channel, self.knob = source, channel, knob
        self.interval_s, self.tokens_from = interval_s, tokens_from
        self.periods: list[Period] = []
        self.epoch: list[float] = []
        self.seen: tuple[object, object] = (None, None)  # the last lengths the file gave
        self.lengths: list[tuple[float, float]] = []  # the steps' lengths the period brought

    def read(self, period_s: float, stop: threading.Event) -> Period | None:
        def tokens() -> float | None:
            if self.tokens_from is None:
                return None
            data = last_json(read_lines(self.tokens_from))
            if data is None:
                return None
            seen = (data.get("response_tokens_mean"), data.get("response_tokens_p95"))
            if all(_length(v) for v in seen) and seen != self.seen:
                self.seen = seen  # a step's lengths, once
                self.lengths.append((float(seen[0]), float(seen[1])))  # type: ignore[arg-type]
            return float(data["tokens"])  # type: ignore[arg-type]

        self.lengths = []  # this period's
        before, start = tokens(), time.time()
        times, power = [], []
        try:
            for tick in Schedule(self.interval_s, period_s, stop):
                power.append(self.source.read_now(tick.elapsed_s)["power_w"])
                times.append(tick.elapsed_s)
        except DeviceError:
            return None  # the GPU stopped answering: stale telemetry
        after = tokens()
        if not power:
            return None
        made = (after - before) if before is not None and after is not None else float("nan")
        period = Period(
            np.asarray(times), np.stack(power, axis=1), made, 0, float("nan"), self.lengths
        )
        self.periods.append(period)
        self.epoch.append(start)
        return period

    def apply(self, value: int) -> None:
        self.channel.write({self.knob: value})


def write_run(
    out: Path, plant: Plant, decisions: list[Decision], knob: str, budget_w: float
) -> Path:
    """Record the run: every sample, annotated with its period, knob value and action."""
    import polars as pl

    from powerkit.sim.settings import SIM_EPOCH_S
    from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical
    from powerkit.trace.writing import write_trace

    periods: list[Period] = getattr(plant, "periods", [])
    epochs: list[float] = getattr(plant, "epoch", [])
    frames = []
    for i, period in enumerate(periods):
        decision = decisions[i] if i < len(decisions) else None
        base = epochs[i] if i < len(epochs) else SIM_EPOCH_S
        gpus, n = period.power_w.shape
        ts = np.tile(np.round((base + period.times_s) * 1e6).astype(np.int64), gpus)
        frames.append(
            pl.DataFrame(
                {
                    "ts": pl.Series(ts).cast(pl.Datetime("us", "UTC")),
                    "host": ["control"] * (gpus * n),
                    "gpu": np.repeat(np.arange(gpus), n).astype(np.int16),
                    "power_w": period.power_w.ravel(),
                    "step": [i] * (gpus * n),
                    "phase": [decision.action if decision else "start"] * (gpus * n),
                    knob: [decision.value if decision else None] * (gpus * n),
                }
            )
        )
    if not frames:
        raise ValueError("no period was recorded")
    table = to_canonical(pl.concat(frames, how="diagonal"))
    gpus = int(periods[0].power_w.shape[0])
    meta = TraceMeta(source="control", gpus=[GpuMeta("control", g) for g in range(gpus)])
    meta.extra["control"] = {
        "budget_w": budget_w,
        "knob": knob,
        "decisions": [d.__dict__ for d in decisions],
    }
    return write_trace(table, meta, out)
