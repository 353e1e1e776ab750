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
