"""A small, readable PPO in NumPy: MLP actor-critic, categorical actions, GAE, clipped
objective, entropy bonus, Adam, minibatch epochs, observation normalization.

Backpropagation is written out by hand for tanh MLPs; everything is seeded.
"""

from __future__ import annotations

import itertools
import json
import threading
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from powerkit.core.errors import BadInputError
from powerkit.core.inputs import check_regular
from powerkit.core.outputs import atomic_write

__all__ = [
    "MLP",
    "PPO",
    "Adam",
    "Env",
    "PPOConfig",
    "RunningNorm",
    "clipped_policy_loss",
    "gae",
]


class Env(Protocol):
    """What PPO trains on: a reset and a step, both returning observations."""

    n_actions: int
    obs_dim: int

    def reset(self, seed: int | None = None) -> np.ndarray: ...

    def step(self, action: int) -> tuple[np.ndarray, float, bool, dict[str, Any]]: ...


@dataclass
class PPOConfig:
    """Hyper-parameters (see docs/control.md for the values used and why)."""

    hidden: tuple[int, ...] = (32, 32)
    lr: float = 3e-3
    gamma: float = 0.5
    lam: float = 0.9
    clip: float = 0.2
    entropy: float = 0.01
    value_coef: float = 0.5
    epochs: int = 8
    minibatch: int = 32
    rollout: int = 64
    max_grad_norm: float = 0.5
    seed: int = 0


class MLP:
    """A tanh multilayer perceptron with a linear output layer."""

    def __init__(self, sizes: list[int], rng: np.random.Generator, out_scale: float = 1.0):
        self.params: list[np.ndarray] = []
        for i, (a, b) in enumerate(itertools.pairwise(sizes)):
            scale = out_scale if i == len(sizes) - 2 else 1.0
            self.params.append(rng.normal(0, scale / np.sqrt(a), (a, b)))
            self.params.append(np.zeros(b))

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Return (output, activations kept for backward)."""
        acts = [x]
        h = x
        layers = len(self.params) // 2
        for i in range(layers):
            h = h @ self.params[2 * i] + self.params[2 * i + 1]
            if i < layers - 1:
                h = np.tanh(h)
            acts.append(h)
        return h, acts

    def backward(self, acts: list[np.ndarray], d_out: np.ndarray) -> list[np.ndarray]:
        """Return gradients of the parameters given dLoss/dOutput."""
        grads: list[np.ndarray] = [np.empty(0)] * len(self.params)
        d = d_out
        layers = len(self.params) // 2
        for i in reversed(range(layers)):
            grads[2 * i] = acts[i].T @ d
            grads[2 * i + 1] = d.sum(axis=0)
            if i > 0:
                d = (d @ self.params[2 * i].T) * (1 - acts[i] ** 2)
        return grads


class Adam:
    """Adam over a list of arrays."""

    def __init__(self, params: list[np.ndarray], lr: float) -> None:
        self.lr, self.t = lr, 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def step(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        """Update ``params`` in place."""
        self.t += 1
        b1, b2, eps = 0.9, 0.999, 1e-8
        for p, g, m, v in zip(params, grads, self.m, self.v, strict=True):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p -= self.lr * (m / (1 - b1**self.t)) / (np.sqrt(v / (1 - b2**self.t)) + eps)


@dataclass
class RunningNorm:
    """Running mean and variance of observations; normalizes and clips to ±5."""

    mean: np.ndarray
    var: np.ndarray
    count: float = 1e-4

    @classmethod
    def of(cls, dim: int) -> RunningNorm:
        return cls(np.zeros(dim), np.ones(dim))

    def update(self, x: np.ndarray) -> None:
        batch = np.atleast_2d(x)
        n, mean, var = batch.shape[0], batch.mean(axis=0), batch.var(axis=0)
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + var * n + delta**2 * self.count * n / total) / total
        self.count = total

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -5.0, 5.0)


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    dones: np.ndarray,
    last_value: float,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (advantages, returns) by generalized advantage estimation.

    ``dones[t]`` marks that the episode ended after step t (no bootstrap across it).
    """
    n = rewards.size
    adv = np.zeros(n)
    running = 0.0
    for t in reversed(range(n)):
        next_value = last_value if t == n - 1 else values[t + 1]
        alive = 1.0 - float(dones[t])
        delta = rewards[t] + gamma * next_value * alive - values[t]
        running = delta + gamma * lam * alive * running
        adv[t] = running
    return adv, adv + values


def clipped_policy_loss(
    logp_new: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, clip: float
) -> tuple[float, np.ndarray]:
    """Return (loss, dLoss/dlogp_new) of the clipped surrogate, loss = -mean(min(rA, cA))."""
    ratio = np.exp(logp_new - logp_old)
    clipped = np.clip(ratio, 1 - clip, 1 + clip)
    unclipped_wins = ratio * adv <= clipped * adv
    loss = -float(np.mean(np.where(unclipped_wins, ratio * adv, clipped * adv)))
    grad = np.where(unclipped_wins, -ratio * adv, 0.0) / adv.size
    return loss, grad


@dataclass
class PPO:
    """Actor-critic PPO for a discrete action space."""

    obs_dim: int
    n_actions: int
    config: PPOConfig = field(default_factory=PPOConfig)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.config.seed)
        self.rng = rng
        sizes = [self.obs_dim, *self.config.hidden]
        self.actor = MLP([*sizes, self.n_actions], rng, out_scale=0.01)
        self.critic = MLP([*sizes, 1], rng)
        self.norm = RunningNorm.of(self.obs_dim)
        self.opt_actor = Adam(self.actor.params, self.config.lr)
        self.opt_critic = Adam(self.critic.params, self.config.lr)

    def probs(self, obs: np.ndarray) -> np.ndarray:
        """Return action probabilities for raw observations."""
        logits, _ = self.actor.forward(self.norm(np.atleast_2d(obs)))
        return _softmax(logits)

    def act(self, obs: np.ndarray, greedy: bool = False) -> int:
        """Return an action: sampled, or the most probable one."""
        p = self.probs(obs)[0]
        return int(np.argmax(p)) if greedy else int(self.rng.choice(p.size, p=p))

    def value(self, obs: np.ndarray) -> np.ndarray:
        v, _ = self.critic.forward(self.norm(np.atleast_2d(obs)))
        return v[:, 0]

    def update(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        logp_old: np.ndarray,
        adv: np.ndarray,
        returns: np.ndarray,
    ) -> dict[str, float]:
        """Run the minibatch epochs of one PPO update; return mean losses."""
        c = self.config
        x = self.norm(obs)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        stats = {"policy": 0.0, "value": 0.0, "entropy": 0.0}
        batches = 0
        for _ in range(c.epochs):
            order = self.rng.permutation(len(x))
            for start in range(0, len(x), c.minibatch):
                i = order[start : start + c.minibatch]
                logits, acts = self.actor.forward(x[i])
                p = _softmax(logits)
                logp_all = np.log(p + 1e-12)
                logp = logp_all[np.arange(i.size), actions[i]]
                loss, d_logp = clipped_policy_loss(logp, logp_old[i], adv[i], c.clip)
                onehot = np.eye(self.n_actions)[actions[i]]
                d_logits = d_logp[:, None] * (onehot - p)
                entropy = -(p * logp_all).sum(axis=1)
                # maximize entropy: dLoss/dz = -coef * dH/dz, dH/dz = -p (log p + H)
                d_logits += c.entropy * p * (logp_all + entropy[:, None]) / i.size
                v, v_acts = self.critic.forward(x[i])
                d_v = c.value_coef * (v[:, 0] - returns[i])[:, None] / i.size
                self._apply(self.actor, self.opt_actor, self.actor.backward(acts, d_logits))
                self._apply(self.critic, self.opt_critic, self.critic.backward(v_acts, d_v))
                stats["policy"] += loss
                stats["value"] += float(np.mean((v[:, 0] - returns[i]) ** 2))
                stats["entropy"] += float(entropy.mean())
                batches += 1
        return {k: v / max(batches, 1) for k, v in stats.items()}

    def _apply(self, net: MLP, opt: Adam, grads: list[np.ndarray]) -> None:
        norm = np.sqrt(sum(float((g * g).sum()) for g in grads))
        if norm > self.config.max_grad_norm:
            grads = [g * (self.config.max_grad_norm / norm) for g in grads]
        opt.step(net.params, grads)

    def learn(
        self,
        env: Env,
        steps: int,
        on_update: Callable[[int, dict[str, float]], None] | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Train for ``steps`` environment steps, updating every ``rollout`` steps; return the
        steps done (fewer when ``stop`` was set: training ends after the update in progress)."""
        c = self.config
        obs = env.reset(seed=c.seed)
        done_steps = 0
        episode = 0
        while done_steps < steps and not (stop is not None and stop.is_set()):
            n = min(c.rollout, steps - done_steps)
            buf_obs, buf_act, buf_logp, buf_rew, buf_done, buf_val = [], [], [], [], [], []
            for _ in range(n):
                self.norm.update(obs)
                p = self.probs(obs)[0]
                a = int(self.rng.choice(p.size, p=p))
                buf_obs.append(obs)
                buf_act.append(a)
                buf_logp.append(float(np.log(p[a] + 1e-12)))
                buf_val.append(float(self.value(obs)[0]))
                obs, reward, done, _ = env.step(a)
                buf_rew.append(reward)
                buf_done.append(done)
                if done:
                    episode += 1
                    obs = env.reset(seed=c.seed + episode)
            done_steps += n
            last = 0.0 if buf_done[-1] else float(self.value(obs)[0])
            adv, ret = gae(
                np.array(buf_rew), np.array(buf_val), np.array(buf_done), last, c.gamma, c.lam
            )
            stats = self.update(np.array(buf_obs), np.array(buf_act), np.array(buf_logp), adv, ret)
            stats["reward"] = float(np.mean(buf_rew))
            if on_update:
                on_update(done_steps, stats)
        return done_steps

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        """Write the policy, its normalizer, config and ``meta`` (ladder, budget, obs spec)."""
        arrays = {f"actor_{i}": p for i, p in enumerate(self.actor.params)}
        arrays |= {f"critic_{i}": p for i, p in enumerate(self.critic.params)}
        header = {
            "config": asdict(self.config),
            "obs_dim": self.obs_dim,
            "n_actions": self.n_actions,
            "norm_count": self.norm.count,
            **meta,
        }
        arrays |= {
            "norm_mean": self.norm.mean,
            "norm_var": self.norm.var,
            "header": np.array(json.dumps(header)),
        }
        with atomic_write(path, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: Path) -> tuple[PPO, dict[str, Any]]:
        """Return (policy, its header); refuses files that are not powerkit policies."""
        _check_archive(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                config = PPOConfig(
                    **{**header["config"], "hidden": tuple(header["config"]["hidden"])}
                )
                _check_sizes(path, int(header["obs_dim"]), int(header["n_actions"]), config)
                agent = cls(header["obs_dim"], header["n_actions"], config)
                for net, name in ((agent.actor, "actor"), (agent.critic, "critic")):
                    params = [data[f"{name}_{i}"] for i in range(len(net.params))]
                    if [p.shape for p in params] != [p.shape for p in net.params]:
                        raise ValueError(f"{name} weights do not fit the layer sizes")
                    if not all(np.isfinite(p).all() for p in params):
                        raise ValueError(f"{name} weights that are NaN or infinite")
                    net.params = params
                mean, var = data["norm_mean"], data["norm_var"]
                if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all()):
                    raise ValueError("an observation normalizer that is NaN, infinite or negative")
                agent.norm = RunningNorm(mean, var, header["norm_count"])
        except (
            OSError,
            KeyError,
            ValueError,
            TypeError,
            EOFError,
            AttributeError,
            RecursionError,
            zipfile.BadZipFile,
        ) as exc:
            raise BadInputError(f"{path}: not a powerkit policy ({exc})") from None
        for name, expected in (("obs_dim", agent.norm.mean.size),):
            if header[name] != expected:
                raise BadInputError(f"{path}: inconsistent policy file ({name})")
        return agent, header


# A policy file names its layer sizes; these bound what loading one may allocate (the
# controller's own networks are two layers of 64: far below).
_MAX_WIDTH = 4096
_MAX_LAYERS = 8
_MAX_PARAMS = 4_000_000
#: the most a policy file's arrays may hold once unpacked (a zip bomb unpacks to gigabytes)
_MAX_UNPACKED_BYTES = 64 * 1024 * 1024


def _check_archive(path: Path) -> None:
    """Refuse, before anything is unpacked, a policy whose members would unpack past the
    bound (or that is not a zip archive at all)."""
    check_regular(path)
    try:
        with zipfile.ZipFile(path) as archive:
            total = sum(info.file_size for info in archive.infolist())
            count = len(archive.infolist())
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise BadInputError(f"{path}: not a powerkit policy ({exc})") from None
    if total > _MAX_UNPACKED_BYTES or count > 64:
        raise BadInputError(
            f"{path}: not a powerkit policy (its {count} arrays unpack to {total:,} bytes; a "
            f"policy holds at most {_MAX_UNPACKED_BYTES >> 20} MB)"
        )


def _check_sizes(path: Path, obs_dim: int, n_actions: int, config: PPOConfig) -> None:
    hidden = list(config.hidden)
    widths = [obs_dim, n_actions, *hidden]
    if len(hidden) > _MAX_LAYERS or any(not 1 <= w <= _MAX_WIDTH for w in widths):
        raise ValueError(
            f"layer sizes {widths} outside 1..{_MAX_WIDTH} (at most {_MAX_LAYERS} hidden layers)"
        )
    chain = [obs_dim, *hidden]
    params = sum(a * b for a, b in itertools.pairwise(chain)) + chain[-1] * (n_actions + 1)
    if 2 * params > _MAX_PARAMS:
        raise ValueError(
            f"layer sizes {widths} hold {2 * params:,} weights (at most {_MAX_PARAMS:,})"
        )
