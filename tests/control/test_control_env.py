"""The simulated control environment: periods are GRPO steps, knobs move along the ladder."""

from __future__ import annotations

import numpy as np
import pytest

from powerkit.control.env import OBS_SPEC, RewardWeights, SimEnv
from powerkit.core.errors import BadInputError
from powerkit.sim import get_preset


def test_steps_move_the_knob_and_observe_the_period() -> None:
    env = SimEnv(get_preset("a100-7b"), 314.6, "group_size", episode_steps=3)
    obs = env.reset(seed=1)
    assert obs.shape == (len(OBS_SPEC),) and env.rung == len(env.ladder) - 1
    obs, _, done, info = env.step(0)  # one rung down
    assert env.rung == len(env.ladder) - 2 and not done
    period = info["period"]
    assert period.rung == env.rung and period.tokens > 0
    assert obs[4] == pytest.approx(env.rung / (len(env.ladder) - 1))
    assert obs[3] == pytest.approx(float((period.power_w > 314.6).mean()))
    env.step(1)
    _, _, done, _ = env.step(2)
    assert done and env.rung == len(env.ladder) - 1


def test_reward_trades_tokens_against_excess_energy() -> None:
    env = SimEnv(get_preset("a100-7b"), 314.6, "group_size", weights=RewardWeights(1, 30, 0.01))
    env.reset(seed=2)
    low, high = env.set_rung(1), env.set_rung(3)  # group size 4, then 16
    assert env.reward(high, False) < env.reward(low, False)  # 16 breaks the budget, 4 barely
    assert env.reward(low, True) == pytest.approx(env.reward(low, False) - 0.01)


def test_knob_change_applies_from_the_next_step_and_is_seeded() -> None:
    a = SimEnv(get_preset("a100-14b"), 250.0, "concurrency")
    b = SimEnv(get_preset("a100-14b"), 250.0, "concurrency")
    oa, ob = a.reset(seed=5), b.reset(seed=5)
    assert np.array_equal(oa, ob)
    pa = a.set_rung(0)
    assert pa.rung == 0 and a.sim.knobs.concurrency == a.ladder[0]
    assert np.array_equal(pa.power_w, b.set_rung(0).power_w)


def test_bad_knob() -> None:
    with pytest.raises(BadInputError, match=r"^knob 'batch'"):
        SimEnv(get_preset("a100-7b"), 300.0, "batch")


def test_the_joint_ladder_orders_settings_and_keeps_the_cap_for_last() -> None:
    from powerkit.control.env import CAP_SHARES, SimEnv, joint_ladder
    from powerkit.sim import GrpoSim, get_preset

    preset = get_preset("a100-72b-tp4")
    ladder = joint_ladder(preset, 237.5)
    caps = [k.power_cap_w for k in ladder]
    assert caps[: len(CAP_SHARES)] == [pytest.approx(s * 237.5) for s in CAP_SHARES]
    assert all(c is None for c in caps[len(CAP_SHARES) :])  # workload knobs above the caps
    assert {(k.group_size, k.concurrency) for k in ladder[: len(CAP_SHARES) + 1]} == {
        (ladder[0].group_size, ladder[0].concurrency)
    }  # the caps sit on the least power-hungry workload setting
    uncapped = ladder[len(CAP_SHARES) :]
    measured = []
    for knobs in uncapped:  # each rung up buys throughput and costs power
        sim = GrpoSim(preset, knobs, seed=0)
        start, end = sim.schedule_step(0.0)
        for _ in range(2):
            _, end = sim.schedule_step(end)
        t = np.arange(start, end - 0.3, 0.5)
        s = sim.sample(t)
        measured.append((s.power_w.mean(), (s.tokens[-1] - s.tokens[0]) / (t[-1] - t[0])))
    powers, rates = zip(*measured, strict=True)
    assert list(powers) == sorted(powers) and list(rates) == sorted(rates)
    env = SimEnv(preset, 237.5, "joint", episode_steps=3)
    env.reset(seed=1)
    env.set_rung(0)
    assert env.sim.knobs.power_cap_w == pytest.approx(CAP_SHARES[0] * 237.5)


def test_the_observation_carries_the_last_steps_lengths() -> None:
    """LENGTH_OBS: the ended step's mean and p95 over the preset's mean length, and the
    trend (fast over slow average − 1), 0 after one step."""
    from powerkit.control.env import LENGTH_OBS, POWER_OBS

    preset = get_preset("a100-7b")
    env = SimEnv(preset, 314.6, "group_size")
    obs = env.reset(seed=3)
    assert OBS_SPEC == POWER_OBS + LENGTH_OBS and obs.shape == (len(OBS_SPEC),)
    mean, p95 = env.sim.step_lengths(0) or (0.0, 0.0)
    at = len(POWER_OBS)
    assert obs[at] == pytest.approx(mean / preset.response_tokens)
    assert obs[at + 1] == pytest.approx(p95 / preset.response_tokens)
    assert obs[at + 2] == 0.0
    obs, *_ = env.step(1)
    m1 = (env.sim.step_lengths(1) or (0.0, 0.0))[0] / preset.response_tokens
    m0 = mean / preset.response_tokens
    fast, slow = m0 + 0.5 * (m1 - m0), m0 + 0.05 * (m1 - m0)
    assert obs[at] == pytest.approx(m1) and obs[at + 2] == pytest.approx(fast / slow - 1)


def test_the_trend_feature_rises_on_a_growing_job() -> None:
    from powerkit.control.env import LENGTH_OBS, POWER_OBS
    from powerkit.sim import DRIFTS, Drift

    DRIFTS["fast"] = Drift("fast", growth=200.0)  # +20 % of the first step's mean a step
    try:
        fast = SimEnv(get_preset("a100-7b"), 314.6, "group_size", start_rung=0, drift="fast")
        fast.reset(seed=0)
        trends = [
            fast.step(1)[0][len(POWER_OBS) + LENGTH_OBS.index("length_trend")] for _ in range(6)
        ]
    finally:
        del DRIFTS["fast"]
    assert all(t > 0.05 for t in trends[2:])


def test_a_period_within_the_step_for_concurrency() -> None:
    """--period on the simulator: fixed periods whose tokens add up to the job's, and a
    concurrency change acting inside the running rollout; other knobs are refused."""
    env = SimEnv(get_preset("a100-72b-tp4-gen"), 156.0, "concurrency", period_s=30.0, start_rung=1)
    env.reset(seed=2)
    env.keep_periods = True
    for _ in range(3):
        _, _, _, info = env.step(1)
    assert env.t == pytest.approx(120.0) and info["period"].power_w.shape[1] == 60
    before = env.sim._plan and env.sim._plan.admissions
    env.step(2)  # one rung up, at 120 s: in the first step's rollout
    assert env.sim.knobs.concurrency == env.ladder[2]
    assert env.sim._plan is not None and len(env.sim._plan.admissions) == len(before or []) + 1
    s = env.sim.sample(np.array([env.t + 1.0]))
    assert s.concurrency[0] == env.ladder[2] and s.step[0] == 0
    with pytest.raises(BadInputError, match=r"^period_s on the simulator"):
        SimEnv(get_preset("a100-7b"), 314.6, "group_size", period_s=30.0)
    with pytest.raises(BadInputError, match=r"between 0\.5 s and 1 h"):
        SimEnv(get_preset("a100-72b-tp4-gen"), 156.0, "concurrency", period_s=0.1)


def test_fixed_periods_count_every_token() -> None:
    """Periods of 10 s (the knob held) count, between them, every token the job made after
    the first period: its counter at 1,010 s less its counter at 10 s."""
    env = SimEnv(get_preset("a100-72b-tp4-gen"), 156.0, "concurrency", period_s=10.0)
    env.reset(seed=1)
    env.keep_periods = True
    for _ in range(100):
        env.step(1)
    twin = SimEnv(get_preset("a100-72b-tp4-gen"), 156.0, "concurrency", period_s=10.0)
    twin.reset(seed=1)
    at = twin.sim.sample(np.array([10.0, 1010.0])).tokens
    assert env.t == pytest.approx(1010.0)
    assert sum(p.tokens for p in env.periods) == at[1] - at[0]
