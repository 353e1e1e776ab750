"""What a sensor reports of a known power signal: the simulator's truth, sampled on a fine
regular grid, seen through a sensor model at the times a logger reads it."""

from __future__ import annotations

import numpy as np

from powerkit.sensors.models import EnergyCounter, Sensor

__all__ = ["TRUTH_STEP_S", "Truth", "read_counter", "sense"]

#: the step of the simulator's true power (5 ms: a part-time sensor's 25 ms window holds 5)
TRUTH_STEP_S = 0.005


class Truth:
    """True power on a regular grid ``t0 + k·step`` (shape (gpus, n)), as its cumulative
    integral (trapezoids, from ``energy0_j`` at ``t0``), so that the mean over any stretch
    is exact at grid points and linear between them."""

    def __init__(
        self, t0_s: float, step_s: float, power_w: np.ndarray, energy0_j: np.ndarray | float = 0.0
    ) -> None:
        self.t0, self.step = float(t0_s), float(step_s)
        self.power = np.atleast_2d(np.asarray(power_w, dtype=float))
        n = self.power.shape[1]
        self.t = self.t0 + self.step * np.arange(n)
        area = 0.5 * (self.power[:, 1:] + self.power[:, :-1]) * self.step
        start = np.broadcast_to(np.asarray(energy0_j, dtype=float), (self.power.shape[0],))
        self.cum = start[:, None] + np.concatenate(
            [np.zeros((self.power.shape[0], 1)), np.cumsum(area, 1)], 1
        )

    def at(self, times: np.ndarray) -> np.ndarray:
        """Power at ``times`` (linear between grid points)."""
        return np.stack([np.interp(times, self.t, p) for p in self.power])

    def energy(self, times: np.ndarray) -> np.ndarray:
        """The cumulative energy at ``times`` (J)."""
        return np.stack([np.interp(times, self.t, c) for c in self.cum])

    def mean(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Mean power over each [a, b] (the point where b = a), clipped to the grid."""
        a = np.clip(a, self.t[0], self.t[-1])
        b = np.clip(b, self.t[0], self.t[-1])
        width = b - a
        point = width <= 1e-12
        area = self.energy(b) - self.energy(a)
        return np.where(point[None, :], self.at(b), area / np.where(point, 1.0, width)[None, :])


def sense(sensor: Sensor, truth: Truth, times: np.ndarray, phase_s: float = 0.0) -> np.ndarray:
    """The readings ``sensor`` gives at ``times`` (s, on the truth's clock) of ``truth``:
    shape (gpus, len(times)). A part-time sensor's updates fall at ``phase_s + k·P``; before
    the first grid point nothing was measured, so windows are clipped to the truth's start."""
    t = np.asarray(times, dtype=float)
    if not sensor.part_time and sensor.period_s == 0:
        if sensor.averaging_s == 0:
            return truth.at(t)
        return truth.mean(t - sensor.averaging_s, t)
    p, w = sensor.period_s, sensor.window_s or sensor.period_s
    last = phase_s + np.floor((t - phase_s) / p + 1e-9) * p  # the last update at or before t
    last = np.maximum(last, truth.t0)
    if sensor.averaging_s <= 0:
        return truth.mean(last - w, last)
    n = max(1, round(sensor.averaging_s / p))
    total = np.zeros((truth.power.shape[0], t.size))
    count = np.zeros(t.size)
    for k in range(n):
        u = last - k * p
        inside = u >= truth.t0 - 1e-12
        total += np.where(inside[None, :], truth.mean(u - w, u), 0.0)
        count += inside
    return total / np.maximum(count, 1)[None, :]


def read_counter(counter: EnergyCounter, truth: Truth, times: np.ndarray) -> np.ndarray:
    """The energy counter at ``times``: the true energy at its last update, in whole
    counts (J)."""
    t = np.asarray(times, dtype=float)
    last = np.maximum(np.floor(t / counter.update_s + 1e-9) * counter.update_s, truth.t0)
    energy = truth.energy(last)
    return np.floor(energy / counter.resolution_j + 1e-9) * counter.resolution_j
