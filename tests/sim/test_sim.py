"""The simulated GRPO job: determinism, mechanisms of the knobs, power cap, transients."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from powerkit.core.errors import BadInputError
from powerkit.sim import PRESETS, GrpoSim, Knobs, get_preset


def mean_power(
    preset: str,
    *,
    group: int | None = None,
    conc: int | None = None,
    cap: float | None = None,
    seconds: float = 2400,
    seed: int = 0,
) -> float:
    p = get_preset(preset)
    sim = GrpoSim(p, Knobs(group or p.group_size, conc or p.concurrency, cap), seed=seed)
    t = np.arange(0, seconds, 0.5)
    power = sim.sample(t).power_w
    return float(power[:, t > 120].mean())


def swing(values: list[float]) -> float:
    return (max(values) - min(values)) / max(values)


def test_required_presets_exist() -> None:
    for name in ("a100-7b", "a100-14b", "a100-72b-tp4", "h100-8b", "h200-70b-tp8"):
        assert name in PRESETS
    assert get_preset("a100-72b-tp4").gpus == 4
    assert get_preset("h200-70b-tp8").gpus == 8
    with pytest.raises(BadInputError, match="unknown preset"):
        get_preset("a100-9000b")


def test_deterministic_per_seed_and_independent_of_chunking() -> None:
    p = get_preset("a100-14b")
    whole = GrpoSim(p, seed=5).sample(np.arange(0, 200, 0.5))
    sim = GrpoSim(p, seed=5)
    parts = [sim.sample(np.arange(s, s + 20, 0.5)) for s in range(0, 200, 20)]
    assert np.array_equal(whole.power_w, np.concatenate([x.power_w for x in parts], axis=1))
    other = GrpoSim(p, seed=6).sample(np.arange(0, 200, 0.5))
    assert not np.array_equal(whole.power_w, other.power_w)


def test_group_size_has_authority_on_one_gpu() -> None:
    p = get_preset("a100-7b")
    powers = [mean_power("a100-7b", group=g) for g in p.group_ladder]
    assert powers == sorted(powers)
    assert swing(powers) > 0.2


def test_group_size_loses_authority_under_sharding_while_concurrency_keeps_it() -> None:
    p = get_preset("a100-72b-tp4")
    by_group = [mean_power("a100-72b-tp4", group=g, seconds=4000) for g in p.group_ladder]
    by_conc = [mean_power("a100-72b-tp4", conc=c, seconds=4000) for c in p.concurrency_ladder]
    assert swing(by_group) <= 0.05
    assert 0.15 <= swing(by_conc) <= 0.25


def test_power_cap_clips_and_slows() -> None:
    p = get_preset("a100-7b")
    free = GrpoSim(p, seed=1)
    capped = GrpoSim(p, Knobs(p.group_size, p.concurrency, 250.0), seed=1)
    t = np.arange(0, 3600, 0.5)
    a, b = free.sample(t), capped.sample(t)
    assert np.quantile(b.power_w, 0.9) < 265  # held at the cap but for noise and overshoot
    assert np.quantile(a.power_w, 0.9) > 300
    assert b.tokens[-1] < a.tokens[-1]  # a capped job makes fewer tokens in the same time
    assert (b.power_limit_w == 250).all()
    with pytest.raises(BadInputError, match="power cap"):
        GrpoSim(p, Knobs(8, 8, 10.0))


def test_phases_tokens_and_transients() -> None:
    sim = GrpoSim(get_preset("a100-7b"), seed=2)
    t = np.arange(0, 600, 0.1)
    s = sim.sample(t)
    assert set(s.phase) == {"rollout", "reward", "logprob", "train", "sync"}
    assert np.all(np.diff(s.tokens) >= 0) and s.tokens[-1] > 0
    assert np.all(np.diff(s.energy_j[0]) > 0)
    # sub-second transients: instantaneous power exceeds the 1 s average by >10 % at times
    assert (s.power_w[0] > 1.1 * s.power_avg_w[0]).mean() > 0.005
    # thermal drift: the GPU warms up under load
    assert s.temp_c[0, -1] > s.temp_c[0, 0] + 10


def test_knob_changes_apply_at_next_step() -> None:
    p = get_preset("a100-7b")
    sim = GrpoSim(p, seed=0)
    first = sim.sample(np.array([1.0]))
    sim.set_knobs(Knobs(2, 1))
    later = sim.sample(np.arange(2.0, 1000.0, 1.0))
    assert first.group_size[0] == p.group_size
    assert later.group_size[0] == p.group_size  # step 0 keeps its knobs
    assert later.group_size[-1] == 2 and later.concurrency[-1] == 1


def test_sample_times_must_not_go_back() -> None:
    sim = GrpoSim(get_preset("a100-7b"))
    sim.sample(np.array([10.0]))
    with pytest.raises(ValueError):
        sim.sample(np.array([5.0]))


def _rollout_rows(sim: GrpoSim, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(durations, levels, tokens) of one step's rollout segments."""
    sim.schedule_step(0.0)
    while sim.step_starts().size <= step + 1:
        sim.schedule_step(float(sim.step_starts()[-1]) + 1e-6)
    a = sim._arrays()
    rows = (a["step"] == step) & (a["kind"] == 0)
    return a["end"][rows] - a["start"][rows], a["level"][rows], a["tok1"][rows] - a["tok0"][rows]


def test_rollout_drains_as_the_longest_sequences_finish() -> None:
    p = get_preset("a100-7b")
    seconds, levels, tokens = _rollout_rows(GrpoSim(p, seed=3), 2)
    # full slots first, then occupancy falls as the last sequences finish
    assert levels[0] == levels.max() and np.all(np.diff(levels) <= 1e-9)
    assert levels[-1] < p.idle_w + (levels[0] - p.idle_w) * 0.5
    assert seconds[1:].sum() > 0.25 * seconds.sum()  # the drain is a real share of the rollout
    # every token decoded is counted once: volume = sequences x mean length (±25 % sampling)
    volume = p.prompts_per_step * p.group_size * p.response_tokens
    assert 0.75 * volume < tokens.sum() < 1.25 * volume
    # equal lengths in whole waves: the slots stay full to the end, no drain
    same = p.with_overrides(seq_cv=0.0, response_cv=0.0)
    seconds, levels, tokens = _rollout_rows(GrpoSim(same, seed=3), 2)
    assert levels.size == 1 and tokens.sum() == pytest.approx(volume)
    # spread lengths make the same volume take longer: the tail runs at a small batch
    assert GrpoSim(p, seed=3).schedule_step(0.0)[1] > GrpoSim(same, seed=3).schedule_step(0.0)[1]


# ML.ENERGY Leaderboard v3.0 (github.com/ml-energy/leaderboard, public/data/models/
# meta-llama__Llama-3.1-8B-Instruct__lm-arena-chat.json, commit 0cd52dab): Llama 3.1 8B on one
# H100, vLLM 0.11.1 — max_num_seqs, average GPU power (W), output tokens/s.
_ML_ENERGY_H100_8B = [
    (8, 486.4, 1070),
    (32, 559.7, 3391),
    (64, 610.3, 5147),
    (128, 669.2, 7037),
    (256, 690.5, 9010),
]


def test_h100_decode_matches_the_ml_energy_measurements() -> None:
    p = get_preset("h100-8b")
    for batch, power_w, tokens_s in _ML_ENERGY_H100_8B:
        model_w, model_tok = p.decode(np.array(batch))
        assert model_w == pytest.approx(power_w, rel=0.01)
        assert model_tok == pytest.approx(tokens_s, rel=0.04)


def test_drifting_response_lengths_follow_their_model() -> None:
    """Drift: the mean length grows by ``growth`` per 1,000 steps, its log deviation is
    correlated step to step by ``rho`` with the preset's spread, and ``none`` is stationary."""
    from powerkit.sim.settings import DRIFTS, Drift, mean_length

    p = get_preset("a100-7b")
    drift, rng, state = Drift("test", growth=1.0, rho=0.9), np.random.default_rng([3, 0]), 0.0
    lengths = []
    for k in range(4000):
        length, state = mean_length(p, drift, rng, state, k, k == 0)
        lengths.append(length)
    lengths_a = np.array(lengths)
    trend = 1 + np.arange(4000) / 1000
    dev = np.log(lengths_a / (p.response_tokens * trend))
    assert np.corrcoef(dev[:-1], dev[1:])[0, 1] == pytest.approx(0.9, abs=0.03)
    assert dev.std() == pytest.approx(p.response_cv, rel=0.2)
    assert lengths_a[3000:].mean() / lengths_a[:1000].mean() == pytest.approx(4.5 / 1.5, rel=0.1)
    flat = [mean_length(p, DRIFTS["none"], rng, 0.0, k, k == 0) for k in range(2000)]
    first = [length for length, _ in flat]
    assert all(state == 0.0 for _, state in flat)  # (stationary: no correlated part)
    assert abs(np.corrcoef(first[:-1], first[1:])[0, 1]) < 0.06
    assert DRIFTS["none"].stationary and not DRIFTS["grpo"].stationary


def test_a_drifting_recording_says_so(tmp_path: Path) -> None:
    from powerkit.trace.parquet import read_parquet_trace
    from tests.conftest import Cli

    out = tmp_path / "d.parquet"
    r = Cli()("record", "--backend", "sim", "--duration", "10m", "--drift", "grpo", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert read_parquet_trace(out).meta.extra["drift"] == "grpo"


def test_admission_first_come_first_served_with_changing_slots() -> None:
    """admit by hand: four sequences of 4 tokens on 2 slots start at iterations 0, 0, 4, 4;
    from iteration 2 with one running (ending at 4), one slot admits the next at 4 and the
    last at 8, three slots admit both at 2; a lowered count preempts nothing."""
    from powerkit.sim.rollout import admit

    four = np.full(4, 4.0)
    assert list(admit(four, 2, 0.0, [])) == [0, 0, 4, 4]
    assert list(admit(four[:2], 1, 2.0, [4.0])) == [4, 8]
    assert list(admit(four[:2], 3, 2.0, [4.0])) == [2, 2]
    assert list(admit(four[:1], 1, 2.0, [4.0, 6.0])) == [6]  # two running, one slot: wait


def _rollout_end(sim: GrpoSim) -> float:
    a = sim._arrays()
    return float(a["end"][(a["kind"] == 0) & (a["step"] == sim._step - 1)].max())


def test_concurrency_changes_within_the_running_rollout() -> None:
    """set_concurrency_now: more slots admit the waiting sequences at once (the rollout
    ends sooner), fewer hold them back (later), the same changes nothing; every token is
    still made; outside a rollout nothing changes and False says the change must wait."""
    p = get_preset("a100-72b-tp4-gen")

    def run(c: int | None, at: float = 100.0) -> tuple[GrpoSim, float, bool | None]:
        sim = GrpoSim(p, Knobs(8, 2), seed=1)
        sim.sample(np.arange(0.0, at, 0.5))
        changed = None if c is None else sim.set_concurrency_now(c, at)
        return sim, _rollout_end(sim), changed

    base, end, _ = run(None)
    same, end_same, ok = run(2)
    more, end_more, ok_more = run(8)
    fewer, end_fewer, ok_fewer = run(1)
    assert ok and ok_more and ok_fewer
    assert end_same == pytest.approx(end, abs=1e-6) and same.tokens == pytest.approx(base.tokens)
    assert end_more < end - 60 and end_fewer > end + 60
    assert more.tokens == pytest.approx(base.tokens) == pytest.approx(fewer.tokens)
    s = more.sample(np.array([101.0, 102.0]))
    assert list(s.concurrency) == [8, 8] and more.knobs.concurrency == 8
    late, _, ok_late = run(8, at=end + 1.0)  # the rollout is over: scoring runs
    assert ok_late is False and late.knobs.concurrency == 2
    assert _rollout_end(late) == pytest.approx(end, abs=1e-6)


def test_step_lengths_are_the_steps_drawn_lengths() -> None:
    sim = GrpoSim(get_preset("a100-7b"), seed=4)
    sim.schedule_step(0.0)
    mean, p95 = sim.step_lengths(0) or (0.0, 0.0)
    assert sim._plan is not None and sim._plan.lengths is not None
    assert mean == pytest.approx(sim._plan.lengths.mean())
    assert p95 == pytest.approx(np.percentile(sim._plan.lengths, 95)) and p95 > mean
    assert sim.step_lengths(5) is None
    training = GrpoSim(get_preset("h200-dense-pretrain"), seed=0)
    training.schedule_step(0.0)
    assert training.step_lengths(0) is None  # a training job draws no responses


def test_drift_from_starts_the_trend_later() -> None:
    from powerkit.sim import DRIFTS, Drift

    grow = Drift("g", growth=1.0)
    early = GrpoSim(get_preset("a100-7b"), seed=2, drift=grow)
    late = GrpoSim(get_preset("a100-7b"), seed=2, drift=grow, drift_from=1000)
    early.schedule_step(0.0), late.schedule_step(0.0)
    assert (
        late._plan
        and early._plan
        and late._plan.mean_len == pytest.approx(2 * early._plan.mean_len)
    )
    assert DRIFTS["none"].stationary
