"""powerkit pilot: the plan's figures by hand, the Markdown, the file, bad inputs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from powerkit.core.errors import BadInputError
from powerkit.econ.assumptions import DEFAULTS
from powerkit.econ.pilot import PilotInputs, pilot_markdown, pilot_plan
from tests.conftest import Cli
from tests.econ.test_econ import FLEET, write


def inputs(**kw: object) -> PilotInputs:
    base = PilotInputs(
        window="30s",
        peak_fraction=0.5,
        margin=0.05,
        site_mw=12.0,
        pue=replace(DEFAULTS["pue"], value=1.2),
        gpu_tdp_w=1000.0,
        racks=4,
        gpus_per_rack=8,
        target=0.8,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_plan_by_hand() -> None:
    plan = pilot_plan(inputs())
    assert plan.site_it_kw == pytest.approx(10_000)  # 12 MW / 1.2
    assert plan.site_gpus_at_nameplate == 10_000  # 10 MW of IT / 1 kW
    assert plan.pilot_gpus == 32
    assert plan.pilot_nameplate_kw == pytest.approx(32)
    assert plan.pilot_provisioned_kw == pytest.approx(25.6)
    assert plan.budget_per_gpu_w == pytest.approx(800)
    assert plan.extra_gpus_same_feed == 8  # 32 / 0.8 = 40
    assert plan.needed_fraction == pytest.approx(0.525)
    assert "fits the target" in plan.desk_verdict
    assert plan.cost_items == {"metering": 4 * 1500, "engineering": 6 * 4000}
    assert plan.cost_usd == 30_000
    assert "needs more" in pilot_plan(inputs(peak_fraction=0.9)).desk_verdict


def test_markdown_has_every_part_and_the_budget() -> None:
    text = pilot_markdown(pilot_plan(inputs()))
    for heading in ("Scope", "Duration", "Metering", "Go / no-go", "Rollback", "Cost estimate"):
        assert f"## {heading}" in text
    assert "--budget 800W --windows 0.5s,30s,5m" in text
    assert "$30,000" in text and "placeholder" in text


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"target": 1.5}, r"^target 1.5"),
        ({"site_mw": 0.0}, r"^site_mw 0: a site's feed in MW, above 0"),
        ({"site_mw": 1e300}, r"^site_mw 1e\+300: a site's feed in MW, above 0 and at most"),
        ({"racks": 0}, r"^racks must be positive"),
        ({"racks": 10_000}, "exceed"),
    ],
)
def test_bad_plans(kw: dict[str, object], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        pilot_plan(inputs(**kw))


def test_cli_writes_the_plan_and_keeps_an_existing_file(cli: Cli, tmp_path: Path) -> None:
    fleet = write(tmp_path, "fleet.json", FLEET)
    out = tmp_path / "pilot.md"
    args = ("pilot", "--oversub", fleet, "--site-mw", "20", "--gpu-tdp", "700W", "--out", out)
    doc = cli.json(*args, "--pue", "1.25", "--engineer-weeks", "2")
    assert doc["pilot_gpus"] == 256 and doc["site_gpus_at_nameplate"] == 22_857
    assert doc["inputs"]["pue"]["source"] == "given (command line)"
    assert doc["cost_items"]["engineering"] == 8000
    assert out.read_text().startswith("# Power oversubscription pilot")
    before = out.read_text()
    r = cli(*args)
    assert r.exit_code == 2 and "exists" in r.stderr and out.read_text() == before
    r = cli("pilot", "--oversub", fleet, "--site-mw", "20")
    assert r.exit_code == 0 and "## Go / no-go" in r.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--window", "5m"], "not in the oversub result"),
        (["--target", "abc"], "--target"),
        (["--meter-per-rack", "-5"], "must not be negative"),
        (["--site-mw", "-1"], "--site-mw"),
    ],
)
def test_cli_bad_inputs(cli: Cli, tmp_path: Path, extra: list[str], message: str) -> None:
    fleet = write(tmp_path, "fleet.json", FLEET)
    r = cli("pilot", "--oversub", fleet, "--site-mw", "20", *extra)
    assert r.exit_code == 2 and message in r.stderr


def test_cli_missing_oversub_file(cli: Cli, tmp_path: Path) -> None:
    r = cli("pilot", "--oversub", tmp_path / "none.json", "--site-mw", "20")
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_every_command_the_plan_tells_is_parsed() -> None:
    """Each `powerkit ...` the plan tells the operator to run parses, and its positional
    arguments are the plan's own file names (a value split in two would be one more)."""
    from powerkit.core.units import parse_power
    from tests.cli.told import parse_told, told_commands

    commands = told_commands(pilot_markdown(pilot_plan(inputs())))
    assert len(commands) >= 5
    files = {"rackN.parquet", "rack*.parquet", "capstep.parquet"}
    for line in commands:
        params = parse_told(line, {"L": "1s"})
        assert set(params["positional"]) <= files, line
        for name in ("limit", "budget"):
            if params.get(name):
                parse_power(params[name])
