"""powerkit energy: per step and per phase, against hand-computed sums and the real phase files."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import Cli

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def step_trace(path: Path, with_counter: bool = False) -> Path:
    """One GPU sampled every 1 s for 20 s: 100 W for t < 10 s, 300 W from t = 10 s."""
    rows = ["ts,power_w" + (",energy_j" if with_counter else "")]
    counter = 5000.0
    for k in range(21):
        power = 100.0 if k < 10 else 300.0
        line = f"{(T0 + timedelta(seconds=k)).isoformat()},{power}"
        if with_counter:
            line += f",{counter}"
            counter += 2 * power  # a counter that disagrees with the trapezoid on purpose
        rows.append(line)
    path.write_text("\n".join(rows) + "\n")
    return path


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def test_steps_by_hand(cli: Cli, tmp_path: Path) -> None:
    trace = step_trace(tmp_path / "t.csv")
    steps = tmp_path / "steps.csv"
    steps.write_text(f"step,start,duration_s,tokens\n1,{at(0)},10,100\n2,{at(10)},10,300\n")
    doc = cli.json("energy", trace, "--steps", steps, "--wait-below", "150W", "--tokens")
    one, two = doc["steps"]
    # step 1: nine 1 s steps at 100 W, then the 100 -> 300 W step: (100 + 300) / 2
    assert one["energy_j"] == pytest.approx(9 * 100 + 200)
    assert two["energy_j"] == pytest.approx(10 * 300)
    assert one["waiting_share"] == pytest.approx(0.9) and two["waiting_share"] == 0
    assert one["j_per_token"] == pytest.approx(11.0) and two["j_per_token"] == pytest.approx(10.0)
    assert one["duration_s"] == 10 and one["coverage"] == pytest.approx(1.0)
    assert doc["gpus"][0]["energy_j"] == pytest.approx(4100) and doc["gpus"][0]["source"] == (
        "trapezoid"
    )


def test_waiting_by_utilization(cli: Cli, tmp_path: Path) -> None:
    """Utilization 0 % for t < 6 s, 90 % after, unlogged at t = 15 s; power as step_trace."""
    rows = ["ts,power_w,gpu_util"]
    for k in range(21):
        util = "" if k == 15 else ("0" if k < 6 else "90")
        rows.append(f"{at(k)},{100.0 if k < 10 else 300.0},{util}")
    trace = tmp_path / "u.csv"
    trace.write_text("\n".join(rows) + "\n")
    steps = tmp_path / "steps.csv"
    steps.write_text(f"step,start,duration_s\n1,{at(0)},10\n2,{at(10)},10\n")
    doc = cli.json("energy", trace, "--steps", steps, "--wait-util", "10%")
    one, two = doc["steps"]
    # steps 0-1 ... 4-5 have both ends at 0 %; 5-6 averages 45 %; steps touching t = 15 s are
    # unlogged, not waiting
    assert one["waiting_share"] == pytest.approx(0.5) and two["waiting_share"] == 0
    assert doc["gpus"][0]["wait_util_pct"] == 10 and doc["gpus"][0]["wait_below_w"] is None
    by_power = cli.json("energy", trace, "--steps", steps, "--wait-below", "150W")
    assert by_power["steps"][0]["waiting_share"] == pytest.approx(0.9)
    r = cli("energy", step_trace(tmp_path / "t.csv"), "--steps", steps, "--wait-util", "10%")
    assert r.exit_code == 2 and "--wait-util needs GPU utilization" in r.stderr
    r = cli("energy", trace, "--steps", steps, "--wait-util", "150%")
    assert r.exit_code == 2 and "--wait-util" in r.stderr


def test_annotation_steps_split_a_sample_step_in_proportion(cli: Cli, tmp_path: Path) -> None:
    trace = step_trace(tmp_path / "t.csv")
    notes = tmp_path / "ann.jsonl"
    lines = [
        {"ts": at(0), "step": 1, "tokens": 0},
        {"ts": at(4.5), "step": 2, "tokens": 50},
        {"ts": at(4.6), "step": 2},
        {"ts": at(15), "step": 3, "tokens": 250},
        {"ts": at(20), "end": True, "tokens": 300},
    ]
    notes.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    doc = cli.json("energy", trace, "--steps", notes, "--wait-below", "150W")
    assert [s["step"] for s in doc["steps"]] == [1, 2, 3]  # numbers, as the step file wrote them
    first, second, third = doc["steps"]
    assert first["energy_j"] == pytest.approx(450)  # 4.5 s at 100 W
    assert second["energy_j"] == pytest.approx(450 + 200 + 5 * 300)  # 4.5-9 s, 9-10 s, 10-15 s
    assert third["energy_j"] == pytest.approx(5 * 300)
    # tokens are cumulative in annotations: each step holds the difference
    assert [s["tokens"] for s in doc["steps"]] == [50, 200, 50]
    assert second["waiting_share"] == pytest.approx(4.5 / 10.5)


def test_an_energy_counter_wins_over_the_trapezoid(cli: Cli, tmp_path: Path) -> None:
    trace = step_trace(tmp_path / "t.csv", with_counter=True)
    steps = tmp_path / "steps.csv"
    steps.write_text(f"step,start,end\n1,{at(0)},{at(10)}\n")
    doc = cli.json("energy", trace, "--steps", steps)
    assert doc["steps"][0]["energy_j"] == pytest.approx(10 * 200)  # the counter's 2 x power
    assert doc["gpus"][0]["source"] == "energy counter"


def test_step_and_phase_files_are_checked(cli: Cli, tmp_path: Path) -> None:
    trace = step_trace(tmp_path / "t.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text(f"step,begin\n1,{at(0)}\n")
    r = cli("energy", trace, "--steps", bad)
    assert r.exit_code == 2 and "needs the columns step,start" in r.stderr
    bad.write_text(f"step,start\n1,{at(10)}\n2,{at(0)}\n")
    r = cli("energy", trace, "--steps", bad)
    assert r.exit_code == 2 and f"{bad}:3: steps must be in time order" in r.stderr
    bad.write_text(f"step,start\n1,{at(0)}\n")
    r = cli("energy", trace, "--steps", bad)
    assert r.exit_code == 2 and "no complete step" in r.stderr
    r = cli("energy", trace, "--steps", bad, "--phases", bad)
    assert r.exit_code == 2 and "give one of --steps or --phases" in r.stderr
    phases = tmp_path / "phases.csv"
    phases.write_text("Timestamp,Phase,Runtime (s)\n1772359200,a,5\n")
    r = cli("energy", trace, "--phases", phases)
    assert r.exit_code == 2 and "no GPU energy column" in r.stderr
    phases.write_text("Timestamp,Phase,Runtime (s),GPU Energy (J)\n1772359200,a,five,3\n")
    r = cli("energy", trace, "--phases", phases)
    assert r.exit_code == 2 and "row 1 (phase 'a'): Runtime (s) 'five' is not a number" in r.stderr
    phases.write_text("Timestamp,Phase,Runtime (s),GPU Energy (J)\n1772359200,a,1e300,3\n")
    r = cli("energy", trace, "--phases", phases)
    assert r.exit_code == 2 and "Runtime (s) 1e+300 ends the phase after 2199" in r.stderr


def test_a_phase_file_in_joules_by_hand(cli: Cli, tmp_path: Path) -> None:
    trace = step_trace(tmp_path / "t.csv")
    phases = tmp_path / "phases.csv"
    start = T0.timestamp()
    phases.write_text(
        "Timestamp,Phase,Runtime (s),GPU Energy (J),Prompt\n"
        f'{start},warm,10,1000,"two\nlines"\n{start + 10},hot,10,3300,x\n'
    )
    doc = cli.json("energy", trace, "--phases", phases)
    warm, hot = doc["phases"]
    assert warm["trace_energy_j"] == pytest.approx(1100) and warm["counter_energy_j"] == 1000
    assert warm["difference_pct"] == pytest.approx(10.0)
    assert hot["difference_pct"] == pytest.approx(100 * (3000 - 3300) / 3300)


@pytest.mark.parametrize(
    ("log", "phases", "tz", "gpus", "first_j", "median_limit"),
    [
        (
            "smi_1xV100_falcon-7b_infer_inputsweep_100ms.csv",
            "smi_1xV100_falcon-7b_infer_inputsweep_PHASES_nvml_energy.csv",
            "America/New_York",
            1,
            11.509,
            0.5,
        ),  # uJ counters, EDT log
        (
            "smi_4xA100-40GB_llama2-70b_infer_inputsweep_100ms.csv",
            "smi_4xA100-40GB_llama2-70b_infer_inputsweep_PHASES_nvml_energy.csv",
            "America/Chicago",
            4,
            15.71 + 15.97 + 10.581 + 16.788,
            2.0,
        ),  # mJ counters, CDT log
    ],
)
def test_real_phase_files_against_their_logs(
    cli: Cli,
    realdata: Path,
    log: str,
    phases: str,
    tz: str,
    gpus: int,
    first_j: float,
    median_limit: float,
) -> None:
    args = ("energy", realdata / log, "--phases", realdata / phases, "--skip-bad-rows")
    doc = cli.json(*args, "--tz", tz)
    rows = doc["phases"]
    assert rows[0]["phase"] == "tokenizer" and rows[0]["counter_energy_j"] == pytest.approx(first_j)
    assert len(doc["gpus"]) == gpus and all(len(r["counter_per_gpu_j"]) == gpus for r in rows)
    assert all(r["coverage"] > 0.99 for r in rows)
    diffs = sorted(abs(r["difference_pct"]) for r in rows)
    assert diffs[len(diffs) // 2] < median_limit
    # the log read in the wrong zone misses the phases entirely, and says so
    r = cli(*args, "--tz", "UTC")
    assert r.exit_code == 0 and "less than half their time in the trace" in r.stderr
