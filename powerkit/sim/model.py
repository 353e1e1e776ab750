"""The simulated GRPO job on simulated GPUs: a step schedule and power as a function of time.

A GRPO step is rollout generation -> reward scoring -> reference/log-prob pass -> fwd/bwd
training -> weight sync. Generation power follows occupancy (sequences in flight): every
sequence has its own length, the engine's slots take them first come first served, and the
rollout drains as the last (longest) ones finish. Group size adds volume (more sequences, a
longer phase) and, on one GPU, occupancy; under tensor-parallel sharding the engine's
requests carry a fixed number of sequences, so group size adds volume only. Sub-second
transients (overshoot at every power step, micro-batch communication dips), sensor noise,
slow wander and thermal leakage drift are part of the model.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

import numpy as np
from scipy.signal import lfilter

from powerkit.errors import BadInputError
from powerkit.sim.presets import Preset

__all__ = [
    "DRIFTS",
    "PHASES",
    "SIM_EPOCH_S",
    "Drift",
    "GrpoSim",
    "Knobs",
    "SimSamples",
]

#: simulated recordings start here unless told otherwise, so a seed gives identical files
SIM_EPOCH_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z

PHASES = ("rollout", "reward", "logprob", "train", "sync")
ROLLOUT, REWARD, LOGPROB, TRAIN, SYNC = range(5)
_GRID_S = 0.1  # internal grid for temperature, wander and the energy counter
_MIN_SEGMENT_S = 1.0  # rollout segments shorter than this are merged
_GROUP_FILL = 0.15  # exponent: group size 16 vs 8 raises busy power by 11 %, 4 lowers it 10 %
# Slowdown exponent under a cap per phase; fwd/bwd takes its own from the preset.
_CAP_EXPONENT = {ROLLOUT: 0.3, REWARD: 0.5, LOGPROB: 0.5, SYNC: 0.5}
_UTIL = {ROLLOUT: 70.0, REWARD: 15.0, LOGPROB: 100.0, TRAIN: 100.0, SYNC: 40.0}
_MEMCPY = {ROLLOUT: 20.0, REWARD: 5.0, LOGPROB: 45.0, TRAIN: 35.0, SYNC: 70.0}
_DRAM = {ROLLOUT: 0.3, REWARD: 0.05, LOGPROB: 0.4, TRAIN: 0.35, SYNC: 0.2}


@dataclass(frozen=True)
class Drift:
    """How a job's mean response length moves over training (docs/simulator.md, "Drifting
    response lengths"). Step k's mean length is the preset's × (1 + ``growth`` × k / 1000) ×
    exp(a_k − cv²/2) × exp(d_k − difficulty²/2): a linear trend, a step-to-step correlated
    part a_k = ``rho`` a_(k−1) + sqrt(1 − rho²) cv ε_k (its spread the preset's
    ``response_cv``, whatever ``rho``), and an independent per-batch difficulty d_k of spread
    ``difficulty``. ``none`` (rho 0, no trend, no difficulty) is the stationary job: each
    step drawn independently around one fixed mean, exactly as before drift existed."""

    name: str
    growth: float = 0.0  # relative growth of the mean length per 1,000 steps
    rho: float = 0.0  # step-to-step correlation of the log mean length
    difficulty: float = 0.0  # spread (log) of each batch's own difficulty

    @property
    def stationary(self) -> bool:
        return self.growth == 0 and self.rho == 0 and self.difficulty == 0


#: the drifts ``--drift`` names
DRIFTS: dict[str, Drift] = {
    "none": Drift("none"),
    "grpo": Drift("grpo", growth=0.5, rho=0.9, difficulty=0.05),
}


@dataclass(frozen=True)
class Knobs:
    """The workload's own knobs plus the GPU power cap (None: the nameplate) and a locked SM
    clock (None: the GPU boosts as it likes)."""

    group_size: int
    concurrency: int
    power_cap_w: float | None = None
    gpu_frequency_mhz: float | None = None

    def with_knob(self, knob: str, value: int) -> Knobs:
        """These knobs with ``knob`` (group_size or concurrency) set to ``value``."""
        return replace(self, **{knob: value})


@dataclass
class SimSamples:
    """Readings at the requested times; arrays are shaped (gpus, times)."""

    power_w: np.ndarray  # instantaneous
    power_avg_w: np.ndarray  # trailing 1 s average
    energy_j: np.ndarray  # cumulative counter since the start
    temp_c: np.ndarray
    sm_clock_mhz: np.ndarray
    gpu_util: np.ndarray
    mem_util: np.ndarray
    dram_active: np.ndarray
    power_limit_w: np.ndarray
    step: np.ndarray  # (times,)
    phase: list[str]
    tokens: np.ndarray
    group_size: np.ndarray
    concurrency: np.ndarray


class GrpoSim:
    """A deterministic (per seed) GRPO job; ask for readings at non-decreasing times."""

    def __init__(self, preset: Preset, knobs: Knobs | None = None, seed: int = 0,
                 drift: Drift = DRIFTS["none"]) -> None:  # fmt: skip
        self.preset = preset
        self.drift = drift
        self._drift_state = 0.0  # a_k, the correlated part of the log mean length
        self.knobs = knobs or Knobs(preset.group_size, preset.concurrency)
        self._check(self.knobs)
        self._sched_rng = np.random.default_rng([seed, 0])
        g = preset.gpus
        self.gpu_factor = 1.0 + 0.015 * self._sched_rng.standard_normal(g)
        self.thermal_factor = 1.0 + 0.05 * self._sched_rng.standard_normal(g)
        cols = (
            "start",
            "end",
            "kind",
            "level",
            "prev",
            "tok0",
            "tok1",
            "step",
            "group",
            "conc",
            "cap",  # the power a phase is held at: the limit, or lower under a locked clock
            "limit",  # the power limit in force
            "clock",
        )
        self._s: dict[str, list[float]] = {c: [] for c in cols}
        self._arr: dict[str, np.ndarray] | None = None
        self._t_end = 0.0
        self._tokens = 0.0
        self._step = 0
        self.seed = seed
        # Grid state (per GPU) at the last two grid points: temperature, wander, energy.
        idle_temp = preset.ambient_c + preset.thermal_c_per_w * preset.idle_w + 5.0
        self._gi = 0
        start = (np.full((g, 2), idle_temp), np.zeros((g, 2)), np.zeros((g, 2)))
        self._hist_cur: tuple[np.ndarray, np.ndarray, np.ndarray] = start
        self._extend(0.0)
        self._last_true = self._grid_power(np.array([0]))[0][:, 0]
        self._last_t = -np.inf

    # -- knobs and schedule -------------------------------------------------------------
    def _check(self, knobs: Knobs) -> None:
        if knobs.group_size < 1 or knobs.concurrency < 1:
            raise BadInputError("group size and concurrency must be at least 1")
        cap = knobs.power_cap_w
        if cap is not None and not (self.preset.idle_w < cap <= 1.5 * self.preset.tdp_w):
            raise BadInputError(
                f"power cap {cap:g} W is outside {self.preset.idle_w:g}-"
                f"{1.5 * self.preset.tdp_w:g} W for {self.preset.gpu_name}"
            )
        f = knobs.gpu_frequency_mhz
        if f is not None and not (0.2 * self.preset.sm_clock_mhz <= f <= self.preset.sm_clock_mhz):
            raise BadInputError(
                f"GPU frequency {f:g} MHz is outside {0.2 * self.preset.sm_clock_mhz:g}-"
                f"{self.preset.sm_clock_mhz:g} MHz for {self.preset.gpu_name}"
            )

    def set_knobs(self, knobs: Knobs) -> None:
        """Change the knobs; they take effect at the next step boundary (as in a trainer)."""
        self._check(knobs)
        self.knobs = knobs

    @property
    def tokens(self) -> float:
        """Return the tokens generated by the steps scheduled so far."""
        return self._tokens

    def schedule_step(self, t: float) -> tuple[float, float]:
        """Return (start, end) of the first step starting at or after ``t``, scheduling it
        with the current knobs if it is not scheduled yet (a controller's period)."""
        self._extend(t)  # schedules through the step that contains t (or starts at it)
        a = self._arrays()
        first = self._first_phase(a)
        later = np.flatnonzero(first & (a["start"] >= t - 1e-9))
        if later.size == 0:
            self._add_step()
            return self.schedule_step(t)
        a = self._arrays()
        step = a["step"][later[0]]
        return float(a["start"][later[0]]), float(a["end"][a["step"] == step].max())

    def step_starts(self) -> np.ndarray:
        """Return the start time (s) of every scheduled step."""
        a = self._arrays()
        return a["start"][self._first_phase(a)]

    @staticmethod
    def _first_phase(a: dict[str, np.ndarray]) -> np.ndarray:
        """Return a mask of the phases that start a step."""
        return np.diff(a["step"], prepend=-1.0) != 0

    def _add(self, **row: float) -> None:
        for key, value in row.items():
            self._s[key].append(value)

    def _rollout(self, seqs: int, batch: int, mean_len: float) -> list[tuple[float, float, float]]:
        """Return the rollout as (seconds, power per GPU in W, tokens) segments.

        Each of ``seqs`` sequences draws its own length (lognormal around the step's mean,
        coefficient of variation ``seq_cv``, at most ``max_response_ratio`` × the preset's
        mean); ``batch`` slots decode them first come, first served (continuous batching):
        while sequences wait, every slot is busy; once the queue is empty, occupancy falls as
        the last sequences finish — the drain at the end of generation. A decode iteration
        with n sequences in flight advances each by one token, at the preset's decode power
        and rate for a batch of n (``Preset.decode``). Segments shorter than
        ``_MIN_SEGMENT_S`` are merged (time-weighted power), which keeps the schedule small
        and changes nothing at 0.5 s.
        """
        p = self.preset
        sigma = np.sqrt(np.log1p(p.seq_cv**2))
        draws = self._sched_rng.standard_normal(seqs)
        lengths = np.clip(
            np.round(mean_len * np.exp(sigma * draws - sigma * sigma / 2)),
            1,
            max(1.0, p.max_response_ratio * p.response_tokens),
        )
        finish = list(lengths[:batch])
        heapq.heapify(finish)
        starts = [0.0] * batch
        ends = []
        for length in lengths[batch:]:
            free = heapq.heappop(finish)
            ends.append(free)
            starts.append(free)
            heapq.heappush(finish, free + length)
        ends.extend(finish)
        # n(k): sequences in flight between consecutive events (iterations, i.e. tokens)
        events = np.concatenate([np.asarray(starts), np.asarray(ends)])
        delta = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
        order = np.argsort(events, kind="stable")
        at, n = np.unique(events[order], return_index=True)
        active = np.cumsum(delta[order])[np.r_[n[1:] - 1, len(order) - 1]]
        iters = np.diff(at)
        active = active[:-1]
        busy = iters > 0
        iters, active = iters[busy], active[busy]
        power, rate = p.decode(active)
        tokens = iters * active
        seconds = tokens / rate
        segments: list[tuple[float, float, float]] = []
        acc = [0.0, 0.0, 0.0]  # seconds, power x seconds, tokens
        for sec, watts, tok in zip(seconds, power, tokens, strict=True):
            if acc[0] >= _MIN_SEGMENT_S and abs(watts - acc[1] / acc[0]) > 1e-9:
                segments.append((acc[0], acc[1] / acc[0], acc[2]))
                acc = [0.0, 0.0, 0.0]
            acc = [acc[0] + sec, acc[1] + watts * sec, acc[2] + tok]
        if acc[0] > 0:
            segments.append((acc[0], acc[1] / acc[0], acc[2]))
        return segments

    def _mean_length(self) -> float:
        """This step's mean response length (Drift; stationary: one draw around the preset's
        mean, the draw every earlier recording made)."""
        p, d = self.preset, self.drift
        cv = p.response_cv
        eps = self._sched_rng.standard_normal()
        if d.stationary:
            return float(p.response_tokens * np.exp(cv * eps - cv * cv / 2))
        # (the first step draws from the stationary spread, every later one continues it)
        a = (
            cv * eps
            if self._step == 0
            else d.rho * self._drift_state + np.sqrt(1 - d.rho**2) * cv * eps
        )
        self._drift_state = float(a)
        hard = d.difficulty * self._sched_rng.standard_normal()
        trend = 1 + d.growth * self._step / 1000
        return float(p.response_tokens * trend * np.exp(a - cv * cv / 2)
                     * np.exp(hard - d.difficulty**2 / 2))  # fmt: skip

    def _add_step(self) -> None:
        p, k = self.preset, self.knobs
        cap = k.power_cap_w if k.power_cap_w is not None else np.inf
        length = self._mean_length()
        seqs = p.prompts_per_step * k.group_size
        gen_tokens = seqs * length
        per_request = k.group_size if p.group_occupancy else p.seqs_per_request
        batch = min(k.concurrency * per_request, seqs)
        # On one GPU a group is also the unit the log-prob and training passes batch, so a
        # larger group fills them more (and a smaller one less) than the preset's default.
        fill = (k.group_size / p.group_size) ** _GROUP_FILL if p.group_occupancy else 1.0

        def busy(level_w: float) -> float:
            return p.idle_w + (level_w - p.idle_w) * fill

        product = TRAIN if p.training_only else ROLLOUT  # the phase whose tokens count
        if p.training_only:
            rollout: list[tuple[int, float, float, float]] = []
        else:
            rollout = [
                (ROLLOUT, sec, level, tok) for sec, level, tok in self._rollout(seqs, batch, length)
            ]
            gen_tokens = sum(tok for *_, tok in rollout)
        phases = [
            *rollout,
            (REWARD, p.overhead_s, p.overhead_w, 0.0),
            (LOGPROB, gen_tokens * (1 + p.prompt_ratio) / p.logprob_tok_s, busy(p.logprob_w), 0.0),
            (TRAIN, gen_tokens / p.train_tok_s, busy(p.train_w), 0.0),
            (SYNC, p.sync_s, p.sync_w, 0.0),
        ]
        if p.generation_only:
            phases = phases[: len(rollout) + 1]  # rollout and scoring: a generation job
        elif p.training_only:
            phases = [(TRAIN, gen_tokens / p.train_tok_s, busy(p.train_w), gen_tokens), phases[-1]]
        prev = self._s["level"][-1] if self._s["level"] else p.idle_w
        # A locked clock c = f / f_max holds a phase's power above idle to c³ of its own (the
        # cube law the cap model below inverts), so it acts as a per-phase cap at that power.
        lock = 1.0 if k.gpu_frequency_mhz is None else k.gpu_frequency_mhz / p.sm_clock_mhz
        for kind, seconds, level, made in phases:
            slow, clock = 1.0, 1.0
            held = min(cap, p.idle_w + (level - p.idle_w) * lock**3) if lock < 1 else cap
            if level > held:
                ratio = (level - p.idle_w) / (held - p.idle_w)
                if kind == TRAIN:  # only the compute-bound share stretches
                    m = p.train_mem_share
                    slow = m + (1.0 - m) * ratio**p.train_cap_exponent
                else:
                    slow = ratio ** _CAP_EXPONENT[kind]
                clock = ratio ** (-1.0 / 3.0)
            duration = seconds * slow
            tok0 = self._tokens
            if kind == product:
                self._tokens += made
            self._add(
                start=self._t_end,
                end=self._t_end + duration,
                kind=kind,
                level=level,
                prev=prev,
                tok0=tok0,
                tok1=self._tokens,
                step=self._step,
                group=k.group_size,
                conc=k.concurrency,
                cap=held,
                limit=cap,
                clock=clock,
            )
            prev = min(level, held)
            self._t_end += duration
        self._step += 1
        self._arr = None

    def _arrays(self) -> dict[str, np.ndarray]:
        if self._arr is None:
            self._arr = {k: np.asarray(v, dtype=float) for k, v in self._s.items()}
        return self._arr

    def _extend(self, t: float) -> None:
        while self._t_end <= t:
            self._add_step()

    # -- power ----------------------------------------------------------------------------
    def _job_power(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (steady power, transient overshoot, phase index) per GPU, noise-free.

        Both powers are before GPU-to-GPU factors and leakage; the caller holds the steady
        part at the cap (as the power-capping firmware does) and adds the overshoot, which
        a real cap does not catch within a fraction of a second.
        """
        p = self.preset
        a = self._arrays()
        idx = np.searchsorted(a["start"], t, side="right") - 1
        kind = a["kind"][idx]
        level = a["level"][idx].copy()
        pos = t - a["start"][idx]
        train = kind == TRAIN
        cyc = np.mod(pos, p.microbatch_s)
        comm = train & (cyc > p.microbatch_duty * p.microbatch_s)
        level = np.where(comm, level * p.microbatch_dip, level)
        cap = a["cap"][idx]
        held = np.minimum(level, cap)
        # Overshoot after every rise: at a phase start, and after each communication dip.
        rise = np.maximum(np.minimum(a["level"][idx], cap) - a["prev"][idx], 0.0)
        since = pos
        mb_rise = np.where(train & ~comm, a["level"][idx] * (1 - p.microbatch_dip), 0.0)
        mb_since = np.where(train & ~comm & (pos > p.microbatch_s), cyc, np.inf)
        spike = rise * np.exp(-since / p.overshoot_tau_s) + np.minimum(mb_rise, cap) * np.exp(
            -mb_since / p.overshoot_tau_s
        )
        return held, p.overshoot * spike, idx

    def _grid_power(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (per-GPU power without wander and leakage, phase index) at grid indices."""
        held, spike, idx = self._job_power(index * _GRID_S)
        return (held + spike)[None, :] * self.gpu_factor[:, None], idx

    def _cap_at(self, idx: np.ndarray) -> np.ndarray:
        return self._arrays()["cap"][idx]

    def _advance_grid(self, t_max: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Integrate temperature, wander and energy on the grid up to t_max; return the grid.

        Grid noise is a hash of (seed, GPU, grid index), so the result does not depend on
        how the caller splits time into requests.
        """
        p = self.preset
        last = max(self._gi, int(np.ceil(t_max / _GRID_S)))
        new = np.arange(self._gi + 1, last + 1)
        self._extend(float((last + 1) * _GRID_S))
        grid = np.arange(self._gi - 1, last + 1) * _GRID_S
        temp = np.empty((p.gpus, grid.size))
        wander = np.empty_like(temp)
        energy = np.empty_like(temp)
        temp[:, :2], wander[:, :2], energy[:, :2] = self._hist_cur
        if new.size:
            power, idx = self._grid_power(new)
            a = np.exp(-_GRID_S / p.thermal_tau_s)
            rho = np.exp(-_GRID_S / 20.0)
            target = p.ambient_c + p.thermal_c_per_w * self.thermal_factor[:, None] * power
            for g in range(p.gpus):
                eps = _hash_normal(self.seed, g, 2, new) * np.sqrt(1 - rho * rho)
                temp[g, 2:], _ = lfilter([1 - a], [1, -a], target[g], zi=[a * temp[g, 1]])
                wander[g, 2:], _ = lfilter([1.0], [1, -rho], eps, zi=[rho * wander[g, 1]])
            true = (
                power
                * (1 + p.leak_per_c * (temp[:, 2:] - 40.0))
                * (1 + p.wander_frac * wander[:, 2:])
            )
            true = np.minimum(true, self._cap_at(idx)[None, :] * 1.02)
            prev = np.concatenate([self._last_true[:, None], true[:, :-1]], axis=1)
            energy[:, 2:] = energy[:, 1:2] + np.cumsum(0.5 * (true + prev) * _GRID_S, axis=1)
            self._last_true = true[:, -1]
        self._gi = last
        self._hist_cur = (temp[:, -2:], wander[:, -2:], energy[:, -2:])
        return grid, temp, wander, energy

    def sample(self, times: np.ndarray) -> SimSamples:
        """Return readings at ``times`` (s since the job start, non-decreasing across calls)."""
        t = np.asarray(times, dtype=float)
        if t.size == 0 or t[0] < self._last_t - 1e-9 or np.any(np.diff(t) < 0):
            raise ValueError("sample times must be non-empty and non-decreasing")
        self._last_t = float(t[-1])
        p = self.preset
        grid, temp_g, wander_g, energy_g = self._advance_grid(float(t[-1]))

        def on_grid(values: np.ndarray, at: np.ndarray) -> np.ndarray:
            return np.stack([np.interp(at, grid, v) for v in values])

        temp = on_grid(temp_g, t)
        scale = (1 + p.leak_per_c * (temp - 40.0)) * (1 + p.wander_frac * on_grid(wander_g, t))
        scale *= self.gpu_factor[:, None]
        held, spike, idx = self._job_power(t)
        cap = self._cap_at(idx)[None, :]
        instant = np.minimum(held[None, :] * scale, cap) + spike[None, :] * scale
        job = held + spike
        offsets = np.linspace(-0.9, 0.0, 10)
        window = np.clip(t[:, None] + offsets[None, :], 0.0, None)
        w_held, w_spike, _ = self._job_power(window.ravel())
        avg = np.minimum(
            w_held.reshape(window.shape)[None, :, :] * scale[:, :, None], cap[:, :, None]
        ).mean(axis=2)
        avg += (w_spike.reshape(window.shape).mean(axis=1))[None, :] * scale
        micros = np.round(t * 1e6).astype(np.int64)
        noise = np.stack(
            [
                np.stack([_hash_normal(self.seed, g, stream, micros) for g in range(p.gpus)])
                for stream in (0, 1)
            ]
        )
        instant = np.maximum(instant + noise[0] * p.noise_frac * instant, 0.0)
        average = np.maximum(avg * (1 + 0.3 * p.noise_frac * noise[1]), 0.0)
        a = self._arrays()
        kind = a["kind"][idx].astype(int)
        pos = np.clip(
            (t - a["start"][idx]) / np.maximum(a["end"][idx] - a["start"][idx], 1e-9), 0, 1
        )
        tokens = a["tok0"][idx] + (a["tok1"][idx] - a["tok0"][idx]) * pos
        occupancy = np.clip((job - p.idle_w) / max(p.gen_max_w - p.idle_w, 1.0), 0.0, 1.0)
        util = np.vectorize(_UTIL.__getitem__)(kind) + np.where(kind == ROLLOUT, 30 * occupancy, 0)
        memcpy = np.vectorize(_MEMCPY.__getitem__)(kind) + np.where(
            kind == ROLLOUT, 50 * occupancy, 0
        )
        dram = np.vectorize(_DRAM.__getitem__)(kind) + np.where(kind == ROLLOUT, 0.5 * occupancy, 0)
        # Memory-bound training moves more bytes per FLOP: DRAM and copy engines stay busier.
        m = p.train_mem_share
        dram = dram + np.where(kind == TRAIN, 0.9 * m, 0.0)
        memcpy = memcpy + np.where(kind == TRAIN, 100.0 * m, 0.0)
        limit = np.minimum(a["limit"][idx], p.tdp_w)
        ones = np.ones((p.gpus, 1))
        return SimSamples(
            power_w=instant,
            power_avg_w=average,
            energy_j=on_grid(energy_g, t),
            temp_c=temp,
            sm_clock_mhz=ones * (p.sm_clock_mhz * a["clock"][idx])[None, :],
            gpu_util=ones * np.clip(util, 0, 100)[None, :],
            mem_util=ones * np.clip(memcpy, 0, 100)[None, :],
            dram_active=ones * np.clip(dram, 0, 1)[None, :],
            power_limit_w=ones * limit[None, :],
            step=a["step"][idx].astype(np.int64),
            phase=[PHASES[k] for k in kind],
            tokens=np.floor(tokens).astype(np.int64),
            group_size=a["group"][idx].astype(np.int32),
            concurrency=a["conc"][idx].astype(np.int32),
        )


_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
    return x ^ (x >> np.uint64(31))


def _hash_normal(seed: int, gpu: int, stream: int, keys: np.ndarray) -> np.ndarray:
    """Return standard normal draws that depend only on (seed, gpu, stream, key)."""
    base = np.uint64((seed * 1_000_003 + gpu * 7919 + stream * 104_729) & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        h1 = _splitmix64(keys.astype(np.uint64) * np.uint64(2) + base)
        h2 = _splitmix64(h1 ^ np.uint64(0xD6E8FEB86659FD93))
    u1 = ((h1 >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53
    u2 = (h2 >> np.uint64(11)).astype(np.float64) / 2.0**53
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
