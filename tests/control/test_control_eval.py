"""Baseline controllers and the evaluation harness."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from powerkit.control.baselines import hysteresis, random_arm, static, threshold, uncontrolled
from powerkit.control.env import OBS_SPEC, SimEnv
from powerkit.control.evaluate import Episode, calibrate_static, run_episode, summarize
from powerkit.sim import get_preset
from tests.conftest import Cli


def obs(p95: float, rung: float) -> np.ndarray:
    o = np.zeros(len(OBS_SPEC))
    o[OBS_SPEC.index("p95_over_budget")] = p95
    o[OBS_SPEC.index("rung")] = rung
    return o


def test_rule_arms() -> None:
    rule = threshold()
    assert [rule.policy(obs(x, 0.5)) for x in (0.95, 0.8, 0.6)] == [0, 1, 2]
    tuned = hysteresis(0.8, 1.0)
    assert [tuned.policy(obs(x, 0.5)) for x in (1.05, 0.9, 0.7)] == [0, 1, 2]
    assert uncontrolled(4).policy(obs(2.0, 1 / 3)) == 2  # always up to the top rung
    fixed = static(1, 4)
    assert [fixed.policy(obs(0, r / 3)) for r in range(4)] == [2, 1, 0, 0]
    arm = random_arm(0)
    moves = {arm.policy(obs(0, 0)) for _ in range(50)}
    assert moves == {0, 1, 2}


def make() -> SimEnv:
    return SimEnv(get_preset("a100-7b"), 314.6, "group_size")


def test_episode_runs_for_the_horizon_and_is_judged_by_windows() -> None:
    e = run_episode(make, uncontrolled(4), seed=1, horizon_s=1800, keep_trace=True)
    assert e.times_s is not None and e.times_s[-1] - e.times_s[0] >= 1500
    assert 0.2 < e.violation_rate_0_5s < 0.6  # group size 16 breaks 314.6 W in training
    assert e.tokens > 0 and e.energy_j > 0
    assert e.wh_per_1k_tokens == pytest.approx(e.energy_j / 3600 / (e.tokens / 1000))
    quiet = run_episode(make, static(0, 4), seed=1, horizon_s=1800)
    assert quiet.violation_rate_0_5s < e.violation_rate_0_5s and quiet.tokens < e.tokens


def test_static_safe_is_the_largest_rung_under_target() -> None:
    rung, table = calibrate_static(make, 4, 0.05, seed=0, horizon_s=3600)
    assert len(table) == 4 and table == sorted(table)  # a larger group draws more
    under = run_episode(make, static(rung, 4), 0, 3600).violation_rate_0_5s
    assert under < 0.05
    if rung < 3:
        assert run_episode(make, static(rung + 1, 4), 0, 3600).violation_rate_0_5s >= 0.05


def test_adaptive_threshold_and_predictive_baselines() -> None:
    from powerkit.control.baselines import adaptive_threshold, predictive
    from powerkit.control.env import OBS_SPEC

    def obs(p95: float, rung: float = 0.0, recent: float = 0.0) -> np.ndarray:
        x = np.zeros(len(OBS_SPEC))
        x[OBS_SPEC.index("p95_over_budget")] = p95
        x[OBS_SPEC.index("rung")] = rung
        x[OBS_SPEC.index("recent_share_over_target")] = recent
        return x

    arm = adaptive_threshold(0.05)
    assert arm.policy(obs(0.88)) == 1  # between 0.7 and 0.9: hold
    for _ in range(3):  # violations above target: the upper threshold comes down
        arm.policy(obs(0.5, recent=0.02))
    assert arm.policy(obs(0.86)) == 0  # 0.86 is now above it: shrink
    table = [0.6, 0.8, 0.95, 1.2]  # p95 over budget per rung on the training conditions
    mpc = predictive(table, 4)
    assert mpc.policy(obs(0.6, rung=0.0)) == 2  # as predicted: rung 2 fits, move up
    assert mpc.policy(obs(0.95, rung=2 / 3)) == 1  # at the largest rung that fits: hold
    assert mpc.policy(obs(1.1, rung=2 / 3)) == 0  # hotter than predicted: step down
    assert mpc.policy(obs(0.5, rung=2 / 3)) == 2  # cooler than predicted: rung 3 fits


def test_the_shield_and_the_allowance_arm() -> None:
    from powerkit.control.baselines import allowance
    from powerkit.control.env import DOWN, HOLD, UP, shielded

    for action in (DOWN, HOLD, UP):  # under the target: the choice stands
        assert shielded(action, -0.01, 0.5, 0.03) == action
    # over the target: no step up; a down move if the last period itself broke the target
    assert [shielded(a, 0.01, 0.0, 0.03) for a in (DOWN, HOLD, UP)] == [DOWN, HOLD, HOLD]
    assert [shielded(a, 0.01, 0.2, 0.03) for a in (DOWN, HOLD, UP)] == [DOWN] * 3
    x = np.zeros(len(OBS_SPEC))
    arm = allowance(0.03)
    assert arm.policy(x) == UP  # allowance left: up
    x[OBS_SPEC.index("recent_share_over_target")] = 0.01
    assert arm.policy(x) == HOLD
    x[OBS_SPEC.index("violation_share")] = 0.1
    assert arm.policy(x) == DOWN


def test_a_shielded_policy_is_shielded_in_training_and_evaluation(tmp_path: Path) -> None:
    from powerkit.control.train import load_policy, ppo_arm, train_policy

    spec = train_policy("a100-7b", 314.6, "group_size", tmp_path / "p.npz", steps=50)
    agent, loaded = load_policy(tmp_path / "p.npz")
    assert spec.shield and loaded.shield
    x = np.zeros(len(OBS_SPEC))
    x[OBS_SPEC.index("recent_share_over_target")] = 0.01
    x[OBS_SPEC.index("violation_share")] = 0.5
    assert ppo_arm(agent, loaded).policy(x) == 0  # whatever the network says
    env = SimEnv(get_preset("a100-7b"), 314.6, start_rung=2)
    env.reset(seed=1)
    env.shield, env.recent, env.last_share = True, 0.5, 0.5
    env.step(2)
    assert env.rung == 1  # asked up, stepped down


def test_summary_and_relative_changes() -> None:
    episodes = [
        Episode("uncontrolled", 0, 0.4, 0.3, 100.0, 3.6e9),
        Episode("uncontrolled", 1, 0.2, 0.1, 300.0, 3.6e9),
        Episode("static_safe", 0, 0.02, 0.0, 100.0, 1.8e9),
        Episode("ppo", 0, 0.03, 0.0, 150.0, 1.8e9),
    ]
    arms = {r.arm: r for r in summarize(episodes)}
    u = arms["uncontrolled"]
    std = np.std([0.4, 0.2], ddof=1)
    half = 12.706 * std / np.sqrt(2)  # Student's t, 1 degree of freedom, 97.5 %
    assert u.violation_rate_0_5s == {
        "mean": pytest.approx(0.3),
        "std": pytest.approx(std),
        "ci95_low": pytest.approx(0.3 - half, rel=1e-4),
        "ci95_high": pytest.approx(0.3 + half, rel=1e-4),
    }
    assert [s["seed"] for s in u.per_seed] == [0, 1] and u.per_seed[1]["tokens"] == 300.0
    assert u.tokens_per_mwh["mean"] == pytest.approx(200.0)
    p = arms["ppo"]
    assert p.vs_uncontrolled["violation_rate_0_5s"] == pytest.approx(0.03 / 0.3 - 1)
    assert p.vs_static_safe["tokens"] == pytest.approx(0.5)
    assert p.vs_static_safe["tokens_per_mwh"] == pytest.approx(300 / 200 - 1)
    # seed by seed: ppo ran seed 0 only, where uncontrolled made 100 tokens (not the mean 200)
    assert p.vs_uncontrolled_paired["tokens"]["mean"] == pytest.approx(150 / 100 - 1)
    assert p.vs_static_safe_paired["tokens"]["ci95_low"] == pytest.approx(0.5)
    two = summarize(
        [
            Episode("static_safe", 0, 0.0, 0.0, 100.0, 1e9),
            Episode("static_safe", 1, 0.0, 0.0, 200.0, 1e9),
            Episode("ppo", 0, 0.0, 0.0, 110.0, 1e9),
            Episode("ppo", 1, 0.0, 0.0, 230.0, 1e9),
        ]
    )[1]
    changes = [0.10, 0.15]  # paired: a tighter interval than the spread of tokens suggests
    half = 12.706 * np.std(changes, ddof=1) / np.sqrt(2)
    assert two.vs_static_safe_paired["tokens"]["ci95_low"] == pytest.approx(0.125 - half, rel=1e-4)
    assert two.vs_static_safe_paired["violation_rate_0_5s"] is None  # no violations to compare


def test_the_best_rule_is_the_non_learned_arm_with_most_tokens() -> None:
    """best_rule: the allowance arm here (more tokens than static safe; uncontrolled and
    random are not rules one would run instead), and each arm's change against it seed by
    seed."""
    from powerkit.control.evaluate import best_rule

    episodes = [
        Episode("uncontrolled", 0, 0.3, 0.1, 900.0, 1e9),
        Episode("random", 0, 0.1, 0.0, 500.0, 1e9),
        Episode("static_safe", 0, 0.01, 0.0, 100.0, 1e9),
        Episode("allowance", 0, 0.04, 0.0, 120.0, 1e9),
        Episode("ppo", 0, 0.03, 0.0, 132.0, 1e9),
    ]
    results = summarize(episodes)
    assert best_rule(results) == "allowance"
    ppo = next(r for r in results if r.arm == "ppo")
    assert ppo.vs_best_rule_paired["tokens"]["mean"] == pytest.approx(0.1)
    assert ppo.vs_best_rule_paired["violation_rate_0_5s"]["mean"] == pytest.approx(-0.25)
    assert best_rule(summarize(episodes[:2])) is None


def test_a_policy_trains_and_is_judged_on_a_drifting_job(
    cli: Cli, tmp_path: Path, policy: Path
) -> None:
    """--drift on train is kept in the policy; eval runs the policy's drift unless told, and
    its document says which; a trace-trained policy or an unknown drift is refused."""
    from powerkit.control.train import load_policy

    out = tmp_path / "drift.npz"
    r = cli(
        "control", "train", "--budget", "314.6W", "--steps", "20", "--drift", "grpo", "--out", out
    )
    assert r.exit_code == 0, r.stderr
    assert load_policy(out)[1].drift == "grpo" and load_policy(policy)[1].drift == "none"
    quick = ["--seeds", "1", "--horizon", "20m", "--arms", "ppo,uncontrolled", "--json"]
    assert cli.json("control", "eval", "--policy", out, *quick)["drift"] == "grpo"
    assert (
        cli.json("control", "eval", "--policy", policy, *quick, "--drift", "grpo")["drift"]
        == "grpo"
    )
    assert cli.json("control", "eval", "--policy", policy, *quick)["drift"] == "none"
    rule = cli.json(
        "control", "eval", "--policy", out, *quick[:4], "--arms", "ppo,static_safe", "--json"
    )
    assert rule["best_rule"] == "static_safe"
    ppo = next(a for a in rule["arms"] if a["arm"] == "ppo")
    assert set(ppo["vs_best_rule_paired"]) == {"violation_rate_0_5s", "tokens", "tokens_per_mwh"}
    r = cli("control", "eval", "--policy", policy, *quick, "--drift", "wild")
    assert r.exit_code == 2 and "--drift 'wild'" in r.stderr
