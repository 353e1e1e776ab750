"""The trace-replay environment: a recorded trace, shifted by a sweep's measured response.

The trace was recorded at one knob setting (its ``base``). At rung s the replayed power is
the trace's power scaled by P(s) / P(base) and the throughput is T(s), with P and T the mean
power and tokens/s the sweep measured at each setting (the research's trace-replay
evaluation). Periods have a fixed length; each episode starts at a seeded offset and wraps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from powerkit.cells.fill import parse_fill
from powerkit.cells.grid import series_cells
from powerkit.control.env import DEFAULT_TARGET, POWER_OBS, LadderEnv, Period, RewardWeights
from powerkit.core.errors import BadInputError
from powerkit.sweep.authority import analyse
from powerkit.sweep.runner import read_sweep
from powerkit.trace import ImportOptions
from powerkit.trace.reader import read_trace

__all__ = ["TraceEnv", "response_table"]

_GRID_S = 0.5


def response_table(sweep_path: str, knob: str) -> tuple[list[int], list[float], list[float]]:
    """Return (settings, mean power W, tokens/s) of ``knob`` from a stored sweep, with the
    other knobs at the values the sweep's authority analysis held them at."""
    report = analyse(read_sweep(sweep_path))  # type: ignore[arg-type]
    auth = next((a for a in report.authority if a.knob == knob), None)
    if auth is None:
        raise BadInputError(f"{sweep_path}: the sweep did not vary {knob}")
    rows = [r for r in report.points if all(getattr(r, k) == v for k, v in auth.fixed.items())]
    rows = sorted(
        (r for r in rows if r.mean_power_w and r.tokens_per_s), key=lambda r: getattr(r, knob)
    )
    if len(rows) < 2:
        raise BadInputError(
            f"{sweep_path}: fewer than two settings of {knob} with power and tokens"
        )
    return (
        [int(getattr(r, knob)) for r in rows],
        [float(r.mean_power_w or 0.0) for r in rows],
        [float(r.tokens_per_s or 0.0) for r in rows],
    )


@dataclass
class TraceEnv(LadderEnv):
    """Replay of a recorded trace under a measured knob response; same interface as SimEnv."""

    trace_path: str
    sweep_path: str
    budget_w: float
    knob: str = "concurrency"
    base: int | None = None  # the setting the trace was recorded at (default: the top)
    period_s: float = 60.0
    episode_steps: int = 50
    weights: RewardWeights = field(default_factory=RewardWeights)
    fill: str = "none"  # --fill applied to the trace's cells before replay
    time_from: str | None = None  # --from / --to: the slice of the trace replayed
    time_to: str | None = None
    replay_coverage: float = field(init=False, default=1.0)
    start_rung: int | None = None
    keep_periods: bool = False
    target: float = DEFAULT_TARGET
    memory: float = 0.9
    n_actions: int = 3
    obs_dim: int = len(POWER_OBS)
    obs_names: tuple[str, ...] = POWER_OBS  # a replayed trace says nothing of its lengths

    def __post_init__(self) -> None:
        ladder, power, tokens = response_table(self.sweep_path, self.knob)
        self.ladder = tuple(ladder)
        self.power_w, self.tokens_s = np.array(power), np.array(tokens)
        base = self.ladder[-1] if self.base is None else self.base
        if base not in self.ladder:
            raise BadInputError(f"base setting {base} is not among the sweep's {list(ladder)}")
        self.base_rung = self.ladder.index(base)
        trace = read_trace(
            self.trace_path, ImportOptions(time_from=self.time_from, time_to=self.time_to)
        )
        cells = series_cells(trace, _GRID_S, parse_fill(self.fill))
        horizon = min(c.values.size for c in cells)
        present = np.stack([c.present[:horizon] for c in cells])
        #: cells holding a sample (or a value --fill gave them) / replayed cells
        self.replay_coverage = float(present.mean())
        # The replayed GPU power: cells of every series (cells still missing after --fill carry
        # the series mean).
        self.replay = np.stack(
            [np.where(c.present, c.values, c.values[c.present].mean())[:horizon] for c in cells]
        )
        self.cells_per_period = max(1, round(self.period_s / _GRID_S))
        if horizon < 2 * self.cells_per_period:
            raise BadInputError(f"{self.trace_path}: shorter than two control periods")
        self.tokens_ref = float(self.tokens_s[-1])
        self.periods: list[Period] = []

    def reset(self, seed: int | None = None) -> np.ndarray:
        rng = np.random.default_rng(seed)
        self.cursor = int(rng.integers(self.replay.shape[1]))
        self.rung = len(self.ladder) - 1 if self.start_rung is None else self.start_rung
        self.t, self.steps, self.recent = 0.0, 0, 0.0
        self.periods = []
        return self._observe(self._period())

    def _duration(self, period: Period) -> float:
        return self.period_s

    def _period(self) -> Period:
        n = self.cells_per_period
        idx = (self.cursor + np.arange(n)) % self.replay.shape[1]
        self.cursor = int((self.cursor + n) % self.replay.shape[1])
        scale = self.power_w[self.rung] / self.power_w[self.base_rung]
        power = self.replay[:, idx] * scale
        times = self.t + np.arange(n) * _GRID_S
        self.t += n * _GRID_S
        self._track(power)
        period = Period(
            times, power, float(self.tokens_s[self.rung] * self.period_s), self.rung, 65.0
        )
        if self.keep_periods:
            self.periods.append(period)
        return period
