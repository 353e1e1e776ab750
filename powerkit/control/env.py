"""Control environments: one decision per control period, observations relative to budget.

The MDP (docs/control.md): the action moves the knob one rung down, holds it, or moves it one
rung up its ladder; the period is one GRPO step (``sim``) or a fixed time (``trace``). The
observation is the last period's power statistics relative to the budget, its violation
share, the knob's rung, its throughput and the GPU temperature. The reward is tokens minus a
penalty on energy above the budget minus a small cost per knob change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from powerkit.core.errors import BadInputError, option
from powerkit.sim.model import GrpoSim
from powerkit.sim.presets import Preset
from powerkit.sim.settings import DRIFTS, Knobs

__all__ = [
    "CAP_SHARES",
    "DEFAULT_TARGET",
    "DOWN",
    "HOLD",
    "KNOB_NAMES",
    "LENGTH_OBS",
    "OBS_SPEC",
    "POWER_OBS",
    "UP",
    "Lengths",
    "Period",
    "RewardWeights",
    "SimEnv",
    "joint_ladder",
    "observe",
    "shielded",
]

KNOB_NAMES = ("group_size", "concurrency", "joint")
#: the power caps (shares of the budget) the joint ladder adds below the workload knobs
CAP_SHARES = (0.85, 0.9, 0.95, 1.0, 1.1)
#: what every environment observes (a policy trained before the length features observes
#: these alone, and runs on them still)
POWER_OBS = (
    "mean_over_budget",
    "p95_over_budget",
    "max_over_budget",
    "violation_share",
    "rung",
    "tokens_rel",
    "temp_rel",
    "recent_share_over_target",
)
#: what a trainer knows of its last GRPO step's responses (``Lengths``)
LENGTH_OBS = ("length_mean_rel", "length_p95_rel", "length_trend")
OBS_SPEC = POWER_OBS + LENGTH_OBS
DOWN, HOLD, UP = 0, 1, 2
#: the share of 0.5 s samples over budget a controller may spend, unless told otherwise
DEFAULT_TARGET = 0.03
_SAMPLE_S = 0.5
_MARGIN_S = 0.3  # stop sampling this short of a step's end, so the next step is not scheduled


def shielded(action: int, recent_over_target: float, last_share: float, target: float) -> int:
    """The violation shield. While the recent share of 0.5 s samples over budget (an
    exponential average) is above the target, the controller may not step up; if the last
    period itself broke the budget more often than the target allows, it steps down whatever
    it chose. Under the target its choice stands: the learner decides how to spend the
    allowance, the shield keeps it from overspending."""
    if recent_over_target <= 0:
        return action
    return DOWN if last_share > target else min(action, HOLD)


@dataclass(frozen=True)
class RewardWeights:
    """reward = tokens * (tokens/s / reference) - violation * (excess / budget)
    - target * max(0, recent violation share - target share) - switch * (knob changed)."""

    tokens: float = 1.0
    violation: float = 2.0
    target: float = 10.0
    switch: float = 0.01


@dataclass
class Period:
    """One control period: its samples (s, W per GPU), tokens made, and the rung used;
    ``lengths``: the (mean, p95) response length in tokens of each GRPO step that ended in
    it, where known."""

    times_s: np.ndarray
    power_w: np.ndarray
    tokens: float
    rung: int
    temp_c: float
    lengths: list[tuple[float, float]] = field(default_factory=list)


#: weights of the fast and slow exponential averages of the mean length (per step)
_FAST, _SLOW = 0.5, 0.05


@dataclass
class Lengths:
    """What a trainer knows of its responses before the next step: the last step's mean and
    p95 response length relative to ``ref_tokens`` (the job's nominal mean), and the recent
    trend — a fast (weight 0.5 a step) over a slow (0.05) exponential average of the mean
    length, minus 1: positive while lengths grow. Until a step has ended the features stand at
    the nominal job's (mean 1, ``p95_rel``, trend 0)."""

    ref_tokens: float
    p95_rel: float = 1.0
    mean_rel: float = 1.0
    fast: float | None = None
    slow: float | None = None

    def update(self, mean: float, p95: float) -> None:
        """Fold in one ended step's mean and p95 response length (tokens)."""
        self.mean_rel, self.p95_rel = mean / self.ref_tokens, p95 / self.ref_tokens
        if self.fast is None or self.slow is None:
            self.fast = self.slow = self.mean_rel
        else:
            self.fast += _FAST * (self.mean_rel - self.fast)
            self.slow += _SLOW * (self.mean_rel - self.slow)

    def features(self) -> list[float]:
        """The LENGTH_OBS features."""
        trend = 0.0 if not self.fast or not self.slow else self.fast / self.slow - 1.0
        return [self.mean_rel, self.p95_rel, trend]


def nominal_lengths(preset: Preset) -> Lengths:
    """The length features' tracker for ``preset``: relative to its mean response length,
    starting at the p95 of its per-sequence lengths (lognormal, ``seq_cv``)."""
    sigma = float(np.sqrt(np.log1p(preset.seq_cv**2)))
    p95 = float(np.exp(1.6448536 * sigma - sigma * sigma / 2))
    return Lengths(preset.response_tokens, min(p95, preset.max_response_ratio))


class LadderEnv:
    """What every control environment shares: moves along the ladder, the reward, the
    observation. Subclasses run periods (``_period``) and say how long one lasted."""

    budget_w: float
    ladder: tuple[int, ...]
    episode_steps: int
    weights: RewardWeights
    target: float
    memory: float
    tokens_ref: float
    rung: int
    steps: int
    recent: float
    last_share: float = 0.0  # the last period's share of samples over budget
    shield: bool = False  # apply ``shielded`` to every action (a shielded policy's job)
    lengths: Lengths | None = None  # observed response lengths (None: not observed)

    def _period(self) -> Period:
        raise NotImplementedError

    def _apply(self, rung: int) -> None:
        """Put the workload at ``rung`` (before the next period runs)."""

    def _duration(self, period: Period) -> float:
        raise NotImplementedError

    def set_rung(self, rung: int) -> Period:
        """Apply a rung directly (baselines) and run one period."""
        self.rung = int(np.clip(rung, 0, len(self.ladder) - 1))
        self._apply(self.rung)
        return self._period()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, dict[str, Any]]:
        """Move one rung down (0), hold (1) or up (2); run the next period."""
        if self.shield:
            action = shielded(action, self.recent - self.target, self.last_share, self.target)
        before = self.rung
        period = self.set_rung(self.rung + action - 1)
        self.steps += 1
        reward = self.reward(period, switched=self.rung != before)
        return self._observe(period), reward, self.steps >= self.episode_steps, {"period": period}

    def reward(self, period: Period, switched: bool) -> float:
        """Return the reward of one period."""
        w = self.weights
        excess = float(np.maximum(period.power_w - self.budget_w, 0.0).mean()) / self.budget_w
        tokens = period.tokens / self._duration(period) / self.tokens_ref
        over = max(0.0, self.recent - self.target)
        return w.tokens * tokens - w.violation * excess - w.target * over - w.switch * switched

    def _track(self, power_w: np.ndarray) -> None:
        """Fold a period's share of samples over budget into the recent share."""
        share = float((power_w > self.budget_w).mean())
        self.last_share = share
        self.recent = self.memory * self.recent + (1 - self.memory) * share

    def _observe(self, period: Period) -> np.ndarray:
        if self.lengths is not None:
            for mean, p95 in period.lengths:
                self.lengths.update(mean, p95)
        return observe(
            period,
            self.budget_w,
            self.rung,
            len(self.ladder),
            self.tokens_ref,
            self.recent - self.target,
            self.lengths,
        )


@dataclass
class SimEnv(LadderEnv):
    """The simulated GRPO job as an environment: a decision per GRPO step."""

    preset: Preset
    budget_w: float
    knob: str = "group_size"
    ladder: tuple[int, ...] = ()
    episode_steps: int = 50
    weights: RewardWeights = field(default_factory=RewardWeights)
    start_rung: int | None = None  # default: the top of the ladder (the uncontrolled setting)
    target: float = DEFAULT_TARGET  # share of 0.5 s samples over budget it may spend
    memory: float = 0.9  # the recent share is an exponential average with this weight
    keep_periods: bool = False
    n_actions: int = 3
    obs_dim: int = len(OBS_SPEC)
    obs_names: tuple[str, ...] = OBS_SPEC
    #: ``joint``: the ladder's settings (default: ``joint_ladder`` for this preset and budget)
    joint: tuple[Knobs, ...] = ()
    #: how the job's response lengths move over training (powerkit.sim.DRIFTS)
    drift: str = "none"
    #: ``concurrency``: a control period of this many seconds of the job, a knob change
    #: taking effect within the running rollout (None: one GRPO step, a change taking effect
    #: at the next step)
    period_s: float | None = None
    #: a drifting job's episodes start at a training step drawn from [0, this) (training
    #: sees the lengths of late training too); 0: every job starts at step 0
    drift_starts: int = 0

    def __post_init__(self) -> None:
        if self.knob not in KNOB_NAMES:
            raise BadInputError(f"{option('knob')} {self.knob!r}: one of {', '.join(KNOB_NAMES)}")
        if self.drift not in DRIFTS:
            raise BadInputError(f"{option('drift')} {self.drift!r}: one of {', '.join(DRIFTS)}")
        if self.period_s is not None and self.knob != "concurrency":
            raise BadInputError(
                f"{option('period')} on the simulator applies to {option('knob')} concurrency "
                "(a group size "
                "or a power cap takes effect at a GRPO step's boundary)"
            )
        if self.period_s is not None and not _SAMPLE_S <= self.period_s <= 3600:
            raise BadInputError(f"{option('period')} {self.period_s:g}s: between 0.5 s and 1 h")
        self.settings: list[Knobs] = []
        if self.knob == "joint":
            self.settings = list(self.joint) or joint_ladder(self.preset, self.budget_w)
            self.ladder = tuple(range(len(self.settings)))
        elif not self.ladder:
            self.ladder = (
                self.preset.group_ladder
                if self.knob == "group_size"
                else self.preset.concurrency_ladder
            )
        self.tokens_ref = self._reference_tokens()
        self.periods: list[Period] = []

    def _knobs(self, rung: int) -> Knobs:
        if self.settings:
            return self.settings[rung]
        p = self.preset
        return Knobs(p.group_size, p.concurrency).with_knob(self.knob, self.ladder[rung])

    def _reference_tokens(self) -> float:
        """Tokens/s of one step at the top rung: the scale of the tokens reward."""
        sim = GrpoSim(self.preset, self._knobs(len(self.ladder) - 1), seed=0)
        start, end = sim.schedule_step(0.0)
        s = sim.sample(np.array([start, end - _MARGIN_S]))
        return float(s.tokens[-1] - s.tokens[0]) / (end - start)

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start a fresh job (seeded) at the start rung; return the first observation."""
        top = len(self.ladder) - 1
        self.rung = top if self.start_rung is None else self.start_rung
        first = 0
        if self.drift_starts > 0 and self.drift != "none":
            first = int(np.random.default_rng([seed or 0, 7]).integers(self.drift_starts))
        self.sim = GrpoSim(
            self.preset,
            self._knobs(self.rung),
            seed=seed or 0,
            drift=DRIFTS[self.drift],
            drift_from=first,
        )
        self.t, self.steps = 0.0, 0
        self.recent = 0.0
        self.periods = []
        self.lengths = nominal_lengths(self.preset)
        self._reported = -1  # the last step whose lengths the observation has seen
        return self._observe(self._period())

    def _apply(self, rung: int) -> None:
        self.sim.set_knobs(self._knobs(rung), now=None if self.period_s is None else self.t)

    def _duration(self, period: Period) -> float:
        if self.period_s is not None:
            return self.period_s
        return max(period.times_s[-1] - period.times_s[0], _SAMPLE_S)

    def _period(self) -> Period:
        if self.period_s is None:
            start, end = self.sim.schedule_step(self.t)
            times = np.arange(start, max(end - _MARGIN_S, start + _SAMPLE_S), _SAMPLE_S)
            s = self.sim.sample(times)
            power, tokens, ended = s.power_w, float(s.tokens[-1] - s.tokens[0]), int(s.step[0])
        else:  # a fixed period; its tokens counted to its end
            start, end = self.t, self.t + self.period_s
            times = np.arange(start, end, _SAMPLE_S)
            s = self.sim.sample(np.append(times, end))
            power, tokens = s.power_w[:, :-1], float(s.tokens[-1] - s.tokens[0])
            ended = int(s.step[-1]) - 1  # the steps before the one running at its end
        self.t = end
        self._track(power)
        lengths = self.sim.lengths_between(self._reported, ended)
        self._reported = max(self._reported, ended)
        period = Period(times, power, tokens, self.rung, float(s.temp_c.mean()), lengths)
        if self.keep_periods:
            self.periods.append(period)
        return period


def observe(
    period: Period,
    budget_w: float,
    rung: int,
    rungs: int,
    tokens_ref: float,
    recent_over_target: float,
    lengths: Lengths | None = None,
) -> np.ndarray:
    """Return the observation vector of one period: POWER_OBS, then LENGTH_OBS from
    ``lengths`` (already updated with the period's steps) when it is given."""
    p = period.power_w
    duration = max(period.times_s[-1] - period.times_s[0], _SAMPLE_S)
    power = [
        p.mean() / budget_w,
        np.percentile(p, 95) / budget_w,
        p.max() / budget_w,
        float((p > budget_w).mean()),
        rung / max(rungs - 1, 1),
        period.tokens / duration / tokens_ref,
        period.temp_c / 100.0,
        recent_over_target,
    ]
    return np.array(power + ([] if lengths is None else lengths.features()))


def joint_ladder(preset: Preset, budget_w: float, steps: int = 3) -> list[Knobs]:
    """Group size, concurrency and (as a last resort) the power cap as one ladder, from the
    least power to the most: the (group size, concurrency) settings that no other setting beats
    on both mean power and tokens/s (measured on ``steps`` simulated GRPO steps, seed 0), in
    order of power; below the least of them, the same setting under power caps at
    ``CAP_SHARES`` of the budget (those under the nameplate). One rung down always costs power
    and throughput, one up buys both, and the cap is reached only once the workload knobs are
    at their floor."""
    measured = []
    for g in preset.group_ladder:
        for c in preset.concurrency_ladder:
            knobs = Knobs(g, c)
            sim = GrpoSim(preset, knobs, seed=0)
            start, _ = sim.schedule_step(0.0)
            end = start
            for _ in range(steps):
                _, end = sim.schedule_step(end)
            times = np.arange(start, end - _MARGIN_S, _SAMPLE_S)
            sample = sim.sample(times)
            rate = float(sample.tokens[-1] - sample.tokens[0]) / (times[-1] - times[0])
            measured.append((float(sample.power_w.mean()), rate, knobs))
    measured.sort(key=lambda m: (m[0], -m[1]))
    front: list[tuple[float, float, Knobs]] = []
    for power, rate, knobs in measured:  # keep a setting only if it buys throughput
        if not front or rate > front[-1][1]:
            front.append((power, rate, knobs))
    low = front[0][2]
    caps = [share * budget_w for share in CAP_SHARES]
    capped = [
        Knobs(low.group_size, low.concurrency, cap)
        for cap in caps
        if preset.idle_w < cap < preset.tdp_w
    ]
    return capped + [knobs for _, _, knobs in front]
