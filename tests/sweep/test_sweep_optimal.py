"""``sweep show --optimal``: the energy-optimal and Zeus's cost-optimal setting of a sweep.

A hand-made cap sweep on one 400 W GPU: caps 200, 300, 400 W and uncapped drawing 200, 280,
350 and 380 W for 50, 80, 90 and 95 tokens/s: 4.0, 3.5, 3.889 and 4.0 J/token.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from powerkit.core.errors import BadInputError
from powerkit.sweep.authority import SettingRow, SweepReport
from powerkit.sweep.optimal import optimal_settings, parse_objectives
from tests.conftest import Cli

POINTS = [(200.0, 200.0, 50.0), (300.0, 280.0, 80.0), (400.0, 350.0, 90.0), (None, 380.0, 95.0)]


def sweep(nameplate: float | None = 400.0, group_sizes: tuple[int, ...] = (8,)) -> SweepReport:
    rows = [
        SettingRow(
            group_size=group,
            concurrency=4,
            power_cap_w=cap,
            gpu_frequency_mhz=None,
            mean_power_w=w,
            p95_power_w=w,
            max_power_w=w,
            tokens_per_s=t,
            j_per_token=w / t,
            wh_per_1k_tokens=w / t / 3.6,
            repeats=1,
        )
        for group in group_sizes
        for cap, w, t in POINTS
    ]
    return SweepReport(rows, [], nameplate, "sim", None, 1)


def test_the_optimal_settings_of_a_hand_made_sweep() -> None:
    """Energy: 300 W (3.5 J/token), 15.8 % slower and 12.5 % less energy than uncapped. Cost
    η · J/token + (1 − η) · 400 W ÷ tokens/s: at η = 0.5 uncapped wins (4.105 against 4.167 at
    400 W and 4.25 at 300 W); at η = 0.8, 300 W (3.8 against 4.0 and 4.042); at η = 1 it is the
    energy optimum, at η = 0 the fastest."""
    energy, half, most, only_energy, only_time = optimal_settings(
        sweep(), [("energy", None), ("cost", 0.5), ("cost", 0.8), ("cost", 1.0), ("cost", 0.0)]
    )
    assert energy.setting["power_cap_w"] == 300 and energy.j_per_token == pytest.approx(3.5)
    assert "power_cap_w" not in energy.reference  # (uncapped)
    assert energy.throughput_change == pytest.approx(80 / 95 - 1)
    assert energy.energy_change == pytest.approx(3.5 / 4.0 - 1)
    assert "power_cap_w" not in half.setting and half.cost_per_token == pytest.approx(
        0.5 * 4.0 + 0.5 * 400 / 95
    )
    assert half.throughput_change == 0 and half.energy_change == 0
    assert most.setting["power_cap_w"] == 300 and most.cost_per_token == pytest.approx(3.8)
    assert only_energy.setting == energy.setting
    assert "power_cap_w" not in only_time.setting


def test_one_choice_per_setting_of_the_jobs_own_knobs() -> None:
    """Two group sizes run at the same four caps: a choice for each, each against its own
    uncapped setting, never one group size against the other."""
    at_8, at_16 = optimal_settings(sweep(group_sizes=(8, 16)), [("energy", None)])
    assert (at_8.setting, at_16.setting) == (
        {"group_size": 8, "concurrency": 4, "power_cap_w": 300},
        {"group_size": 16, "concurrency": 4, "power_cap_w": 300},
    )
    assert at_16.reference == {"group_size": 16, "concurrency": 4}


def test_a_sweep_of_the_jobs_own_knobs_has_no_optimum() -> None:
    """Group sizes 4 and 8 (no cap, no clock): the larger's fewer J/token are not an optimum
    of the same work's cost; refused, naming the knob."""
    rows = [
        r
        for r in sweep(group_sizes=(4, 8)).points
        if r.power_cap_w is None  # (the uncapped point of each group size)
    ]
    report = SweepReport(rows, [], 400.0, "sim", None, 1)
    with pytest.raises(BadInputError, match="varies group_size only"):
        optimal_settings(report, [("energy", None)])


def test_bad_objectives_are_one_line() -> None:
    for bad, why in [
        ("speed", "energy, cost"),
        ("cost:2", "from 0 to 1"),
        ("cost:x", "0 to 1"),
        ("energy:1", "energy, cost"),
        ("", "energy, cost"),
    ]:
        with pytest.raises(BadInputError, match=why):
            parse_objectives(bad)
    with pytest.raises(BadInputError, match="nameplate"):
        optimal_settings(sweep(None), [("cost", 0.5)])


def test_sweep_show_prints_writes_and_reads_back_the_optimum(cli: Cli, tmp_path: Path) -> None:
    stored = tmp_path / "caps.parquet"
    r = cli(
        "sweep",
        "--preset",
        "a100-7b",
        "--power-cap",
        "200W,300W,400W",
        "--point",
        "2m",
        "--out",
        stored,
    )
    assert r.exit_code == 0, r.stderr
    doc = cli.json("sweep", "show", stored, "--optimal", "energy,cost:0.5")
    energy, cost = doc["optimal"]
    assert energy["objective"] == "energy" and cost["eta"] == 0.5
    best = min((p for p in doc["points"] if p["j_per_token"]), key=lambda p: p["j_per_token"])
    assert energy["setting"]["power_cap_w"] == best["power_cap_w"]
    assert energy["reference"]["power_cap_w"] == 400
    assert SweepReport.from_doc(doc, "sweep.json").optimal[0].objective == "energy"  # type: ignore[index]
    assert "optimal" not in cli.json("sweep", "show", stored)
    page = tmp_path / "s.html"
    assert cli("sweep", "show", stored, "--optimal", "energy", "--html", page).exit_code == 0
    assert "objective" in page.read_text()
    r = cli("sweep", "show", stored, "--optimal", "fastest")
    assert r.exit_code == 2 and "--optimal 'fastest'" in r.stderr


def test_the_sweep_page_s_example_is_what_the_commands_print(cli: Cli, tmp_path: Path) -> None:
    """docs/sweep.md shows `sweep show --optimal` on a simulated cap sweep: its rows are what
    the two commands it quotes print now."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "sweep.md").read_text()
    block = text.split("--optimal energy,cost,cost:0.9\n", 1)[1].split("```", 1)[0]
    rows = [
        " ".join(line.split()) for line in block.splitlines() if re.match(r" (energy|cost)", line)
    ]
    assert len(rows) == 3
    stored = tmp_path / "caps.parquet"
    r = cli(
        "pfi",
        "sweep",
        "--backend",
        "sim",
        "--preset",
        "h200-dense-pretrain",
        "--caps",
        "300W,500W,700W",
        "--point",
        "2m",
        "--out",
        stored,
    )
    assert r.exit_code == 0, r.stderr
    shown = cli("sweep", "show", stored, "--optimal", "energy,cost,cost:0.9").stdout
    printed = {" ".join(line.split()) for line in shown.splitlines()}
    assert all(row in printed for row in rows), (rows, shown)
