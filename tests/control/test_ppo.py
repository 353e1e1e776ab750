"""The NumPy PPO: GAE and the clipped loss by hand, gradients numerically, two toy tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from powerkit.control.ppo import MLP, PPO, PPOConfig, clipped_policy_loss, gae
from powerkit.core.errors import BadInputError


def test_gae_by_hand() -> None:
    rewards = np.array([1.0, 0.0, 2.0])
    values = np.array([0.5, 1.0, 1.5])
    dones = np.array([False, False, True])
    adv, ret = gae(rewards, values, dones, last_value=10.0, gamma=0.9, lam=0.5)
    d2 = 2.0 - 1.5  # terminal: no bootstrap from last_value
    d1 = 0.0 + 0.9 * 1.5 - 1.0
    d0 = 1.0 + 0.9 * 1.0 - 0.5
    a2 = d2
    a1 = d1 + 0.9 * 0.5 * a2
    a0 = d0 + 0.9 * 0.5 * a1
    assert adv == pytest.approx([a0, a1, a2])
    assert ret == pytest.approx([a0 + 0.5, a1 + 1.0, a2 + 1.5])
    adv, _ = gae(rewards, values, np.array([False, False, False]), 10.0, 0.9, 0.5)
    assert adv[2] == pytest.approx(2.0 + 0.9 * 10.0 - 1.5)  # bootstrapped


def test_clipped_loss_by_hand() -> None:
    logp_old = np.log(np.array([0.5, 0.5, 0.5, 0.5]))
    logp_new = np.log(np.array([0.8, 0.8, 0.2, 0.55]))  # ratios 1.6, 1.6, 0.4, 1.1
    adv = np.array([1.0, -1.0, -1.0, 2.0])
    loss, grad = clipped_policy_loss(logp_new, logp_old, adv, clip=0.2)
    # terms: min(1.6, 1.2)*1 = 1.2 (clipped); min(-1.6, -1.2) = -1.6 (unclipped);
    # min(-0.4, -0.8) = -0.8 (clipped); min(2.2, 2.2) = 2.2 (unclipped, inside the clip range)
    assert loss == pytest.approx(-(1.2 - 1.6 - 0.8 + 2.2) / 4)
    assert grad == pytest.approx(np.array([0.0, 1.6, 0.0, -2.2]) / 4)


def test_mlp_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(0)
    net = MLP([3, 5, 2], rng)
    x = rng.normal(size=(4, 3))
    target = rng.normal(size=(4, 2))
    out, acts = net.forward(x)
    grads = net.backward(acts, out - target)  # d/dout of 0.5 * sum((out - target)^2)
    for p, g in zip(net.params, grads, strict=True):
        i = tuple(rng.integers(0, s) for s in p.shape)
        old = p[i]
        p[i] = old + 1e-6
        up = 0.5 * ((net.forward(x)[0] - target) ** 2).sum()
        p[i] = old - 1e-6
        down = 0.5 * ((net.forward(x)[0] - target) ** 2).sum()
        p[i] = old
        assert g[i] == pytest.approx((up - down) / 2e-6, rel=1e-4, abs=1e-7)


class Bandit:
    """One state, three arms; arm 1 pays best."""

    n_actions, obs_dim = 3, 1

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def reset(self, seed: int | None = None) -> np.ndarray:
        return np.zeros(1)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, dict[str, Any]]:
        reward = [0.0, 1.0, 0.3][action] + 0.1 * self.rng.normal()
        return np.zeros(1), reward, True, {}


class Tracking:
    """Move x by -1/0/+1 toward a target; reward is minus the distance."""

    n_actions, obs_dim = 3, 2

    def reset(self, seed: int | None = None) -> np.ndarray:
        rng = np.random.default_rng(seed)
        self.x, self.target, self.t = float(rng.integers(-5, 6)), float(rng.integers(-5, 6)), 0
        return self.obs()

    def obs(self) -> np.ndarray:
        return np.array([self.x, self.target - self.x])

    def step(self, action: int) -> tuple[np.ndarray, float, bool, dict[str, Any]]:
        self.x = float(np.clip(self.x + action - 1, -8, 8))
        self.t += 1
        return self.obs(), -abs(self.x - self.target) / 5, self.t >= 20, {}


def test_learns_a_bandit() -> None:
    agent = PPO(1, 3, PPOConfig(seed=0, rollout=32, lr=1e-2))
    agent.learn(Bandit(), steps=1500)
    assert agent.probs(np.zeros(1))[0, 1] > 0.9


def test_learns_to_track() -> None:
    agent = PPO(2, 3, PPOConfig(seed=1, rollout=128, lr=5e-3, gamma=0.9))
    agent.learn(Tracking(), steps=10_000)
    env = Tracking()
    rng = np.random.default_rng(0)
    learned, random = [], []
    for seed in range(100, 130):
        for errors, policy in (
            (learned, lambda o: agent.act(o, greedy=True)),
            (random, lambda o: int(rng.integers(3))),
        ):
            obs = env.reset(seed)
            for _ in range(20):
                obs, *_ = env.step(policy(obs))
            errors.append(abs(env.x - env.target))
    assert np.mean(learned) < 0.5 < 2.0 < np.mean(random)


def test_save_load_round_trip(tmp_path: Path) -> None:
    agent = PPO(2, 3, PPOConfig(seed=3, hidden=(8,)))
    agent.learn(Tracking(), steps=256)
    path = tmp_path / "policy.npz"
    agent.save(path, {"ladder": [1, 2, 4], "budget_w": 300.0})
    back, header = PPO.load(path)
    obs = np.array([[1.0, -2.0], [0.0, 3.0]])
    assert np.allclose(back.probs(obs), agent.probs(obs))
    assert header["ladder"] == [1, 2, 4] and header["budget_w"] == 300.0
    assert back.config.hidden == (8,)
    (tmp_path / "junk.npz").write_bytes(b"not a policy")
    with pytest.raises(BadInputError, match="not a powerkit policy"):
        PPO.load(tmp_path / "junk.npz")
