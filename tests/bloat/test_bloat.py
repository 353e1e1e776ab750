"""bloat: the pipeline DAG, the frontier planner against brute force, its Pareto property, the
CLI from profile to plan to a measured run."""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from powerkit.actuation.knobs import Knobs
from powerkit.bloat.planner import plan
from powerkit.bloat.profile import INSTRUCTIONS, Choices, Profile, read_profile
from powerkit.bloat.schedule import build_dag
from tests.conftest import Cli
from tests.fake_nvml import FakeNvml


def random_profile(stages: int, freqs: int, seed: int) -> Profile:
    """Choices with random times and energies (not even monotone in frequency)."""
    rng = np.random.default_rng(seed)
    options = {}
    for s in range(stages):
        for i in INSTRUCTIONS:
            f = np.linspace(1400, 800, freqs)
            options[(s, i)] = Choices(f, rng.uniform(0.5, 2.0, freqs), rng.uniform(50, 200, freqs))
    return Profile(stages, options, "random")


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
@pytest.mark.parametrize(("stages", "microbatches"), [(2, 2), (3, 2), (2, 3), (3, 3)])
def test_uniform_pipeline_makespan(schedule: str, stages: int, microbatches: int) -> None:
    dag = build_dag(stages, microbatches, schedule)
    assert dag.size == 2 * stages * microbatches and (dag.edges[:, 0] < dag.edges[:, 1]).all()
    durations = np.where(dag.instruction == "forward", 1.0, 2.0)
    # every stage equally fast: (M + S - 1) x (forward + backward)
    assert dag.makespan(durations) == pytest.approx((microbatches + stages - 1) * 3.0)


def brute_force_g(
    profile: Profile, stages: int, microbatches: int, schedule: str, idle: float
) -> tuple[np.ndarray, np.ndarray]:
    """Every combination's makespan and Σ (e - idle t)."""
    dag = build_dag(stages, microbatches, schedule)
    opts = [
        profile.options[(int(s), str(i))] for s, i in zip(dag.stage, dag.instruction, strict=True)
    ]
    k = opts[0].time.size
    combos = np.array(list(itertools.product(range(k), repeat=dag.size)))
    t = np.stack([opts[n].time[combos[:, n]] for n in range(dag.size)], axis=1)
    g = sum(opts[n].energy[combos[:, n]] - idle * t[:, n] for n in range(dag.size))
    finish = np.zeros_like(t)
    preds = [dag.edges[dag.edges[:, 1] == v, 0] for v in range(dag.size)]
    for v in range(dag.size):
        start = finish[:, preds[v]].max(axis=1) if preds[v].size else 0.0
        finish[:, v] = start + t[:, v]
    return finish.max(axis=1), np.asarray(g)


@pytest.mark.parametrize(
    ("stages", "microbatches", "schedule", "seed"),
    [
        (2, 2, "1f1b", 0),
        (2, 2, "gpipe", 1),
        (3, 2, "1f1b", 2),
        (2, 3, "1f1b", 3),
        (3, 2, "gpipe", 4),
    ],
)
def test_exact_planner_matches_brute_force(
    stages: int, microbatches: int, schedule: str, seed: int
) -> None:
    profile = random_profile(stages, 3, seed)
    idle = 40.0
    result = plan(
        profile,
        stages=stages,
        microbatches=microbatches,
        schedule=schedule,
        idle_power_w=idle,
        points=6,
        method="exact",
        stragglers=(1.2,),
    )
    makespan, g = brute_force_g(profile, stages, microbatches, schedule, idle)
    fastest = makespan.min()
    assert result.all_max.time_s >= fastest - 1e-9
    for p in result.frontier:
        best = g[makespan <= p.deadline_s + 1e-9].min()
        assert p.energy_j - stages * idle * p.time_s == pytest.approx(best, rel=1e-7)
    # brute force's own frontier at the planner's deadlines is reached
    deadline = 1.2 * result.all_max.time_s
    best = g[makespan <= deadline + 1e-9].min()
    all_max_g = result.all_max.energy_j - stages * idle * result.all_max.time_s
    assert result.extrinsic[0].saved_j == pytest.approx(all_max_g - best, rel=1e-7)


@settings(max_examples=25, deadline=None)
@given(
    stages=st.integers(2, 3),
    microbatches=st.integers(1, 4),
    freqs=st.integers(2, 5),
    seed=st.integers(0, 10_000),
    idle=st.floats(0, 100),
    schedule=st.sampled_from(["1f1b", "gpipe"]),
)
def test_frontier_is_pareto(
    stages: int, microbatches: int, freqs: int, seed: int, idle: float, schedule: str
) -> None:
    result = plan(
        random_profile(stages, freqs, seed),
        stages=stages,
        microbatches=microbatches,
        schedule=schedule,
        idle_power_w=idle,
        points=5,
        method="relaxed",
    )
    times = [p.time_s for p in result.frontier]
    energies = [p.energy_j for p in result.frontier]
    assert times == sorted(times)
    assert all(b < a for a, b in itertools.pairwise(energies))  # no point dominated
    for p in result.frontier:
        assert p.time_s <= p.deadline_s + 1e-9  # rounding keeps the deadline
        assert p.lower_bound_j is not None and p.energy_j >= p.lower_bound_j - 1e-6
    saved = [result.intrinsic.saved_j] + [b.saved_j for b in result.extrinsic]
    assert all(b >= a - 1e-6 for a, b in itertools.pairwise(saved))


def test_relaxed_is_within_its_bound_of_exact() -> None:
    profile = random_profile(2, 4, 7)
    exact = plan(profile, stages=2, microbatches=3, points=4, method="exact")
    relaxed = plan(profile, stages=2, microbatches=3, points=4, method="relaxed")
    for e, r in zip(exact.frontier[:1], relaxed.frontier[:1], strict=True):
        assert r.lower_bound_j is not None
        assert r.lower_bound_j <= e.energy_j + 1e-6 <= r.energy_j + 1e-6


def test_profile_plan_run(cli: Cli, tmp_path: Path) -> None:
    profile = tmp_path / "profile.csv"
    r = cli("bloat", "profile", "--backend", "sim", "--preset", "a100-gpt3-pp4", "--out", profile)
    assert r.exit_code == 0, r.stderr
    assert profile.read_text().startswith("stage,instruction,frequency,time,energy\n")
    plan_json, frontier = tmp_path / "plan.json", tmp_path / "frontier.csv"
    doc = cli.json(
        "bloat",
        "plan",
        profile,
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--straggler",
        "1.1,1.5",
        "--points",
        "6",
        "--frontier",
        frontier,
        "--out",
        plan_json,
    )
    assert set(doc) >= {
        "all_max",
        "frontier",
        "intrinsic",
        "extrinsic",
        "stages",
        "microbatches",
        "schedule",
        "idle_power_w",
    }
    assert doc["frontier"][0]["time_s"] == pytest.approx(doc["all_max"]["time_s"])
    assert 0 < doc["intrinsic"]["saved_pct"] < doc["extrinsic"][1]["saved_pct"] < 60
    assert len(doc["frontier"][0]["frequencies"]) == len(doc["computations"]) == 64
    assert frontier.read_text().startswith("time_s,energy_j,gap_pct\n")
    assert json.loads(plan_json.read_text())["frontier"] == doc["frontier"]
    ran = cli.json(
        "bloat",
        "run",
        "--backend",
        "sim",
        "--preset",
        "a100-gpt3-pp4",
        "--plan",
        plan_json,
        "--straggler",
        "1.5",
    )
    # measured within a few per cent of planned (noise 2 % per computation)
    assert ran["measured"]["energy_j"] == pytest.approx(ran["planned"]["energy_j"], rel=0.05)
    assert ran["saved_pct"] > 0
    r = cli("bloat", "run", "--preset", "a40-bloom-pp8", "--plan", plan_json)
    assert r.exit_code == 2 and "the plan is for 4 stages; a40-bloom-pp8 has 8" in r.stderr
    plan75 = tmp_path / "plan75.json"
    cli.json(
        "bloat",
        "plan",
        profile,
        "--stages",
        "4",
        "--microbatches",
        "4",
        "--points",
        "2",
        "--idle-power",
        "50W",
        "--out",
        plan75,
    )
    r = cli("bloat", "run", "--preset", "a100-gpt3-pp4", "--plan", plan75)
    assert r.exit_code == 0 and "plan with --idle-power 75W" in r.stderr
    r = cli("bloat", "run", "--plan", plan_json)
    assert r.exit_code == 2 and "needs --preset" in r.stderr
    # the simulated run as a trace with step annotations: `energy --steps` finds the same energy
    trace, steps = tmp_path / "run.parquet", tmp_path / "steps.jsonl"
    ran = cli.json(
        "bloat",
        "run",
        "--preset",
        "a100-gpt3-pp4",
        "--plan",
        plan_json,
        "--straggler",
        "1.1",
        "--iterations",
        "3",
        "--trace-out",
        trace,
        "--steps-out",
        steps,
    )
    per_step = cli.json("energy", trace, "--steps", steps)["steps"]
    assert len(per_step) == 3
    assert np.mean([s["duration_s"] for s in per_step]) == pytest.approx(
        ran["measured"]["time_s"], rel=1e-6
    )
    assert np.mean([s["energy_j"] for s in per_step]) == pytest.approx(
        ran["measured"]["energy_j"], rel=0.01
    )
    r = cli(
        "bloat",
        "run",
        "--preset",
        "a100-gpt3-pp4",
        "--plan",
        plan_json,
        "--trace-out",
        tmp_path / "x.parquet",
    )
    assert r.exit_code == 2 and "go together" in r.stderr


def test_live_run_alternates_arms_through_the_knob_channel(
    cli: Cli, tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    """A training loop polls the knobs, runs iterations whose length follows the frequencies
    it was given, and writes step lines; `bloat run --backend live` measures both arms."""
    fake_nvml(gpus=2)
    profile, plan_json = tmp_path / "profile.csv", tmp_path / "plan.json"
    cli("bloat", "profile", "--preset", "a100-gpt3-pp4", "--out", profile)
    cli.json(
        "bloat",
        "plan",
        profile,
        "--stages",
        "4",
        "--microbatches",
        "4",
        "--points",
        "3",
        "--out",
        plan_json,
    )
    knobs_path, steps = tmp_path / "knobs.json", tmp_path / "steps.jsonl"
    arms_seen: list[str] = []
    done = threading.Event()

    def training_loop() -> None:
        knobs, step = Knobs(knobs_path), 0
        while not done.is_set():
            if knobs.poll():
                arms_seen.append(knobs.get("bloat_arm"))
            freqs = knobs.get("frequencies") or [1410.0]
            with steps.open("a") as fh:
                fh.write(json.dumps({"ts": time.time(), "step": step}) + "\n")
            step += 1
            time.sleep(0.02 * 1410.0 / float(np.mean(freqs)))  # slower at lower clocks

    loop = threading.Thread(target=training_loop)
    loop.start()
    try:
        last = len(json.loads(plan_json.read_text())["frontier"]) - 1
        ran = cli.json(
            "bloat",
            "run",
            "--backend",
            "live",
            "--plan",
            plan_json,
            "--actuator",
            f"file:{knobs_path}",
            "--steps-from",
            steps,
            "--rounds",
            "2",
            "--arm",
            "0.5s",
            "--warmup",
            "0.1s",
            "--interval",
            "0.05s",
            "--point",
            str(last),
        )
    finally:
        done.set()
        loop.join()
    assert arms_seen[:4] == ["all_max", "plan", "all_max", "plan"]
    base, planned = ran["all_max_measured"], ran["measured"]
    assert base["steps"] > 10 and planned["steps"] > 10
    assert planned["time_s"] > base["time_s"]  # the slowest point: lower clocks, longer steps
    assert base["energy_j"] == pytest.approx(base["power_w"] * base["time_s"])
    assert json.loads(knobs_path.read_text())["knobs"]["bloat_arm"] == "all_max"  # left at max
    r = cli("bloat", "run", "--backend", "live", "--plan", plan_json)
    assert r.exit_code == 2 and "needs --actuator" in r.stderr


def test_bad_profiles(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "p.csv"
    bad.write_text("stage,instruction,freq,time,energy\n")
    r = cli("bloat", "plan", bad, "--stages", "1", "--microbatches", "2")
    assert r.exit_code == 2 and "expected the header" in r.stderr
    bad.write_text(
        "stage,instruction,frequency,time,energy\n0,forward,1400,0.1,10\n0,sideways,1400,0.1,10\n"
    )
    r = cli("bloat", "plan", bad, "--stages", "1", "--microbatches", "2")
    assert r.exit_code == 2 and f"{bad}:3: instruction 'sideways'" in r.stderr
    bad.write_text(
        "stage,instruction,frequency,time,energy\n0,forward,1400,0.1,10\n0,backward,1400,-1,10\n"
    )
    r = cli("bloat", "plan", bad, "--stages", "1", "--microbatches", "2")
    assert r.exit_code == 2 and f"{bad}:3:" in r.stderr
    bad.write_text("stage,instruction,frequency,time,energy\n0,forward,1400,0.1,10\n")
    r = cli("bloat", "plan", bad, "--stages", "1", "--microbatches", "2")
    assert r.exit_code == 2 and "no rows for stage/instruction 0 backward" in r.stderr
    bad.write_text(
        "stage,instruction,frequency,time,energy\n0,forward,1400,0.1,10\n0,backward,1400,0.2,20\n"
    )
    r = cli("bloat", "plan", bad, "--stages", "2", "--microbatches", "2")
    assert r.exit_code == 2 and "profiles 1 stage(s), not 2" in r.stderr
    # the plan file's own bounds (a plan it could not read back): idle power, frontier points
    r = cli("bloat", "plan", bad, "--stages", "1", "--microbatches", "2", "--idle-power", "1e300W")
    assert r.exit_code == 2 and "--idle-power 1e+300 W: from 0 to 10,000 W" in r.stderr
    r = cli("bloat", "plan", bad, "--stages", "1", "--microbatches", "2", "--points", "99999999")
    assert r.exit_code == 2 and "--points 99999999: from 2 to 10,000" in r.stderr


STAGE_BENCH = """
import json, sys, time
stage, instruction, mhz = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
per_mb = 0.01 * (1 + stage) * (2 if instruction == "backward" else 1) * 1980 / mhz
print(json.dumps({"microbatches": 20, "seconds": 20 * per_mb}), flush=True)
if stage == 1 and instruction == "backward" and mhz < 1500:
    sys.exit(3)
time.sleep(1)
"""


def test_nvml_profile_locks_each_clock_and_measures(
    cli: Cli, tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake = fake_nvml(gpus=1)
    script = tmp_path / "stage.py"
    script.write_text(STAGE_BENCH)
    out = tmp_path / "profile.csv"
    run = f"{sys.executable} {script} {{stage}} {{instruction}} {{gpu_frequency_mhz}}"
    args = [
        "bloat",
        "profile",
        "--backend",
        "nvml",
        "--run",
        run,
        "--stages",
        "2",
        "--gpu-frequency",
        "1980,1200",
        "--warmup",
        "0s",
        "--point",
        "0.3s",
        "--interval",
        "0.05s",
        "--out",
        str(out),
    ]
    r = cli(*args)
    assert r.exit_code == 0, r.stderr
    assert "stage 1 backward 1200 MHz: exit code 3" in r.stderr  # warned, not fatal
    assert fake.locked_mhz == [None]  # locks reset
    profile = read_profile(out)
    fwd0 = profile.options[(0, "forward")]
    assert fwd0.frequency.tolist() == [1980.0, 1200.0]
    assert fwd0.time.tolist() == pytest.approx([0.01, 0.01 * 1980 / 1200])
    assert np.all(fwd0.energy / fwd0.time > 100)  # the fake GPU draws 100-150 W
    assert profile.options[(1, "backward")].frequency.tolist() == [1980.0]
    assert profile.options[(1, "backward")].time[0] == pytest.approx(0.04)
    r = cli(*args[:-2], "--out", str(tmp_path / "p2.csv"), "--run", "echo {instruction}")
    assert r.exit_code == 2 and "{stage} placeholder" in r.stderr
    r = cli("bloat", "profile", "--backend", "nvml", "--out", str(tmp_path / "p3.csv"))
    assert r.exit_code == 2 and "needs --run" in r.stderr


def test_plan_html_and_report_section(cli: Cli, tmp_path: Path) -> None:
    profile, plan_json = tmp_path / "profile.csv", tmp_path / "plan.json"
    cli("bloat", "profile", "--preset", "a100-gpt3-pp4", "--out", profile)
    page = tmp_path / "plan.html"
    doc = cli.json(
        "bloat",
        "plan",
        profile,
        "--stages",
        "4",
        "--microbatches",
        "4",
        "--points",
        "3",
        "--out",
        plan_json,
        "--html",
        page,
        "--plotly-js",
        "cdn",
    )
    # per-stage energy adds up to the iteration's; the timeline is the point's schedule
    for point in (doc["all_max"], doc["frontier"][0]):
        assert sum(point["stage_energy_j"]) == pytest.approx(point["energy_j"], rel=1e-9)
        ends = np.add(point["start_s"], point["duration_s"])
        assert ends.max() == pytest.approx(point["time_s"]) and min(point["start_s"]) == 0
    intr = doc["intrinsic"]
    assert intr["baseline_j"] - intr["planned_j"] == pytest.approx(intr["saved_j"])
    html = page.read_text()
    assert html.count("<figcaption>") == 3 and "Energy bloat: 4 stages x 4 microbatches" in html
    assert "straggler x1.5 (extrinsic)" in html
    report = tmp_path / "report.html"
    assert cli("report", "--bloat", plan_json, "--out", report).exit_code == 0
    bad = tmp_path / "old.json"
    old = json.loads(plan_json.read_text())
    del old["all_max"]["start_s"]
    bad.write_text(json.dumps(old))
    r = cli("report", "--bloat", bad, "--out", tmp_path / "r2.html")
    assert r.exit_code == 2 and "not a `bloat plan --out` document" in r.stderr
