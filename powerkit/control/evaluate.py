"""Judge controllers: every arm over seeds, violation rates at 0.5 s and 30 s (the windows
code), tokens, tokens/MWh and Wh per 1k tokens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from powerkit.analysis.windows import windowed_violations
from powerkit.control.baselines import Arm, hysteresis, static
from powerkit.control.env import SimEnv
from powerkit.control.trace_env import TraceEnv
from powerkit.core.errors import BadInputError, option
from powerkit.core.tables import Column
from powerkit.core.units import PowerSpec, format_duration, format_value
from powerkit.sim.settings import SIM_EPOCH_S
from powerkit.trace.model import Trace
from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical

ControlEnv = SimEnv | TraceEnv

__all__ = [
    "ArmResult",
    "ControlEnv",
    "Episode",
    "best_rule",
    "calibrate_static",
    "run_episode",
    "summarize",
    "tune_hysteresis",
]


@dataclass
class Episode:
    """One arm, one seed: what the job did under control."""

    arm: str
    seed: int
    violation_rate_0_5s: float
    violation_rate_30s: float
    tokens: float
    energy_j: float
    rungs: list[int] = field(default_factory=list)
    times_s: np.ndarray | None = None
    power_w: np.ndarray | None = None  # summed over GPUs, per sample (for figures)
    gpus: int = 1
    #: the 95th percentile of every GPU's samples over the budget (the predictive arm's table)
    p95_over_budget: float | None = None

    @property
    def tokens_per_mwh(self) -> float:
        return self.tokens / (self.energy_j / 3.6e9)

    @property
    def wh_per_1k_tokens(self) -> float:
        return (self.energy_j / 3600) / (self.tokens / 1000)


def run_episode(
    make_env: Callable[[], ControlEnv],
    arm: Arm,
    seed: int,
    horizon_s: float,
    keep_trace: bool = False,
) -> Episode:
    """Run ``arm`` for ``horizon_s`` seconds of the job from a fresh start and judge it with
    the windows code. Arms are compared over the same time, not the same number of steps (a
    larger group makes longer steps)."""
    env = make_env()
    env.keep_periods = True
    if arm.start_rung is not None:
        env.start_rung = arm.start_rung
    obs = env.reset(seed=seed)
    while env.t < horizon_s:
        obs, _, _, _ = env.step(arm.policy(obs))
    periods = env.periods[1:]  # the first period ran before any decision
    if not periods:
        raise BadInputError(
            f"{option('horizon')} {format_duration(horizon_s)} ends before the first control "
            "decision "
            f"has run (the job's first period took {format_duration(env.t)}); give a longer "
            f"{option('horizon')}"
        )
    times = np.concatenate([p.times_s for p in periods])
    power = np.concatenate([p.power_w for p in periods], axis=1)
    gpus = power.shape[0]
    frame = pl.DataFrame(
        {
            "ts": pl.Series(
                np.tile(np.round((SIM_EPOCH_S + times) * 1e6).astype(np.int64), gpus)
            ).cast(pl.Datetime("us", "UTC")),
            "host": ["sim"] * power.size,
            "gpu": np.repeat(np.arange(gpus), times.size).astype(np.int16),
            "power_w": power.ravel(),
        }
    )
    meta = TraceMeta(source="sim", gpus=[GpuMeta("sim", g) for g in range(gpus)])
    trace = Trace(meta=meta, table_=to_canonical(frame), origin=f"{arm.name}-{seed}")
    report = windowed_violations(trace, PowerSpec(watts=env.budget_w), [0.5, 30.0])
    rates = [w.violation_rate or 0.0 for w in report.windows]
    energy = float(
        sum(p.power_w.mean(axis=1).sum() * (p.times_s[-1] - p.times_s[0] + 0.5) for p in periods)
    )
    episode = Episode(
        arm.name,
        seed,
        rates[0],
        rates[1],
        float(sum(p.tokens for p in periods)),
        energy,
        [p.rung for p in periods],
        times if keep_trace else None,
        power.sum(axis=0) if keep_trace else None,
    )
    episode.gpus = gpus
    episode.p95_over_budget = float(np.percentile(power, 95)) / env.budget_w
    return episode


def calibrate_static(
    make_env: Callable[[], ControlEnv], rungs: int, target: float, seed: int, horizon_s: float
) -> tuple[int, list[float]]:
    """Return the largest rung whose 0.5 s violation rate on the training conditions is
    under ``target`` (the lowest rung when none is), and each rung's p95 power over budget
    there (the response table the predictive arm plans with)."""
    best = 0
    table = []
    for rung in range(rungs):
        episode = run_episode(make_env, static(rung, rungs), seed, horizon_s)
        if episode.violation_rate_0_5s < target:
            best = rung
        table.append(float(episode.p95_over_budget or 0.0))
    return best, table


def tune_hysteresis(
    make_env: Callable[[], ControlEnv], target: float, seed: int, horizon_s: float
) -> Arm:
    """Return the hysteresis rule (low, high on p95 / budget) with the most tokens whose
    violation rate on the training conditions is under ``target``."""
    best: tuple[float, Arm] | None = None
    for low in (0.6, 0.7, 0.8, 0.9):
        for high in (0.9, 0.95, 1.0, 1.05, 1.1):
            if high <= low:
                continue
            arm = hysteresis(low, high)
            e = run_episode(make_env, arm, seed, horizon_s)
            if e.violation_rate_0_5s < target and (best is None or e.tokens > best[0]):
                best = (e.tokens, arm)
    return best[1] if best else hysteresis(0.6, 0.9)


@dataclass(frozen=True)
class ArmResult:
    """Mean and std over seeds of one arm's figures, with changes against the references."""

    arm: str
    violation_rate_0_5s: dict[str, float]
    violation_rate_30s: dict[str, float]
    tokens: dict[str, float]
    tokens_per_mwh: dict[str, float]
    wh_per_1k_tokens: dict[str, float]
    vs_uncontrolled: dict[str, float | None] = field(default_factory=dict)
    vs_static_safe: dict[str, float | None] = field(default_factory=dict)
    #: the changes seed by seed (the arms share their evaluation jobs): mean and 95 % interval
    vs_uncontrolled_paired: dict[str, dict[str, float] | None] = field(default_factory=dict)
    vs_static_safe_paired: dict[str, dict[str, float] | None] = field(default_factory=dict)
    #: the same against the best rule (``best_rule``: the non-learned arm with most tokens)
    vs_best_rule_paired: dict[str, dict[str, float] | None] = field(default_factory=dict)
    per_seed: list[dict[str, float]] = field(default_factory=list)
    cap_share: float | None = None  # joint ladder: share of periods under a power cap


def _ci(stat: dict[str, float], scale: float, spec: str) -> str:
    """mean [95 % interval] over seeds."""
    return (
        f"{stat['mean'] * scale:{spec}} [{stat['ci95_low'] * scale:{spec}}, "
        f"{stat['ci95_high'] * scale:{spec}}]"
    )


def _share(value: float | None, spec: str, what: str) -> str:
    return f"{format_value(None if value is None else 100 * value, spec)}% {what}"


#: the arms table of ``powerkit control eval`` (means over seeds, with their 95 % intervals)
ARM_COLUMNS = (
    Column("arm", "arm", key=True),
    Column("viol 0.5s", lambda a: _ci(a.violation_rate_0_5s, 100, ".2f") + "%"),
    Column("viol 30s", lambda a: f"{100 * a.violation_rate_30s['mean']:.2f}%"),
    Column("tokens M", lambda a: _ci(a.tokens, 1e-6, ".2f")),
    Column("tok/MWh M", lambda a: _ci(a.tokens_per_mwh, 1e-6, ".0f")),
    Column("Wh/1k", lambda a: f"{a.wh_per_1k_tokens['mean']:.3f}"),
    Column(
        "vs unc.", lambda a: _share(a.vs_uncontrolled.get("violation_rate_0_5s"), "+.0f", "viol")
    ),
    Column("vs safe", lambda a: _share(a.vs_static_safe.get("tokens"), "+.1f", "tok")),
    Column("vs rule", lambda a: _share(_mean(a.vs_best_rule_paired.get("tokens")), "+.1f", "tok")),
)


def _mean(stat: dict[str, float] | None) -> float | None:
    return None if stat is None else stat["mean"]


def _ms(values: list[float]) -> dict[str, float]:
    """Mean, standard deviation and the 95 % interval of the mean (Student's t) over seeds."""
    from scipy.stats import t as student

    a = np.asarray(values, dtype=float)
    std = float(a.std(ddof=1)) if a.size > 1 else 0.0
    half = float(student.ppf(0.975, a.size - 1)) * std / np.sqrt(a.size) if a.size > 1 else 0.0
    mean = float(a.mean())
    return {"mean": mean, "std": std, "ci95_low": mean - half, "ci95_high": mean + half}


#: arms that are not rules a user would run in place of the learned policy
_NOT_RULES = ("ppo", "uncontrolled", "random")


def best_rule(results: list[ArmResult]) -> str | None:
    """The non-learned controller with the most tokens (mean over seeds): what the learned
    policy must beat to earn its learning (None: no such arm ran)."""
    rules = [r for r in results if r.arm not in _NOT_RULES]
    return max(rules, key=lambda r: r.tokens["mean"]).arm if rules else None


def summarize(episodes: list[Episode]) -> list[ArmResult]:
    """Return one ArmResult per arm, in the order the arms first appear."""
    arms = list(dict.fromkeys(e.arm for e in episodes))
    results = []
    for arm in arms:
        es = [e for e in episodes if e.arm == arm]
        results.append(
            ArmResult(
                arm,
                _ms([e.violation_rate_0_5s for e in es]),
                _ms([e.violation_rate_30s for e in es]),
                _ms([e.tokens for e in es]),
                _ms([e.tokens_per_mwh for e in es]),
                _ms([e.wh_per_1k_tokens for e in es]),
                per_seed=[
                    {
                        "seed": e.seed,
                        "violation_rate_0_5s": e.violation_rate_0_5s,
                        "violation_rate_30s": e.violation_rate_30s,
                        "tokens": e.tokens,
                        "tokens_per_mwh": e.tokens_per_mwh,
                    }
                    for e in es
                ],
            )
        )
    by_name = {r.arm: r for r in results}
    rule = best_rule(results)
    for r in results:
        for ref, slot, paired in (
            ("uncontrolled", r.vs_uncontrolled, r.vs_uncontrolled_paired),
            ("static_safe", r.vs_static_safe, r.vs_static_safe_paired),
            (rule, {}, r.vs_best_rule_paired),
        ):
            base = by_name.get(ref or "")
            if base is None:
                continue
            base_by_seed = {p["seed"]: p for p in base.per_seed}
            for key in ("violation_rate_0_5s", "tokens", "tokens_per_mwh"):
                b = getattr(base, key)["mean"]
                slot[key] = None if b == 0 else getattr(r, key)["mean"] / b - 1.0
                changes = [
                    p[key] / base_by_seed[p["seed"]][key] - 1.0
                    for p in r.per_seed
                    if base_by_seed.get(p["seed"], {}).get(key)
                ]
                paired[key] = _ms(changes) if changes else None
    return results
