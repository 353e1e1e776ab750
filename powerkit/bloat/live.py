"""Measure a plan on a running training job through the knob channel (``bloat run --backend
live``).

powerkit alternates two arms, all-max clocks and the plan, for ``rounds`` rounds: it publishes
the arm's frequency of every computation on the knob channel (powerkit/actuation/knobs.py), waits
``warmup_s`` for the loop to apply it, then samples the GPUs' power for ``arm_s`` while reading
the loop's step lines (``{"ts": unix s, "step": n}``, the format ``record --annotate-from``
reads). Per arm: iteration time = the mean spacing of the step starts seen in the window;
energy per iteration = the measured GPUs' mean total power over the window × that time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from powerkit.actuation.knobs import KnobChannel
from powerkit.core.errors import BadInputError, option
from powerkit.sweep.backends import sample_source
from powerkit.telemetry.annotate import AnnotationTail
from powerkit.telemetry.base import TelemetrySource

__all__ = ["ARMS", "ArmResult", "LiveResult", "StepStarts", "measure_live"]

ARMS = ("all_max", "plan")


@dataclass
class ArmResult:
    """One arm over all its rounds: iteration time (s), energy per iteration (J), mean power."""

    arm: str
    time_s: float | None = None
    energy_j: float | None = None
    power_w: float | None = None
    steps: int = 0
    windows: list[dict[str, float | None]] = field(default_factory=list)


@dataclass
class LiveResult:
    arms: dict[str, ArmResult]
    interrupted: bool = False


class StepStarts:
    """The first time each step number appears in the loop's step lines, read as ``record
    --annotate-from`` reads them (an appended file followed from where the last read stopped;
    ``ts`` in unix seconds or ISO 8601; an unfinished last line waits for its newline)."""

    def __init__(self, path: Path) -> None:
        self.tail = AnnotationTail(path)
        self.first: dict[Any, float] = {}

    def between(self, t0: float, t1: float) -> np.ndarray:
        """Start times of the steps that started in [t0, t1], sorted."""
        seen = len(self.tail.events)
        self.tail.poll(t1)
        for event in self.tail.events[seen:]:
            if "step" in event:
                self.first.setdefault(event["step"], float(event["ts"]))  # type: ignore[arg-type]
        return np.sort([t for t in self.first.values() if t0 <= t <= t1])


def measure_live(
    channel: KnobChannel,
    source: TelemetrySource,
    steps_from: Path,
    frequencies: dict[str, list[float]],
    *,
    plan_path: str,
    rounds: int,
    arm_s: float,
    warmup_s: float,
    interval_s: float,
    stop: threading.Event | None = None,
    on_window: Any = None,
) -> LiveResult:
    """Alternate the arms (their frequencies per computation, in the plan's computation order)
    and measure each; see the module docstring."""
    stop = stop or threading.Event()
    spacing: dict[str, list[float]] = {a: [] for a in ARMS}
    power: dict[str, list[float]] = {a: [] for a in ARMS}
    result = LiveResult({a: ArmResult(a) for a in ARMS})
    steps = StepStarts(steps_from)
    for round_ in range(rounds):
        for arm in ARMS:
            if stop.is_set():
                result.interrupted = True
                break
            channel.write(
                {"bloat_arm": arm, "bloat_plan": plan_path, "frequencies": frequencies[arm]}
            )
            stop.wait(warmup_s)
            epoch, times, watts, _ = sample_source(source, interval_s, arm_s, stop)
            if times.size == 0:
                continue
            starts = steps.between(epoch, epoch + float(times[-1]))
            total_w = float(watts.sum(axis=0).mean())
            window: dict[str, float | None] = {
                "round": round_,
                "power_w": total_w,
                "steps": float(max(starts.size - 1, 0)),
            }
            if starts.size >= 2:
                spacing[arm] += np.diff(starts).tolist()
                window["time_s"] = float(np.diff(starts).mean())
            power[arm].append(total_w)
            result.arms[arm].windows.append(window)
            if on_window is not None:
                on_window(arm, window)
    for arm in ARMS:
        r = result.arms[arm]
        r.steps = len(spacing[arm])
        if power[arm]:
            r.power_w = float(np.mean(power[arm]))
        if spacing[arm] and r.power_w is not None:
            r.time_s = float(np.mean(spacing[arm]))
            r.energy_j = r.power_w * r.time_s
    if not result.interrupted and any(result.arms[a].time_s is None for a in ARMS):
        raise BadInputError(
            f"{steps_from}: fewer than two step starts in an arm's window; lengthen "
            f"{option('arm')} (an "
            "arm should span several iterations) or check that the loop writes step lines there"
        )
    return result
