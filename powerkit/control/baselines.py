"""Baseline controllers, first-class arms next to the learned policy.

Every arm maps the last observation to an action (0: one rung down, 1: hold, 2: one rung up),
so all arms run through the same environment loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from powerkit.control.env import OBS_SPEC

__all__ = ["Arm", "hysteresis", "random_arm", "static", "threshold", "uncontrolled"]

Policy = Callable[[np.ndarray], int]
_P95 = OBS_SPEC.index("p95_over_budget")
_RUNG = OBS_SPEC.index("rung")


@dataclass
class Arm:
    """A named controller."""

    name: str
    policy: Policy


def _toward(target_rung: int, rungs: int) -> Policy:
    def policy(obs: np.ndarray) -> int:
        rung = round(float(obs[_RUNG]) * max(rungs - 1, 1))
        return 1 + int(np.sign(target_rung - rung))

    return policy


def uncontrolled(rungs: int) -> Arm:
    """The largest knob, always."""
    return Arm("uncontrolled", _toward(rungs - 1, rungs))


def static(rung: int, rungs: int, name: str = "static_safe") -> Arm:
    """A fixed rung (static safe: the largest under the violation target, chosen beforehand)."""
    return Arm(name, _toward(rung, rungs))


def hysteresis(low: float, high: float, name: str = "hysteresis") -> Arm:
    """Shrink when the period's p95 power exceeds ``high`` x budget, grow below ``low``."""

    def policy(obs: np.ndarray) -> int:
        p95 = float(obs[_P95])
        return 0 if p95 > high else (2 if p95 < low else 1)

    return Arm(name, policy)


def threshold() -> Arm:
    """The fixed rule: shrink above 90 % of budget, grow below 70 % (on p95 power)."""
    return hysteresis(0.7, 0.9, name="threshold")


def random_arm(seed: int) -> Arm:
    """Uniformly random moves."""
    rng = np.random.default_rng(seed)
    return Arm("random", lambda obs: int(rng.integers(3)))
