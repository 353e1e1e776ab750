"""The sweep plan: the knob grid, repeats, and a seeded random order of execution."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from powerkit.core.errors import BadInputError, option

__all__ = ["GPU_KNOBS", "KNOBS", "KNOB_MAX", "Point", "plan_points"]

KNOBS = ("group_size", "concurrency", "power_cap_w", "gpu_frequency_mhz")
#: knobs the sweep sets on the GPUs through NVML (restored on exit), not the workload
GPU_KNOBS = ("power_cap_w", "gpu_frequency_mhz")
#: the largest settings a sweep or the simulator takes (GRPO groups are tens of samples,
#: generation concurrency at most thousands of sequences)
KNOB_MAX = {"group_size": 1024, "concurrency": 65536}


@dataclass(frozen=True)
class Point:
    """One run: a knob setting (None: the workload's own default), its repeat and order."""

    setting: int  # index of the knob combination in the grid
    repeat: int
    order: int  # position in the randomized execution order
    group_size: int | None
    concurrency: int | None
    power_cap_w: float | None
    gpu_frequency_mhz: float | None = None  # SM clock locked for the point (MHz)

    def knobs(self) -> dict[str, float | int | None]:
        """Return the knob values by name."""
        return {k: getattr(self, k) for k in KNOBS}


def plan_points(
    axes: dict[str, list[float]], repeats: int, seed: int, shuffle: bool = True
) -> list[Point]:
    """Return every (setting, repeat) of the full grid over ``axes``, in execution order.

    The order is randomized (seeded) so that slow drifts (temperature, the rest of the
    cluster) spread over all settings instead of biasing the ones run last.
    """
    if repeats < 1:
        raise BadInputError(f"{option('repeats')} must be at least 1")
    for name, values in axes.items():
        if name not in KNOBS:
            raise BadInputError(f"unknown knob {name!r}")
        if not values:
            raise BadInputError(f"no values for {name}")
        if len(set(values)) != len(values):
            raise BadInputError(f"repeated value in {name}: {values}")
    names = [k for k in KNOBS if k in axes]
    grid = list(itertools.product(*(axes[k] for k in names))) or [()]
    runs = [(s, r) for s in range(len(grid)) for r in range(repeats)]
    order = np.random.default_rng(seed).permutation(len(runs)) if shuffle else np.arange(len(runs))
    points = []
    for position, i in enumerate(order.tolist()):
        s, r = runs[i]
        v: dict[str, float] = dict(zip(names, grid[s], strict=True))
        group, conc = v.get("group_size"), v.get("concurrency")
        points.append(
            Point(
                s,
                r,
                position,
                None if group is None else int(group),
                None if conc is None else int(conc),
                v.get("power_cap_w"),
                v.get("gpu_frequency_mhz"),
            )
        )
    return points
