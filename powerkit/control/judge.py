"""Judging a trained policy (``control eval``): every arm, the policy and the baselines, run
over the same seeded jobs and summarized in an EvalReport."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from powerkit.control.baselines import (
    Arm,
    adaptive_threshold,
    allowance,
    predictive,
    random_arm,
    static,
    threshold,
    uncontrolled,
)
from powerkit.control.evaluate import (
    ArmResult,
    Episode,
    best_rule,
    calibrate_static,
    run_episode,
    summarize,
    tune_hysteresis,
)
from powerkit.control.ppo import PPO
from powerkit.control.trace_env import TraceEnv
from powerkit.control.train import TrainSpec, env_factory, ppo_arm
from powerkit.core.documents import Document, from_plain
from powerkit.core.errors import BadInputError, option
from powerkit.core.schemas import field_properties

__all__ = ["ARMS", "EvalReport", "evaluate_policy"]

ARMS = (
    "ppo",
    "uncontrolled",
    "static_safe",
    "threshold",
    "hysteresis",
    "adaptive_threshold",
    "allowance",
    "predictive",
    "random",
)


@dataclass(frozen=True)
class EvalReport(Document):
    """What ``powerkit control eval`` reports (its document holds the arms' summaries, not
    the episodes: those are the HTML page's)."""

    COMMAND: ClassVar[str] = "control eval"

    budget_w: float
    env: str
    preset: str
    knob: str
    seeds: int
    horizon_s: float
    target: float
    static_safe: int  # the knob value the static-safe arm holds
    arms: list[ArmResult]
    episodes: list[Episode]
    fill: str = "none"
    replay_coverage: float | None = None  # env "trace": present cells of the replayed trace
    settings: list[dict[str, Any]] | None = None  # joint ladder: each rung's settings
    drift: str = "none"  # env "sim": the response-length drift the jobs ran with
    #: the non-learned arm with the most tokens, each arm's ``vs_best_rule_paired`` reference
    best_rule: str | None = None

    def summary(self) -> str:
        """The evaluation in a line: job, knob, budget, seeds and horizon, the static-safe
        setting."""
        return (
            f"{self.preset}, knob {self.knob}, budget {self.budget_w:g} W, {self.seeds} seed(s) "
            f"x {self.horizon_s / 3600:g} h; static safe = {self.knob} {self.static_safe}"
        )

    @classmethod
    def schema_body(cls, defs: dict[str, Any]) -> dict[str, Any]:
        """The schema of :meth:`body` (docs/schemas/): the fields without the episodes, the
        static-safe setting under its document key and its knobs."""
        properties, required = field_properties(cls, defs)
        del properties["episodes"]
        properties["static_safe_setting"] = properties.pop("static_safe")
        properties["static_safe_knobs"] = {"anyOf": [{"type": "object"}, {"type": "null"}]}
        required = ["static_safe_setting" if k == "static_safe" else k for k in required]
        return {"properties": properties, "required": [k for k in required if k != "episodes"]}

    def body(self) -> dict[str, Any]:
        """The ``control eval --json`` document's contents."""
        return {
            "budget_w": self.budget_w,
            "env": self.env,
            "preset": self.preset,
            "knob": self.knob,
            "seeds": self.seeds,
            "horizon_s": self.horizon_s,
            "target": self.target,
            "static_safe_setting": self.static_safe,
            "fill": self.fill,
            "drift": self.drift,
            "best_rule": self.best_rule,
            "replay_coverage": self.replay_coverage,
            "settings": self.settings,
            "static_safe_knobs": None if self.settings is None else self.settings[self.static_safe],
            "arms": [asdict(a) for a in self.arms],
        }

    @classmethod
    def from_body(cls, doc: dict[str, Any]) -> EvalReport:
        """The report a document holds (without episodes: a document has none)."""
        if "static_safe_setting" not in doc:
            raise BadInputError("static_safe_setting is missing")
        plain = {**doc, "static_safe": doc["static_safe_setting"], "episodes": []}
        return from_plain(cls, plain, "document")

    def arm(self, name: str) -> ArmResult:
        """The arm called ``name``; one line naming the arms there otherwise."""
        found = next((a for a in self.arms if a.arm == name), None)
        if found is None:
            have = ", ".join(a.arm for a in self.arms) or "none"
            raise BadInputError(f"the evaluation has no {name} arm (it has {have})")
        return found


def evaluate_policy(
    agent: PPO,
    spec: TrainSpec,
    *,
    budget_w: float | None = None,
    preset: str | None = None,
    seeds: int = 5,
    horizon_s: float = 8 * 3600,
    arms: tuple[str, ...] = ARMS,
    calibration_s: float = 4 * 3600,
    keep_traces: bool = False,
    on_episode: Callable[[Episode], None] | None = None,
    fill: str | None = None,
    drift: str | None = None,
) -> EvalReport:
    """Run every arm over ``seeds`` fresh jobs (seeds 1000, 1001, ...) for ``horizon_s``.

    The static-safe rung and the hysteresis thresholds are chosen on the training conditions
    (the training seed) before any evaluation seed is seen; ``drift`` (None: the policy's)
    is the simulated jobs' response-length drift.
    """
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise BadInputError(f"unknown arm(s) {', '.join(unknown)} (one of {', '.join(ARMS)})")
    if drift is not None and spec.env != "sim":
        raise BadInputError(f"{option('drift')} applies to a policy trained on {option('env')} sim")
    given = {
        "budget_w": budget_w or spec.budget_w,
        "preset": preset or spec.preset,
        "drift": drift or spec.drift,
    }
    run_spec = TrainSpec(**{**asdict(spec), **given})
    fill = spec.fill if fill is None else fill
    make = env_factory(run_spec, fill=fill)
    probe = make() if run_spec.env == "trace" else None
    coverage = probe.replay_coverage if isinstance(probe, TraceEnv) else None
    rungs = len(run_spec.ladder)
    safe, table = calibrate_static(make, rungs, spec.target, spec.seed, calibration_s)
    chosen: dict[str, Arm] = {
        "ppo": ppo_arm(agent, spec),
        "uncontrolled": uncontrolled(rungs),
        "static_safe": static(safe, rungs),
        "threshold": threshold(),
        "adaptive_threshold": adaptive_threshold(spec.target),
        "allowance": allowance(spec.target),
        "predictive": predictive(table, rungs),
        "random": random_arm(spec.seed),
    }
    if "hysteresis" in arms:
        chosen["hysteresis"] = tune_hysteresis(make, spec.target, spec.seed, calibration_s)
    episodes: list[Episode] = []
    for name in arms:
        for s in range(seeds):
            episode = run_episode(make, chosen[name], 1000 + s, horizon_s, keep_traces)
            episodes.append(episode)
            if on_episode:
                on_episode(episode)
    results = summarize(episodes)
    if spec.settings:  # joint ladder: how much of the time each arm spent under a power cap
        capped = {k for k, s in enumerate(spec.settings) if s.get("power_cap_w") is not None}
        for i, r in enumerate(results):
            shares = [np.isin(e.rungs, list(capped)).mean() for e in episodes if e.arm == r.arm]
            results[i] = dataclasses.replace(
                r, cap_share=float(np.mean(shares)) if shares else None
            )
    return EvalReport(
        run_spec.budget_w,
        run_spec.env,
        run_spec.preset,
        run_spec.knob,
        seeds,
        horizon_s,
        spec.target,
        run_spec.ladder[safe],
        results,
        episodes,
        fill=fill,
        replay_coverage=coverage,
        settings=spec.settings,
        drift=run_spec.drift,
        best_rule=best_rule(results),
    )
