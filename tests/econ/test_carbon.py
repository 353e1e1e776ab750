"""powerkit carbon: emissions by hand, hourly alignment (mid-hour start, day boundary), errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from powerkit.core.errors import BadInputError
from powerkit.econ.carbon import carbon_from_doc, parse_intensity, regional_intensity
from tests.conftest import Cli


def constant_trace(path: Path, start: str, minutes: int, watts: float = 360.0) -> Path:
    """A canonical CSV of one GPU at constant power, a sample every 0.5 s."""
    t0 = datetime.fromisoformat(start).replace(tzinfo=UTC)
    rows = ["ts,power_w"]
    for k in range(minutes * 120 + 1):
        rows.append(f"{(t0 + timedelta(seconds=k / 2)).isoformat()},{watts}")
    path.write_text("\n".join(rows) + "\n")
    return path


def intensity_csv(path: Path, rows: dict[str, float]) -> Path:
    path.write_text("timestamp,g_per_kwh\n" + "".join(f"{t},{v}\n" for t, v in rows.items()))
    return path


def test_intensity_units() -> None:
    assert parse_intensity("250g/kWh") == 250
    assert parse_intensity("0.25 kg/kWh") == 250
    assert parse_intensity("250kg/MWh") == 250
    assert parse_intensity("1000lb/MWh") == pytest.approx(453.59237)
    for bad in ("250", "250W", "abc g/kWh", "-5g/kWh"):
        with pytest.raises(BadInputError, match=r"^intensity "):
            parse_intensity(bad)


def test_constant_intensity_by_hand(cli: Cli, tmp_path: Path) -> None:
    trace = constant_trace(tmp_path / "t.csv", "2026-03-01T10:15:00", 90)
    out = cli.json("carbon", "--trace", trace, "--intensity", "250g/kWh")
    assert out["energy_kwh"] == pytest.approx(360 * 5400 / 3.6e6)  # 0.54 kWh
    assert out["emissions_kg"] == pytest.approx(0.54 * 0.25)
    assert out["hours"] == 2 and out["first_hour"] == "2026-03-01T10:00:00+00:00"


def test_pue_counts_the_facility_and_is_said(cli: Cli, tmp_path: Path) -> None:
    """Without --pue the GPUs' energy alone, said; with it, the facility's (energy x PUE),
    hourly too; a PUE below 1, or with an econ scenario (which has its own), is refused."""
    trace = constant_trace(tmp_path / "t.csv", "2026-03-01T23:30:00", 60)
    plain = cli.json("carbon", "--trace", trace, "--intensity", "250g/kWh", "--tz", "UTC")
    rows = dict(carbon_from_doc(plain, "test").rows())
    assert "GPU energy alone (PUE 1: give --pue" in rows["energy"]
    assert rows["energy"].startswith("360 Wh within 2 clock hours")
    assert rows["emissions"] == "90 g CO2e"
    out = cli.json("carbon", "--trace", trace, "--intensity", "250g/kWh", "--pue", "1.25")
    assert out["pue"] == 1.25 and out["energy_kwh"] == pytest.approx(0.36)
    assert out["emissions_kg"] == pytest.approx(0.36 * 1.25 * 0.25)
    hourly = intensity_csv(
        tmp_path / "i.csv", {"2026-03-01T23:00:00Z": 100, "2026-03-02T00:00:00Z": 300}
    )
    out = cli.json("carbon", "--trace", trace, "--intensity-csv", hourly, "--pue", "1.5")
    assert out["emissions_kg"] == pytest.approx(1.5 * (0.18 * 100 + 0.18 * 300) / 1000)
    assert out["intensity_g_per_kwh"] == pytest.approx(200)
    for argv in (
        ("--trace", trace, "--intensity", "250g/kWh", "--pue", "0.9"),
        ("--econ", trace, "--intensity", "250g/kWh", "--pue", "1.2"),
    ):
        result = cli("carbon", *argv)
        assert result.exit_code == 2 and "--pue" in result.stderr, result.stderr


def test_hourly_alignment_across_midnight_from_mid_hour(cli: Cli, tmp_path: Path) -> None:
    trace = constant_trace(tmp_path / "t.csv", "2026-03-01T23:30:00", 60)
    hourly = intensity_csv(
        tmp_path / "i.csv",
        {"2026-03-01T23:00:00Z": 100, "2026-03-02T00:00:00Z": 300, "2026-03-02T01:00:00Z": 500},
    )
    out = cli.json("carbon", "--trace", trace, "--intensity-csv", hourly)
    # 0.18 kWh in each half hour: 23:30-24:00 at 100 g, 00:00-00:30 at 300 g
    assert out["energy_kwh"] == pytest.approx(0.36)
    assert out["emissions_kg"] == pytest.approx((0.18 * 100 + 0.18 * 300) / 1000)
    assert out["intensity_g_per_kwh"] == pytest.approx(200)
    assert out["average_intensity_g_per_kwh"] == pytest.approx(300)
    assert out["emissions_at_average_kg"] == pytest.approx(0.36 * 300 / 1000)
    assert out["difference_kg"] == pytest.approx(-0.036)
    assert out["difference_share"] == pytest.approx(-1 / 3)


def test_hourly_times_in_another_zone_align(cli: Cli, tmp_path: Path) -> None:
    trace = constant_trace(tmp_path / "t.csv", "2026-03-01T23:30:00", 60)
    hourly = intensity_csv(
        tmp_path / "i.csv", {"2026-03-01T18:00:00-05:00": 100, "2026-03-01T19:00:00-05:00": 300}
    )
    out = cli.json("carbon", "--trace", trace, "--intensity-csv", hourly)
    assert out["emissions_kg"] == pytest.approx(0.072)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ({"2026-03-01T23:00:00Z": 100}, "no value for 1 hour(s) of the trace, first 2026-03-02"),
        ({"2026-03-01T23:30:00Z": 100}, "whole hour"),
        ({"2026-03-01T23:00:00Z": -1}, "non-negative"),
        ({"yesterday": 1}, "unreadable row"),
    ],
)
def test_bad_intensity_csv(cli: Cli, tmp_path: Path, rows: dict[str, float], message: str) -> None:
    trace = constant_trace(tmp_path / "t.csv", "2026-03-01T23:30:00", 60)
    r = cli("carbon", "--trace", trace, "--intensity-csv", intensity_csv(tmp_path / "i.csv", rows))
    assert r.exit_code == 2 and message in r.stderr


def test_needs_exactly_one_intensity(cli: Cli, tmp_path: Path) -> None:
    trace = constant_trace(tmp_path / "t.csv", "2026-03-01T10:00:00", 5)
    r = cli("carbon", "--trace", trace)
    assert r.exit_code == 2 and "give one of --region" in r.stderr
    r = cli("carbon", "--trace", trace, "--intensity", "1g/kWh", "--intensity-csv", trace)
    assert r.exit_code == 2 and "give one of --region" in r.stderr
    r = cli("carbon", "--trace", trace, "--intensity-csv", tmp_path / "none.csv")
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_regional_table_rows_have_a_year_and_a_source(cli: Cli, tmp_path: Path) -> None:
    germany = regional_intensity("Germany")
    assert (germany.g_per_kwh, germany.year) == (381, 2023) and "Ember" in germany.source
    assert regional_intensity("costa rica").g_per_kwh == 53
    trace = constant_trace(tmp_path / "t.csv", "2026-03-01T10:00:00", 60)
    out = cli.json("carbon", "--trace", trace, "--region", "france")
    assert out["emissions_kg"] == pytest.approx(0.36 * 56 / 1000)
    assert out["source"].startswith("France 2023: ")
    r = cli("carbon", "--trace", trace, "--region", "atlantis")
    assert r.exit_code == 2 and "unknown region 'atlantis'" in r.stderr
    assert "--list-regions" in r.stderr


@pytest.mark.parametrize(
    ("region", "name", "source"),
    [
        ("US", "United States", "CodeCarbon"),
        ("usa", "United States", "CodeCarbon"),
        ("united-states", "United States", "CodeCarbon"),
        ("GB", "United Kingdom", "CodeCarbon"),
        ("UK", "United Kingdom", "CodeCarbon"),
        ("japan", "Japan", "CodeCarbon"),
        ("DEU", "Germany", "Ember"),
        ("Costa Rica", "Costa Rica", "Ember"),
        ("us-caiso", "WECC California (eGRID CAMX)", "eGRID2022"),
        ("CAMX", "WECC California (eGRID CAMX)", "eGRID2022"),
        ("us-ercot", "ERCOT All (eGRID ERCT)", "eGRID2022"),
        ("ERCT", "ERCOT All (eGRID ERCT)", "eGRID2022"),
        ("ISO-NE", "NPCC New England (eGRID NEWE)", "eGRID2022"),
    ],
)
def test_regions_by_name_code_or_alias(region: str, name: str, source: str) -> None:
    found = regional_intensity(region)
    assert found.name == name and source in found.source and 2000 < found.year < 2030


def test_list_regions_covers_every_country_with_a_source(cli: Cli) -> None:
    doc = cli.json("carbon", "--list-regions")
    regions = doc["regions"]
    assert regions[0]["region"] == "world"
    assert all(r["source"] and r["year"] and r["g_per_kwh"] >= 0 for r in regions)
    countries = [r for r in regions[1:] if r["iso3"]]
    assert len(countries) > 200 and len({r["iso3"] for r in countries}) == len(countries)
    # every eGRID2022 subregion (26 and Puerto Rico) and the US total
    egrid = [r for r in regions if "eGRID2022" in r["source"]]
    assert len(egrid) == 28 and all(r["year"] == 2022 for r in egrid)
    # each row answers to its own key, name and codes, never to another row's
    for r in regions:
        for name in (r["region"], r["name"], r["iso2"], r["iso3"], *r["aliases"]):
            if name:
                assert regional_intensity(name).region == r["region"], name


def test_egrid_subregion_is_converted_from_lb_per_mwh() -> None:
    # eGRID2022 CAMX: 497.443 lb CO2/MWh; ERCT 771.083 lb/MWh
    assert regional_intensity("CAMX").g_per_kwh == pytest.approx(497.443 * 0.45359237, abs=0.05)
    assert regional_intensity("ERCT").g_per_kwh == pytest.approx(771.083 * 0.45359237, abs=0.05)
    assert "CO2 only" in regional_intensity("us-camx").source


def test_a_market_over_several_subregions_names_them(cli: Cli, tmp_path: Path) -> None:
    trace = constant_trace(tmp_path / "t.csv", "2026-03-01T10:00:00", 5)
    r = cli("carbon", "--trace", trace, "--region", "PJM")
    assert r.exit_code == 2 and "RFCE, RFCW" in r.stderr and "--region RFCE" in r.stderr


def test_econ_scenario_per_year(cli: Cli, tmp_path: Path) -> None:
    econ = tmp_path / "econ.json"
    from tests.documents import econ_doc

    econ.write_text(json.dumps(econ_doc(1000.0, {"energy_saved_mwh_per_year": 100.0})))
    out = cli.json("carbon", "--econ", econ, "--intensity", "500g/kWh")
    assert out["emissions_t_per_year"] == pytest.approx(500)  # 1000 MWh x 0.5 t/MWh
    assert out["control_saved_t_per_year"] == pytest.approx(50)
    r = cli("carbon", "--econ", econ, "--intensity-csv", econ)
    assert r.exit_code == 2 and "give --region or --intensity" in r.stderr
    r = cli("carbon", "--econ", econ, "--trace", econ, "--intensity", "1g/kWh")
    assert r.exit_code == 2 and "give one of --trace or --econ" in r.stderr
    econ.write_text(json.dumps({"gpus": 1}))
    r = cli("carbon", "--econ", econ, "--intensity", "1g/kWh")
    assert r.exit_code == 2 and "not an `econ --json` document" in r.stderr
