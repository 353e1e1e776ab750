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

from dataclasses import dataclass, replace

import numpy as np

from powerkit.core.errors import BadInputError
from powerkit.sim.noise import hash_normal
from powerkit.sim.presets import Preset
from powerkit.sim.rollout import rollout_segments
from powerkit.sim.settings import (
    DRIFTS,
    LOGPROB,
    PHASES,
    REWARD,
    ROLLOUT,
    SIM_EPOCH_S,
    SYNC,
    TRAIN,
    Drift,
    Knobs,
    SimSamples,
    mean_length,
    response_lengths,
)

__all__ = ["PHASES", "SIM_EPOCH_S", "GrpoSim"]

_GRID_S = 0.1  # internal grid for temperature, wander and the energy counter
_KEEP_STATS = 64  # the steps whose response-length statistics are kept
_GROUP_FILL = 0.15  # exponent: group size 16 vs 8 raises busy power by 11 %, 4 lowers it 10 %
# Slowdown exponent under a cap per phase; fwd/bwd takes its own from the preset.
_CAP_EXPONENT = {ROLLOUT: 0.3, REWARD: 0.5, LOGPROB: 0.5, SYNC: 0.5}
_UTIL = {ROLLOUT: 70.0, REWARD: 15.0, LOGPROB: 100.0, TRAIN: 100.0, SYNC: 40.0}
_MEMCPY = {ROLLOUT: 20.0, REWARD: 5.0, LOGPROB: 45.0, TRAIN: 35.0, SYNC: 70.0}
_DRAM = {ROLLOUT: 0.3, REWARD: 0.05, LOGPROB: 0.4, TRAIN: 0.35, SYNC: 0.2}


class GrpoSim:
    """A deterministic (per seed) GRPO job; ask for readings at non-decreasing times."""

    def __init__(
        self,
        preset: Preset,
        knobs: Knobs | None = None,
        seed: int = 0,
        drift: Drift = DRIFTS["none"],
        drift_from: int = 0,
    ) -> None:
        self.preset = preset
        self.drift = drift
        self.drift_from = drift_from  # the training step the job's first step is (the trend)
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
        self._done: dict[str, np.ndarray] | None = None  # the final rows, as arrays
        self._t_end = 0.0
        self._tokens = 0.0
        self._step = 0
        self._plan: _Plan | None = None  # the last scheduled step's plan (to re-admit)
        self._stats: dict[int, tuple[float, float]] = {}  # recent steps' length mean, p95
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

    def set_knobs(self, knobs: Knobs, now: float | None = None) -> None:
        """Change the knobs; they take effect at the next step boundary (as in a trainer).
        With ``now``, a change of the concurrency alone acts in the rollout running then
        (``set_concurrency_now``), where one is."""
        self._check(knobs)
        # (the concurrency changes, and nothing else does)
        alone = knobs != self.knobs and replace(self.knobs, concurrency=knobs.concurrency) == knobs
        if now is not None and alone and self.set_concurrency_now(knobs.concurrency, now):
            return
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

    def _add_step(self) -> None:
        p, k = self.preset, self.knobs
        length, self._drift_state = mean_length(
            p,
            self.drift,
            self._sched_rng,
            self._drift_state,
            self.drift_from + self._step,
            self._step == 0,
        )
        seqs = p.prompts_per_step * k.group_size
        lengths = None if p.training_only else response_lengths(p, self._sched_rng, seqs, length)
        per_request = k.group_size if p.group_occupancy else p.seqs_per_request
        plan = _Plan(
            self._step,
            len(self._s["start"]),
            self._t_end,
            self._tokens,
            k,
            length,
            lengths,
            [(0.0, min(k.concurrency * per_request, seqs))],
        )
        self._schedule(plan)

    def _schedule(self, plan: _Plan) -> None:
        """Append the rows of ``plan``'s step to the schedule."""
        p, k = self.preset, plan.knobs
        self._plan = plan
        cap = k.power_cap_w if k.power_cap_w is not None else np.inf
        gen_tokens = p.prompts_per_step * k.group_size * plan.mean_len
        # On one GPU a group is also the unit the log-prob and training passes batch, so a
        # larger group fills them more (and a smaller one less) than the preset's default.
        fill = (k.group_size / p.group_size) ** _GROUP_FILL if p.group_occupancy else 1.0

        def busy(level_w: float) -> float:
            return p.idle_w + (level_w - p.idle_w) * fill

        product = TRAIN if p.training_only else ROLLOUT  # the phase whose tokens count
        rollout: list[tuple[int, float, float, float]] = []
        if plan.lengths is not None:
            segments = rollout_segments(self.preset, plan.lengths, plan.admissions)
            rollout = [(ROLLOUT, sec, level, tok) for sec, level, tok in segments]
            gen_tokens = sum(tok for *_, tok in rollout)
            self._stats[plan.step] = (
                float(plan.lengths.mean()),
                float(np.percentile(plan.lengths, 95)),
            )
            self._stats.pop(plan.step - _KEEP_STATS, None)
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

    def set_concurrency_now(self, concurrency: int, now: float) -> bool:
        """Change the concurrency during the running rollout: from ``now`` (or the first
        instant not yet simulated, at most 0.1 s later) the engine admits waiting sequences up
        to the new number of slots. Returns False, changing nothing, when no rollout is
        running then (the change then waits for the next step, as ``set_knobs``)."""
        plan = self._plan
        if plan is None or plan.lengths is None or plan.step != self._step - 1:
            return False
        k = plan.knobs
        self._check(replace(k, concurrency=concurrency))
        at = max(now, self._gi * _GRID_S + 1e-6, self._last_t + 1e-6)
        rows = slice(plan.row, None)
        kinds, starts = self._s["kind"][rows], self._s["start"][rows]
        ends, tok0, tok1 = self._s["end"][rows], self._s["tok0"][rows], self._s["tok1"][rows]
        inside = [
            i for i, kind in enumerate(kinds) if kind == ROLLOUT and starts[i] <= at < ends[i]
        ]
        if not inside:
            return False
        i = inside[0]
        done = tok0[i] + (tok1[i] - tok0[i]) * (at - starts[i]) / (ends[i] - starts[i])
        per_request = k.group_size if self.preset.group_occupancy else self.preset.seqs_per_request
        slots = min(concurrency * per_request, plan.lengths.size)
        for column in self._s.values():
            del column[plan.row :]
        self._t_end, self._tokens, self._step = plan.t0, plan.tokens0, plan.step
        admissions = [*plan.admissions, (done - plan.tokens0, slots)]
        self._schedule(
            replace(plan, knobs=replace(k, concurrency=concurrency), admissions=admissions)
        )
        self.knobs = replace(self.knobs, concurrency=concurrency)
        return True

    def step_lengths(self, step: int) -> tuple[float, float] | None:
        """(mean, p95) of a recent step's response lengths in tokens (None: not kept, or a
        training job)."""
        return self._stats.get(step)

    def lengths_between(self, after: int, through: int) -> list[tuple[float, float]]:
        """The kept (mean, p95) lengths of steps ``after`` + 1 … ``through``, in order."""
        found = (self._stats.get(k) for k in range(after + 1, through + 1))
        return [x for x in found if x is not None]

    def _arrays(self) -> dict[str, np.ndarray]:
        """The schedule as arrays. The rows before the last step's are final (only that
        step is ever scheduled again), so they are converted once and kept."""
        if self._arr is None:
            done = self._done
            have = done["start"].size if done else 0
            tail = {k: np.asarray(v[have:], dtype=float) for k, v in self._s.items()}
            self._arr = tail if not done else {k: np.concatenate([done[k], tail[k]]) for k in tail}
            final = self._plan.row if self._plan is not None else 0
            if final > have:
                self._done = {k: v[:final] for k, v in self._arr.items()}
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
            from scipy.signal import lfilter  # (loaded where used: its import costs every command)

            power, idx = self._grid_power(new)
            a = np.exp(-_GRID_S / p.thermal_tau_s)
            rho = np.exp(-_GRID_S / 20.0)
            target = p.ambient_c + p.thermal_c_per_w * self.thermal_factor[:, None] * power
            for g in range(p.gpus):
                eps = hash_normal(self.seed, g, 2, new) * np.sqrt(1 - rho * rho)
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
                np.stack([hash_normal(self.seed, g, stream, micros) for g in range(p.gpus)])
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


@dataclass(frozen=True)
class _Plan:
    """What a scheduled step was made of, to schedule it again when the concurrency changes
    during its rollout: where its rows and its clock began, its knobs and mean length, its
    sequences' lengths, and each (tokens done, slots) admission."""

    step: int
    row: int
    t0: float
    tokens0: float
    knobs: Knobs
    mean_len: float
    lengths: np.ndarray | None
    admissions: list[tuple[float, int]]
