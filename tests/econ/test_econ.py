"""powerkit econ: arithmetic by hand, TOML config and option precedence, bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from powerkit.econ.assumptions import DEFAULTS
from powerkit.econ.economics import EconInputs, economics
from tests.conftest import Cli
from tests.documents import arm, eval_doc, fleet_doc

FLEET = fleet_doc([("500ms", 0.5, 0.8), ("30s", 30.0, 0.5)], margin=0.05, mean_fraction=0.5)
EVAL = eval_doc([arm("ppo", 0.02, 9.1e9, vs_uncontrolled=0.25, vs_static_safe=0.1)])


def test_arithmetic_by_hand() -> None:
    a = dict(DEFAULTS)
    from dataclasses import replace

    a["pue"] = replace(a["pue"], value=1.25)
    a["price"] = replace(a["price"], value=0.1)
    a["capex_per_kw"] = replace(a["capex_per_kw"], value=10_000.0)
    a["amortize"] = replace(a["amortize"], value=10.0)
    r = economics(
        EconInputs(
            gpus=1000,
            gpu_tdp_w=700,
            peak_fraction=0.5,
            margin=0.1,
            window="30s",
            mean_fraction=0.4,
            assumptions=a,
            tokens_per_mwh_change=0.25,
        )
    )
    assert r.it_kw_nameplate == pytest.approx(700.0)
    assert r.provisioned_kw_nameplate == pytest.approx(875.0)  # IT x PUE
    assert r.it_kw_oversub == pytest.approx(700 * 0.55)
    assert r.provisioned_kw_oversub == pytest.approx(700 * 0.55 * 1.25)
    assert r.gpus_deployable_same_feed == 1818  # floor(1000 / 0.55)
    assert r.avoided_capex_usd == pytest.approx(700 * 0.45 * 10_000)
    assert r.avoided_capex_usd_per_year == pytest.approx(700 * 0.45 * 1_000)
    energy = 700 * 0.4 * 1.25 * 8760 / 1000  # MWh per year
    assert r.annual_energy_mwh == pytest.approx(energy)
    assert r.annual_energy_cost_usd == pytest.approx(energy * 1000 * 0.1)
    assert r.control is not None
    assert r.control["energy_saved_mwh_per_year"] == pytest.approx(energy * (1 - 1 / 1.25))
    assert set(r.assumptions["pue"]) == {"value", "unit", "source"}


def write(tmp_path: Path, name: str, doc: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def test_cli_json_and_defaults_with_sources(cli: Cli, tmp_path: Path) -> None:
    fleet = write(tmp_path, "fleet.json", FLEET)
    out = cli.json("econ", "--oversub", fleet, "--gpus", "4096", "--gpu-tdp", "700W")
    for key in (
        "window",
        "peak_fraction",
        "margin",
        "gpus",
        "gpu_tdp_w",
        "pue",
        "provisioned_kw_nameplate",
        "provisioned_kw_oversub",
        "gpus_deployable_same_feed",
        "avoided_capex_usd",
        "avoided_capex_usd_per_year",
        "annual_energy_mwh",
        "annual_energy_cost_usd",
        "assumptions",
    ):
        assert key in out
    assert out["window"] == "30s" and out["peak_fraction"] == 0.5 and out["margin"] == 0.05
    assert out["pue"] == DEFAULTS["pue"].value
    assert "Uptime Institute" in out["assumptions"]["pue"]["source"]
    assert "EIA" in out["assumptions"]["price"]["source"]


def test_config_file_and_precedence(cli: Cli, tmp_path: Path) -> None:
    fleet = write(tmp_path, "fleet.json", FLEET)
    ctl = write(tmp_path, "eval.json", EVAL)
    site = write(
        tmp_path,
        "site.toml",
        f'[econ]\noversub = "{fleet}"\ncontrol = "{ctl}"\n'
        'gpus = 2000\ngpu-tdp = "700W"\npue = 1.3\nprice = "0.05/kWh"\nwindow = "0.5s"\n',
    )
    from_file = cli.json("econ", "--config", site)
    assert from_file["gpus"] == 2000 and from_file["pue"] == 1.3
    assert from_file["window"] == "500ms" and from_file["peak_fraction"] == 0.8
    assert from_file["assumptions"]["price"]["value"] == 0.05
    assert "site.toml" in from_file["assumptions"]["price"]["source"]
    assert from_file["control"]["tokens_per_mwh_change"] == 0.25
    overridden = cli.json("econ", "--config", site, "--pue", "1.1", "--gpus", "100")
    assert overridden["pue"] == 1.1 and overridden["gpus"] == 100  # the command line wins
    assert overridden["assumptions"]["pue"]["source"] == "given (command line)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--price", "-0.1/kWh"], "must not be negative"),
        (["--window", "5m"], "not in the oversub result"),
        (["--pue", "0.9"], "below 1"),
        (["--amortize", "fifteen"], "give years"),
    ],
)
def test_bad_inputs(cli: Cli, tmp_path: Path, args: list[str], message: str) -> None:
    fleet = write(tmp_path, "fleet.json", FLEET)
    r = cli("econ", "--oversub", fleet, "--gpus", "10", "--gpu-tdp", "700W", *args)
    assert r.exit_code == 2 and message in r.stderr


def test_bad_documents(cli: Cli, tmp_path: Path) -> None:
    junk = write(tmp_path, "junk.json", "not json")
    r = cli("econ", "--oversub", junk, "--gpus", "10", "--gpu-tdp", "700W")
    assert r.exit_code == 2 and "not JSON" in r.stderr
    bad_toml = write(tmp_path, "site.toml", "gpus = = 3")
    r = cli("econ", "--config", bad_toml)
    assert r.exit_code == 2 and "not TOML" in r.stderr
    unknown = write(tmp_path, "site2.toml", "gpu_count = 3")
    r = cli("econ", "--config", unknown)
    assert r.exit_code == 2 and "unknown key" in r.stderr
