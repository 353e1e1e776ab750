"""``bloat profile`` on real GPUs and ``bloat run`` of a plan, as library jobs: what they
measure and the document they return, told through callbacks (a progress factory and a
``note`` for what the user must know), callable from Python."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from powerkit.bloat.profile import write_profile
from powerkit.errors import BadInputError
from powerkit.units import parse_duration, parse_frequencies, parse_gpus

__all__ = ["Progress", "profile_nvml", "run_plan_live", "run_plan_sim"]

#: ``progress(label, steps)``: a context giving ``advance(note=...)`` for each step done
Progress = Callable[[str, int], contextlib.AbstractContextManager[Callable[..., None]]]


@contextlib.contextmanager
def _silent(label: str, steps: int) -> Iterator[Callable[..., None]]:
    yield lambda **_: None


def _ignore(text: str) -> None:
    return None


def profile_nvml(
    out: Path, run: str | None, stages: int | None, gpu_frequency: str | None,
    gpus: str | None, point: str, warmup: str, interval: str, *,
    progress: Progress = _silent, note: Callable[[str], None] = _ignore,
) -> str:  # fmt: skip
    """Measure each stage's instructions at each SM clock on real GPUs (clocks locked and put
    back) and write the profile to ``out``; return what was written, in words."""
    from powerkit.bloat.measure import measure_profile
    from powerkit.sweep.caps import LockedClocks
    from powerkit.sweep.job import sweep_config
    from powerkit.telemetry.nvml import NvmlSource
    from powerkit.telemetry.recorder import stop_on_signals

    if not run or stages is None or gpu_frequency is None:
        raise BadInputError(
            "bloat profile --backend nvml needs --run 'COMMAND {stage} {instruction}', --stages "
            "and --gpu-frequency"
        )
    freqs = parse_frequencies(gpu_frequency)
    config = sweep_config(warmup=warmup, point=point, interval=interval, cooldown="0s",
                          repeats=1, seed=0)  # fmt: skip
    source = NvmlSource(parse_gpus(gpus))
    stop = threading.Event()
    total = stages * 2 * len(freqs)
    try:
        with (
            stop_on_signals(stop),
            LockedClocks(source.gpus) as clocks,
            progress("profiling", total) as advance,
        ):
            measured = measure_profile(
                run, stages, freqs, source, clocks, config, stop=stop,
                on_point=lambda note: advance(note=note),
            )  # fmt: skip
    finally:
        source.close()
    for failure in measured.failures:
        note(failure)
    if measured.interrupted:
        raise BadInputError("interrupted before every stage was measured; no profile written")
    write_profile(measured.profile, out)
    return f"wrote {out}: {stages} stages x forward/backward x {len(freqs)} frequencies"


def run_plan_sim(
    preset: str, dag: Any, chosen: dict[str, Any], freqs: list[float], straggler: float,
    iterations: int, seed: int, all_max_s: float, idle_power_w: float,
    trace_out: Path | None, steps_out: Path | None, *, note: Callable[[str], None] = _ignore,
    info: Callable[[str], None] = _ignore,
) -> dict[str, Any]:  # fmt: skip
    """Run a plan's point and all-max clocks on the simulated pipeline ``preset``; the
    ``bloat run`` document (planned, measured, saved). ``note`` hears an idle power the plan
    did not assume, ``info`` the files written with ``trace_out``/``steps_out``."""
    from powerkit.bloat.pipeline import get_pipeline_preset, measure

    sim = get_pipeline_preset(preset)
    if sim.stages != dag.stages:
        raise BadInputError(f"the plan is for {dag.stages} stages; {preset} has {sim.stages}")
    if abs(idle_power_w - sim.idle_w) > 1e-9:
        note(
            f"the plan assumed {idle_power_w:g} W idle power; {preset}'s GPUs idle at "
            f"{sim.idle_w:g} W, so planned and measured energy differ (plan with --idle-power "
            f"{sim.idle_w:g}W)"
        )
    # planned: the point's energy, plus its GPUs idle until the straggler's iteration ends
    length = max(chosen["time_s"], straggler * all_max_s)
    planned_j = chosen["energy_j"] + idle_power_w * dag.stages * (length - chosen["time_s"])
    planned = measure(sim, dag, np.asarray(freqs, dtype=float), iterations=iterations,
                      straggler=straggler, seed=seed, keep=trace_out is not None)  # fmt: skip
    base = measure(sim, dag, np.full(dag.size, sim.f_max_mhz), iterations=iterations,
                   straggler=straggler, seed=seed)  # fmt: skip
    if trace_out is not None and steps_out is not None:
        from powerkit.bloat.pipeline import write_run

        write_run(sim, planned, trace_out, steps_out)
        info(f"wrote {trace_out} and {steps_out}")
    saved = base.energy_j - planned.energy_j
    return {
        "backend": "sim", "preset": preset, "straggler": straggler, "iterations": iterations,
        "planned": {"time_s": length, "energy_j": planned_j},
        "measured": {"time_s": planned.time_s, "energy_j": planned.energy_j},
        "all_max_measured": {"time_s": base.time_s, "energy_j": base.energy_j},
        "saved_j": saved, "saved_pct": 100 * saved / base.energy_j,
        "slowdown_pct": 100 * (planned.time_s / base.time_s - 1),
    }  # fmt: skip


def run_plan_live(
    plan_path: Path, actuator: str, steps_from: Path, frequencies: dict[str, list[float]],
    rounds: int, arm: str, warmup: str, interval: str, gpus: str | None, *,
    progress: Progress = _silent, note: Callable[[str], None] = _ignore,
) -> dict[str, Any]:  # fmt: skip
    """Alternate a running training loop between a plan's clocks and all-max clocks through
    its knob channel (``actuator``, ``file:PATH``), measuring each arm; the ``bloat run``
    document. The loop is left at all-max clocks."""
    from powerkit.actuator import KnobChannel
    from powerkit.bloat.live import measure_live
    from powerkit.telemetry.nvml import NvmlSource
    from powerkit.telemetry.recorder import stop_on_signals

    arm_s, warmup_s = parse_duration(arm), parse_duration(warmup, allow_zero=True)
    interval_s = parse_duration(interval)
    source = NvmlSource(parse_gpus(gpus))
    stop = threading.Event()
    try:
        with (
            KnobChannel(actuator[5:]) as channel,
            stop_on_signals(stop),
            progress("measuring", 2 * rounds) as advance,
        ):
            live = measure_live(
                channel, source, steps_from, frequencies, plan_path=str(plan_path),
                rounds=rounds, arm_s=arm_s, warmup_s=warmup_s, interval_s=interval_s, stop=stop,
                on_window=lambda a, w: advance(note=f"{a}: {w['power_w']:.0f} W"),
            )  # fmt: skip
            channel.write({"bloat_arm": "all_max", "bloat_plan": str(plan_path),
                           "frequencies": frequencies["all_max"]})  # fmt: skip
    finally:
        source.close()
    if live.interrupted:
        note("interrupted; the arms measured so far are reported")
    base, plan_arm = live.arms["all_max"], live.arms["plan"]
    saved = None
    if base.energy_j and plan_arm.energy_j is not None:
        saved = base.energy_j - plan_arm.energy_j
    return {
        "backend": "live", "plan": str(plan_path), "rounds": rounds,
        "measured": {"time_s": plan_arm.time_s, "energy_j": plan_arm.energy_j,
                     "power_w": plan_arm.power_w, "steps": plan_arm.steps},
        "all_max_measured": {"time_s": base.time_s, "energy_j": base.energy_j,
                             "power_w": base.power_w, "steps": base.steps},
        "saved_j": saved,
        "saved_pct": None if saved is None or not base.energy_j else 100 * saved / base.energy_j,
        "slowdown_pct": None if not (base.time_s and plan_arm.time_s)
        else 100 * (plan_arm.time_s / base.time_s - 1),
        "interrupted": live.interrupted,
        "windows": {a: live.arms[a].windows for a in live.arms},
    }  # fmt: skip
