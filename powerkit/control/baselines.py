"""Baseline controllers, first-class arms next to the learned policy.

Every arm maps the last observation to an action (0: one rung down, 1: hold, 2: one rung up),
so all arms run through the same environment loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from powerkit.control.env import OBS_SPEC, UP, shielded

__all__ = [
    "Arm",
    "adaptive_threshold",
    "allowance",
    "hysteresis",
    "predictive",
    "random_arm",
    "shield_policy",
    "static",
    "threshold",
    "uncontrolled",
]

Policy = Callable[[np.ndarray], int]
_P95 = OBS_SPEC.index("p95_over_budget")
_RUNG = OBS_SPEC.index("rung")
_RECENT = OBS_SPEC.index("recent_share_over_target")
_SHARE = OBS_SPEC.index("violation_share")


@dataclass
class Arm:
    """A named controller; ``start_rung``: where its job starts (None: the environment's
    default, the top of the ladder — the uncontrolled setting)."""

    name: str
    policy: Policy
    start_rung: int | None = None


def _toward(target_rung: int, rungs: int) -> Policy:
    def policy(obs: np.ndarray) -> int:
        rung = round(float(obs[_RUNG]) * max(rungs - 1, 1))
        return 1 + int(np.sign(target_rung - rung))

    return policy


def uncontrolled(rungs: int) -> Arm:
    """The largest knob, always."""
    return Arm("uncontrolled", _toward(rungs - 1, rungs))


def static(rung: int, rungs: int, name: str = "static_safe") -> Arm:
    """A fixed rung (static safe: the largest under the violation target, chosen beforehand),
    held from the job's start."""
    return Arm(name, _toward(rung, rungs), start_rung=rung)


def hysteresis(low: float, high: float, name: str = "hysteresis") -> Arm:
    """Shrink when the period's p95 power exceeds ``high`` x budget, grow below ``low``."""

    def policy(obs: np.ndarray) -> int:
        p95 = float(obs[_P95])
        return 0 if p95 > high else (2 if p95 < low else 1)

    return Arm(name, policy)


def threshold() -> Arm:
    """The fixed rule: shrink above 90 % of budget, grow below 70 % (on p95 power)."""
    return hysteresis(0.7, 0.9, name="threshold")


def adaptive_threshold(
    target: float,
    low: float = 0.7,
    high: float = 0.9,
    step: float = 0.02,
    name: str = "adaptive_threshold",
) -> Arm:
    """The threshold rule with a self-tuning upper threshold: while the recent violation
    share is above ``target``, the threshold drops by ``step`` per period (down to ``low`` +
    0.05); while it is below half of it, it rises by ``step`` / 2 (up to 1.1). Our reading
    of the adaptive-threshold rule the research found as good as PPO in one of three conditions
    (docs/control.md): a fixed threshold is either too timid or too bold for a given job; one
    that follows the violations it causes is neither for long."""
    state = {"high": high}

    def policy(obs: np.ndarray) -> int:
        recent = float(obs[_RECENT])  # the recent violation share minus the target
        if recent > 0:
            state["high"] = max(low + 0.05, state["high"] - step)
        elif recent < -target / 2:
            state["high"] = min(1.1, state["high"] + step / 2)
        p95 = float(obs[_P95])
        return 0 if p95 > state["high"] else (2 if p95 < low else 1)

    return Arm(name, policy)


def predictive(table: list[float], rungs: int, name: str = "predictive") -> Arm:
    """Model-predictive: ``table`` holds each rung's p95 power over budget measured on the
    training conditions (the static sweep that picks static safe). Each period, the table is
    scaled by how the current rung's observed p95 compares with its table value, and the knob
    moves one rung toward the largest rung predicted to stay under the budget."""

    def policy(obs: np.ndarray) -> int:
        rung = round(float(obs[_RUNG]) * max(rungs - 1, 1))
        expected = table[rung]
        scale = float(obs[_P95]) / expected if expected > 0 else 1.0
        fits = [k for k in range(rungs) if table[k] * scale <= 1.0]
        target = max(fits) if fits else 0
        return 1 + int(np.sign(target - rung))

    return Arm(name, policy)


def random_arm(seed: int) -> Arm:
    """Uniformly random moves."""
    rng = np.random.default_rng(seed)
    return Arm("random", lambda obs: int(rng.integers(3)))


def shield_policy(policy: Policy, target: float) -> Policy:
    """``policy`` behind the violation shield (``env.shielded``), read from the observation."""

    def shielded_policy(obs: np.ndarray) -> int:
        return shielded(policy(obs), float(obs[_RECENT]), float(obs[_SHARE]), target)

    return shielded_policy


def allowance(target: float, name: str = "allowance") -> Arm:
    """The violation shield on its own: one rung up whenever the shield allows it (the
    recent violation share under the target), held or stepped down by the shield otherwise.
    What a controller gains beyond this arm is what it learned about *when* to spend the
    allowance."""
    return Arm(name, shield_policy(lambda obs: UP, target))
