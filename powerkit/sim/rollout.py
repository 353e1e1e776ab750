"""A rollout on the simulated engine: sequences of given lengths decoded first come, first
served on the engine's slots (continuous batching), as segments of constant occupancy."""

from __future__ import annotations

import heapq

import numpy as np

from powerkit.sim.presets import Preset

__all__ = ["admit", "iteration_at", "occupancy", "rollout_segments"]

_MIN_SEGMENT_S = 1.0  # rollout segments shorter than this are merged


def rollout_segments(
    preset: Preset, lengths: np.ndarray, admissions: list[tuple[float, int]]
) -> list[tuple[float, float, float]]:
    """Return the rollout as (seconds, power per GPU in W, tokens) segments.

    The engine's slots decode ``lengths`` first come, first served (continuous
    batching); ``admissions`` holds (tokens generated since the rollout's start, slots)
    — the first at 0, later ones where the concurrency changed during the rollout
    (``set_concurrency_now``). Raising the slots admits waiting sequences at once; lowering
    them preempts nothing: the running sequences finish and no new one starts until
    fewer run than the slots. While sequences wait, every slot is busy; once the queue is
    empty, occupancy falls as the last sequences finish — the drain at the end of
    generation. A decode iteration with n sequences in flight advances each by one token,
    at the preset's decode power and rate for a batch of n (``Preset.decode``). Segments
    shorter than ``_MIN_SEGMENT_S`` are merged (time-weighted power), which keeps the
    schedule small and changes nothing at 0.5 s.
    """
    starts = admit(lengths, admissions[0][1], 0.0, [])
    cuts = []  # the iterations where the slots changed: segments are not merged across
    for done, slots in admissions[1:]:
        at = iteration_at(preset, done, starts, lengths)
        if at is None:  # the rollout was over by then
            break
        cuts.append(at)
        begun = int(np.searchsorted(starts, at, side="left"))  # FCFS: a prefix began
        ends = starts[:begun] + lengths[:begun]
        running = [float(e) for e in ends if e > at]
        starts = np.concatenate([starts[:begun], admit(lengths[begun:], slots, at, running)])
    segments: list[tuple[float, float, float]] = []
    acc = [0.0, 0.0, 0.0]  # seconds, power x seconds, tokens
    took, power, tokens, first, _ = occupancy(preset, starts, lengths)
    for sec, watts, tok, it in zip(took, power, tokens, first, strict=True):
        cut = bool(cuts) and it >= cuts[0]
        if cut:
            cuts.pop(0)
        if acc[0] > 0 and (
            cut or (acc[0] >= _MIN_SEGMENT_S and abs(watts - acc[1] / acc[0]) > 1e-9)
        ):
            segments.append((acc[0], acc[1] / acc[0], acc[2]))
            acc = [0.0, 0.0, 0.0]
        acc = [acc[0] + sec, acc[1] + watts * sec, acc[2] + tok]
    if acc[0] > 0:
        segments.append((acc[0], acc[1] / acc[0], acc[2]))
    return segments


def occupancy(
    preset: Preset, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (seconds, power, tokens, first iteration, sequences in flight) of each
    stretch of the rollout with a constant number of sequences in flight (sequences
    decode one token an iteration; ``starts`` in iterations)."""
    events = np.concatenate([starts, starts + lengths])
    delta = np.concatenate([np.ones(starts.size), -np.ones(starts.size)])
    order = np.argsort(events, kind="stable")
    at, n = np.unique(events[order], return_index=True)
    active = np.cumsum(delta[order])[np.r_[n[1:] - 1, len(order) - 1]]
    iters = np.diff(at)
    active, first = active[:-1], at[:-1]
    busy = iters > 0
    iters, active, first = iters[busy], active[busy], first[busy]
    power, rate = preset.decode(active)
    tokens = iters * active
    return tokens / rate, power, tokens, first, active


def iteration_at(
    preset: Preset, done: float, starts: np.ndarray, lengths: np.ndarray
) -> float | None:
    """The decode iteration at which a rollout has generated ``done`` tokens (None: it
    was over by then)."""
    _, _, tokens, first, active = occupancy(preset, starts, lengths)
    made = np.cumsum(tokens)
    k = int(np.searchsorted(made, done, side="right"))
    if k >= tokens.size:
        return None
    before = float(made[k - 1]) if k else 0.0
    return float(first[k] + (done - before) / float(active[k]))


def admit(lengths: np.ndarray, slots: int, now: float, running: list[float]) -> np.ndarray:
    """First come, first served: the iteration at which each of ``lengths`` starts, with
    ``slots`` slots from iteration ``now`` and ``running`` (their end iterations) in flight."""
    heap = list(running)
    heapq.heapify(heap)
    starts = np.empty(lengths.size)
    for i, length in enumerate(lengths):
        while len(heap) >= slots:
            now = max(now, heapq.heappop(heap))
        starts[i] = now
        heapq.heappush(heap, now + length)
    return starts
