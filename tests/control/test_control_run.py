"""control run: the loop, its safety fallback, and the commands train/eval/run end to end."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from powerkit.control.env import Period
from powerkit.control.live import LoopConfig, Plant, control_loop
from powerkit.control.ppo import PPO, PPOConfig
from powerkit.trace import read_trace
from tests.conftest import Cli
from tests.fake_nvml import FakeNvml


class ScriptedPlant(Plant):
    """Returns scripted periods: a power level per period, or None for stale telemetry."""

    def __init__(self, levels: list[float | None]) -> None:
        self.levels, self.applied, self.k = levels, [], 0

    def read(self, period_s: float, stop: threading.Event) -> Period | None:
        level = self.levels[self.k]
        self.k += 1
        if level is None:
            return None
        return Period(np.arange(10.0), np.full((1, 10), level), 100.0, 0, 60.0)

    def apply(self, value: int) -> None:
        self.applied.append(value)


def config(**kw: object) -> LoopConfig:
    return LoopConfig(budget_w=300.0, ladder=[2, 4, 8, 16], tokens_ref=10.0, **kw)  # type: ignore[arg-type]


def agent() -> PPO:
    return PPO(8, 3, PPOConfig(seed=0, hidden=(4,)))


def test_fallback_on_stale_telemetry() -> None:
    plant = ScriptedPlant([250.0, None, 250.0])
    decisions = control_loop(agent(), plant, config(periods=3, fallback_rung=1))
    assert decisions[1].action == "fallback" and decisions[1].reason == "stale telemetry"
    assert decisions[1].value == 4 and plant.applied[2] == 4
    assert decisions[2].action == "hold"  # waits for calm periods before resuming


def test_fallback_on_sustained_excess_then_resume() -> None:
    plant = ScriptedPlant([340.0, 340.0, 340.0, 250.0, 250.0, 250.0, 250.0])
    decisions = control_loop(agent(), plant, config(periods=7, hard_periods=3))
    actions = [d.action for d in decisions]
    assert actions[2] == "fallback" and "over budget" in decisions[2].reason
    assert decisions[2].value == 2  # the lowest rung by default
    assert actions[3:5] == ["hold", "hold"] and actions[5] == "policy"


def test_train_eval_run_commands(cli: Cli, tmp_path: Path) -> None:
    policy = tmp_path / "policy.npz"
    trained = cli.json(
        "control",
        "train",
        "--env",
        "sim",
        "--preset",
        "a100-7b",
        "--budget",
        "314.6W",
        "--knob",
        "group_size",
        "--steps",
        "100",
        "--out",
        policy,
    )
    assert trained["ladder"] == [2, 4, 8, 16] and trained["budget_w"] == 314.6
    report = cli.json(
        "control",
        "eval",
        "--policy",
        policy,
        "--seeds",
        "2",
        "--horizon",
        "1h",
        "--html",
        tmp_path / "eval.html",
    )
    assert set(report) >= {"budget_w", "env", "preset", "knob", "seeds", "arms"}
    assert [a["arm"] for a in report["arms"]] == [
        "ppo",
        "uncontrolled",
        "static_safe",
        "threshold",
        "hysteresis",
        "adaptive_threshold",
        "allowance",
        "predictive",
        "random",
    ]
    for arm in report["arms"]:
        for key in (
            "violation_rate_0_5s",
            "violation_rate_30s",
            "tokens",
            "tokens_per_mwh",
            "wh_per_1k_tokens",
        ):
            assert set(arm[key]) == {"mean", "std", "ci95_low", "ci95_high"}
            assert arm[key]["ci95_low"] <= arm[key]["mean"] <= arm[key]["ci95_high"]
        assert len(arm["per_seed"]) == report["seeds"]
    unc = next(a for a in report["arms"] if a["arm"] == "uncontrolled")
    safe = next(a for a in report["arms"] if a["arm"] == "static_safe")
    assert safe["violation_rate_0_5s"]["mean"] < unc["violation_rate_0_5s"]["mean"]
    out = tmp_path / "run.parquet"
    ran = cli.json(
        "control",
        "run",
        "--policy",
        policy,
        "--backend",
        "sim",
        "--duration",
        "30m",
        "--period",
        "2m",
        "--out",
        out,
    )
    assert ran["periods"] == 15
    table = read_trace(out).table()
    assert set(table.column("phase").to_pylist()) <= {"policy", "hold", "fallback", "shield"}
    assert set(table.column("group_size").to_pylist()) <= {2, 4, 8, 16}


def test_policy_file_checks(cli: Cli, tmp_path: Path) -> None:
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"nope")
    r = cli("control", "eval", "--policy", junk)
    assert r.exit_code == 2 and "not a powerkit policy" in r.stderr
    r = cli("control", "run", "--policy", tmp_path / "missing.npz")
    assert r.exit_code == 2 and "no such file" in r.stderr
    pytest.importorskip("numpy")


def test_trace_env_scales_the_replay_by_the_measured_response(cli: Cli, tmp_path: Path) -> None:
    from powerkit.control.trace_env import TraceEnv, response_table

    trace, sweep = tmp_path / "t.parquet", tmp_path / "s.parquet"
    assert (
        cli(
            "record",
            "--backend",
            "sim",
            "--preset",
            "a100-72b-tp4-gen",
            "--duration",
            "20m",
            "--out",
            trace,
            "--quiet",
        ).exit_code
        == 0
    )
    assert (
        cli(
            "sweep",
            "--preset",
            "a100-72b-tp4-gen",
            "--concurrency",
            "1,8",
            "--point",
            "10m",
            "--warmup",
            "1m",
            "--out",
            sweep,
            "--json",
        ).exit_code
        == 0
    )
    ladder, power, tokens = response_table(str(sweep), "concurrency")
    assert ladder == [1, 8] and power[0] < power[1] and tokens[0] < tokens[1]
    env = TraceEnv(str(trace), str(sweep), 150.0, "concurrency", period_s=30)
    env.reset(seed=0)
    high = env.set_rung(1)
    low = env.set_rung(0)
    assert low.power_w.mean() == pytest.approx(high.power_w.mean() * power[0] / power[1], rel=0.1)
    assert low.tokens / high.tokens == pytest.approx(tokens[0] / tokens[1])


def test_a_trace_trained_policy_runs_on_nvml_and_not_on_the_simulator(
    cli: Cli, tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    trace, sweep, policy = tmp_path / "t.parquet", tmp_path / "s.parquet", tmp_path / "p.npz"
    preset = ("--preset", "a100-72b-tp4-gen")
    assert (
        cli(
            "record", "--backend", "sim", *preset, "--duration", "20m", "--out", trace, "--quiet"
        ).exit_code
        == 0
    )
    sweep_args = ("--concurrency", "1,8", "--point", "10m", "--warmup", "1m", "--out", sweep)
    assert cli("sweep", *preset, *sweep_args, "--json").exit_code == 0
    train_args = ("--trace", trace, "--response", sweep, "--period", "30s", "--steps", "20")
    trained = cli.json(
        "control",
        "train",
        "--env",
        "trace",
        *train_args,
        "--budget",
        "150W",
        "--knob",
        "concurrency",
        "--out",
        policy,
        "--from",
        "+1m",
        "--fill",
        "hold:5s",
    )
    assert trained["env"] == "trace" and trained["preset"] == ""
    assert (trained["trace_from"], trained["trace_to"], trained["fill"]) == ("+1m", None, "hold:5s")
    r = cli("control", "run", "--policy", policy, "--backend", "sim", "--duration", "10m")
    assert r.exit_code == 2 and "trained on 'trace'" in r.stderr
    fake_nvml(gpus=1)
    knobs = tmp_path / "knobs.json"
    ran = cli.json(
        "control",
        "run",
        "--policy",
        policy,
        "--actuator",
        f"file:{knobs}",
        "--budget",
        "40%",
        "--period",
        "0.2s",
        "--interval",
        "0.05s",
        "--duration",
        "0.4s",
    )
    assert ran["periods"] == 2 and knobs.exists()
    # eval replays only what the user names: the paths the policy records are not opened
    r = cli("control", "eval", "--policy", policy, "--seeds", "1", "--horizon", "10m")
    assert r.exit_code == 2 and "name them with --trace and --response" in r.stderr
    moved = tmp_path / "moved"
    moved.mkdir()
    trace.rename(moved / "t.parquet")
    sweep.rename(moved / "s.parquet")
    doc = cli.json(
        "control",
        "eval",
        "--policy",
        policy,
        "--seeds",
        "1",
        "--horizon",
        "10m",
        "--arms",
        "ppo,uncontrolled",
        "--trace",
        moved / "t.parquet",
        "--response",
        moved / "s.parquet",
    )
    assert {a["arm"] for a in doc["arms"]} >= {"ppo", "uncontrolled"}
    r = cli(
        "control",
        "eval",
        "--policy",
        policy,
        "--arms",
        "",
        "--trace",
        moved / "t.parquet",
        "--response",
        moved / "s.parquet",
    )
    assert r.exit_code == 2 and "--arms '': name at least one" in r.stderr


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_interrupted_training_saves_the_policy_so_far(tmp_path: Path, sig: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from powerkit.control.train import load_policy

    policy = tmp_path / "p.npz"
    root = Path(__file__).resolve().parents[2]
    earlier = b"an earlier policy, kept whatever happens to this training"
    policy.write_bytes(earlier)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from powerkit.cli import main; main()",
            "control",
            "train",
            "--budget",
            "314.6W",
            "--steps",
            "1000000",
            "--out",
            str(policy),
            "--force",
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    partial = tmp_path / "p.unfinished.npz"
    deadline = time.monotonic() + 60
    while not partial.exists() and time.monotonic() < deadline:  # the first checkpoint
        time.sleep(0.2)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "training interrupted after" in err and "p.unfinished.npz" in err
    assert policy.read_bytes() == earlier  # --force replaces it only with a whole policy
    _, spec = load_policy(partial)
    assert spec.completed_steps is not None and 500 <= spec.completed_steps < 1_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.npz", "p.unfinished.npz"]


def test_train_several_seeds_keeps_the_validation_choice(cli: Cli, tmp_path: Path) -> None:
    from powerkit.control.train import VALIDATION_SEEDS, load_policy

    out = tmp_path / "p.npz"
    doc = cli.json(
        "control",
        "train",
        "--preset",
        "a100-7b",
        "--budget",
        "314.6W",
        "--steps",
        "50",
        "--seeds",
        "2",
        "--seed",
        "4",
        "--out",
        out,
    )
    selection = doc["selection"]
    assert [s["seed"] for s in selection["seeds"]] == [4, 5]
    assert selection["validation_seeds"] == list(VALIDATION_SEEDS)
    assert not set(VALIDATION_SEEDS) & set(range(1000, 1100))  # never the evaluation seeds
    under = [s for s in selection["seeds"] if s["violation_rate_0_5s"] <= 0.05]
    best = (
        max(under, key=lambda s: s["tokens"])
        if under
        else min(selection["seeds"], key=lambda s: s["violation_rate_0_5s"])
    )
    assert selection["kept_seed"] == best["seed"]
    _, spec = load_policy(out)
    assert spec.seed == best["seed"] and spec.selection == selection
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.npz"]  # the other seeds removed


def test_joint_knob_trains_evaluates_and_reports_the_cap_share(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "j.npz"
    trained = cli.json(
        "control",
        "train",
        "--preset",
        "a100-72b-tp4",
        "--budget",
        "237.5W",
        "--knob",
        "joint",
        "--steps",
        "50",
        "--out",
        out,
    )
    settings = trained["settings"]
    assert settings[0]["power_cap_w"] is not None and settings[-1]["power_cap_w"] is None
    report = cli.json(
        "control",
        "eval",
        "--policy",
        out,
        "--seeds",
        "1",
        "--horizon",
        "1h",
        "--arms",
        "ppo,uncontrolled,static_safe",
    )
    assert report["settings"] == settings
    safe = report["static_safe_knobs"]
    assert safe in settings
    arms = {a["arm"]: a for a in report["arms"]}
    assert arms["uncontrolled"]["cap_share"] == 0.0  # the top rung is never capped
    held = 1.0 if safe["power_cap_w"] is not None else 0.0
    assert arms["static_safe"]["cap_share"] == held  # held from the start
    r = cli(
        "control",
        "train",
        "--env",
        "trace",
        "--knob",
        "joint",
        "--budget",
        "300W",
        "--out",
        tmp_path / "x.npz",
    )
    assert r.exit_code == 2 and "--knob joint needs --env sim" in r.stderr


class UpAgent:
    """A policy that always asks for one rung up."""

    def act(self, obs: np.ndarray, greedy: bool = False) -> int:
        return 2


def test_the_shield_holds_or_steps_down_while_recent_violations_exceed_the_target() -> None:
    # 305 W: every sample over the 300 W budget, but under the hard margin (no fallback)
    plant = ScriptedPlant([250.0, 305.0, 250.0, 250.0, 250.0, 250.0, 250.0, 250.0, 250.0, 250.0])
    cfg = config(periods=10, target=0.05, shield=True)
    decisions = control_loop(UpAgent(), plant, cfg)  # type: ignore[arg-type]
    actions = [d.action for d in decisions]
    assert actions[0] == "policy" and decisions[0].value == 16  # up from 8 (start: the top)
    # the period at 305 W lifts the recent share to 10 % > 5 %: step down, whatever was asked
    assert actions[1] == "shield" and decisions[1].value == 8
    # clean periods: no step up while the recent share (0.9^k x 10 %) stays over the target
    assert actions[2:8] == ["shield"] * 6 and all(d.value == 8 for d in decisions[2:8])
    assert actions[8] == "policy" and decisions[8].value == 16  # 0.9^7 x 10 % < 5 %
    unshielded = control_loop(UpAgent(), ScriptedPlant([250.0, 305.0, 250.0]), config(periods=3))  # type: ignore[arg-type]
    assert [d.action for d in unshielded] == ["policy"] * 3


def test_a_policy_trained_on_power_alone_still_loads_and_runs(tmp_path: Path) -> None:
    """A policy file from before the length features (its obs_spec the power features) loads,
    is judged on the simulator on its own features, and runs in the loop; an observation
    powerkit never had is refused."""
    from dataclasses import asdict

    from powerkit.control.env import POWER_OBS
    from powerkit.control.judge import evaluate_policy
    from powerkit.control.train import TrainSpec, load_policy
    from powerkit.core.errors import BadInputError

    spec = TrainSpec(
        "sim",
        "a100-7b",
        314.6,
        "group_size",
        [2, 4, 8, 16],
        0.03,
        {"tokens": 1.0, "violation": 2.0, "target": 10.0, "switch": 0.01},
        list(POWER_OBS),
        50,
        0,
        shield=True,
    )
    old = tmp_path / "old.npz"
    PPO(len(POWER_OBS), 3, PPOConfig(seed=0, hidden=(4,))).save(old, {"train": asdict(spec)})
    agent, loaded = load_policy(old)
    assert agent.obs_dim == 8 and loaded.obs_spec == list(POWER_OBS)
    report = evaluate_policy(agent, loaded, seeds=1, horizon_s=1800, arms=("ppo",))
    assert report.arm("ppo").tokens["mean"] > 0
    plant = ScriptedPlant([250.0, 250.0])
    assert len(control_loop(agent, plant, config(periods=2))) == 2
    bad = tmp_path / "bad.npz"
    PPO(3, 3, PPOConfig(seed=0, hidden=(4,))).save(
        bad, {"train": {**asdict(spec), "obs_spec": ["a", "b", "c"]}}
    )
    with pytest.raises(BadInputError, match="another observation"):
        load_policy(bad)
    sub_step = tmp_path / "period.npz"  # a period within the step is for concurrency only
    PPO(8, 3, PPOConfig(seed=0, hidden=(4,))).save(
        sub_step, {"train": {**asdict(spec), "period_s": 30.0}}
    )
    with pytest.raises(BadInputError, match="a period within the step for group_size"):
        load_policy(sub_step)


class Recording(PPO):
    """A policy that remembers what it observed."""

    seen: list[np.ndarray]

    def act(self, obs: np.ndarray, greedy: bool = False) -> int:
        self.seen = [*getattr(self, "seen", []), obs.copy()]
        return 1


def test_the_loop_observes_the_lengths_a_period_brings() -> None:
    from powerkit.control.env import POWER_OBS, Lengths

    class LengthPlant(ScriptedPlant):
        def read(self, period_s: float, stop: threading.Event) -> Period | None:
            period = super().read(period_s, stop)
            if period is not None and self.k == 2:
                period.lengths = [(500.0, 1200.0)]
            return period

    policy = Recording(11, 3, PPOConfig(seed=0, hidden=(4,)))
    control_loop(
        policy, LengthPlant([250.0, 250.0]), config(periods=2, lengths=Lengths(400.0, 2.5))
    )
    first, second = (o[len(POWER_OBS) :] for o in policy.seen)
    assert list(first) == [1.0, 2.5, 0.0]  # nominal until a step has ended
    assert list(second) == [1.25, 3.0, 0.0]


def test_the_tokens_file_may_bring_each_steps_lengths(tmp_path: Path) -> None:
    """--tokens-from lines with response_tokens_mean and _p95 give a period each new step's
    lengths once; a line without them, or with a value that is not a positive finite number,
    gives none."""
    from powerkit.control.live import NvmlPlant

    class Source:
        def read_now(self, elapsed_s: float) -> dict[str, np.ndarray]:
            return {"power_w": np.array([200.0])}

    tokens = tmp_path / "tokens.jsonl"
    plant = NvmlPlant(Source(), None, "concurrency", 0.01, tokens)  # type: ignore[arg-type]
    stop = threading.Event()
    lines = [
        '{"tokens": 10, "response_tokens_mean": 400, "response_tokens_p95": 900}',
        '{"tokens": 20, "response_tokens_mean": 400, "response_tokens_p95": 900}',
        '{"tokens": 30, "response_tokens_mean": 420, "response_tokens_p95": 950}',
        '{"tokens": 40}',
        '{"tokens": 50, "response_tokens_mean": true, "response_tokens_p95": 950}',
        '{"tokens": 60, "response_tokens_mean": -1, "response_tokens_p95": NaN}',
    ]
    got = []
    for line in lines:
        tokens.write_text(line + "\n")
        period = plant.read(0.02, stop)
        assert period is not None
        got.append(period.lengths)
    assert got == [[(400.0, 900.0)], [], [(420.0, 950.0)], [], [], []]


def test_the_simulated_plant_changes_concurrency_within_the_step_when_trained_so() -> None:
    """control run --backend sim with a policy trained with a period within the step: the
    plant changes the running rollout's concurrency; otherwise the change waits for the
    next step. Each period carries the lengths of the steps that ended in it."""
    from powerkit.control.live import SimPlant
    from powerkit.sim import GrpoSim, get_preset

    stop = threading.Event()
    for within in (True, False):
        plant = SimPlant(
            GrpoSim(get_preset("a100-72b-tp4-gen"), seed=0), "concurrency", within_step=within
        )
        plant.apply(2)
        period = plant.read(30.0, stop)
        assert period is not None and period.lengths == []  # step 0 is still running
        plant.apply(1)
        s = plant.sim.sample(np.array([31.0]))
        default = get_preset("a100-72b-tp4-gen").concurrency  # step 0 was scheduled with it
        assert s.step[0] == 0 and s.concurrency[0] == (1 if within else default)
    plant = SimPlant(GrpoSim(get_preset("a100-7b"), seed=0), "group_size")
    period = plant.read(600.0, stop)
    assert period is not None and len(period.lengths) >= 1
    assert period.lengths[0] == plant.sim.step_lengths(0)
