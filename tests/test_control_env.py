"""The simulated control environment: periods are GRPO steps, knobs move along the ladder."""

from __future__ import annotations

import numpy as np
import pytest

from powerkit.control.env import OBS_SPEC, RewardWeights, SimEnv
from powerkit.errors import BadInputError
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
    with pytest.raises(BadInputError, match="--knob"):
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
