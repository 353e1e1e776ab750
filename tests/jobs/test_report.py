"""``report --jobs`` and the timeline it plots: the attributed energy per account and hour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
ARGS = (
    SAMPLE / "h200-70b-tp8.parquet",
    "--sacct",
    SAMPLE / "sacct.txt",
    "--scontrol",
    SAMPLE / "scontrol.txt",
    "--tz",
    "UTC",
)


def test_the_timeline_holds_the_attributed_energy_by_account(cli: Cli, tmp_path: Path) -> None:
    doc = cli.json("jobs", *ARGS)
    t = doc["timeline"]
    assert t["by"] == "account" and t["hour_starts"] == ["2026-01-01T00:00:00Z"]
    per_account: dict[str, float] = {}
    for j in doc["jobs"]:
        per_account[j["account"]] = per_account.get(j["account"], 0.0) + j["energy_j"]
    assert {g["key"]: sum(g["energy_j"]) for g in t["groups"]} == pytest.approx(per_account)
    by_user = cli.json("jobs", *ARGS, "--by", "user")["timeline"]
    assert {g["key"] for g in by_user["groups"]} == {"alice", "bob", "carol"}


def test_a_timeline_across_clock_hours(cli: Cli, tmp_path: Path, fleet: Path) -> None:
    """The test fleet (T0 = 08:00 UTC, 10 minutes) with a job from 08:00 to 08:10: one hour;
    its GPU 0 of n2 at 200 W: 120,000 J in the hour of 08:00."""
    alloc = tmp_path / "alloc.csv"
    alloc.write_text("job,host,gpus,start,end,account\nA,n2,0,1767600000,1767600600,acme\n")
    t = cli.json("jobs", fleet, "--allocations", alloc)["timeline"]
    assert t["hour_starts"] == ["2026-01-05T08:00:00Z"]
    assert t["groups"] == [{"key": "acme", "energy_j": [pytest.approx(120_000)]}]


def test_report_jobs_section(cli: Cli, tmp_path: Path) -> None:
    doc = tmp_path / "jobs.json"
    r = cli("jobs", *ARGS, "--json")
    assert r.exit_code == 0, r.stderr
    doc.write_text(r.stdout)
    page = tmp_path / "report.html"
    r = cli("report", "--jobs", doc, "--out", page)
    assert r.exit_code == 0, r.stderr
    html = page.read_text()
    assert "Jobs (3, from sacct)" in html
    assert "The jobs&#x27; energy per UTC clock hour, stacked by account." in html or (
        "energy per UTC clock hour" in html
    )
    assert "jobs that used the most energy, coloured by account" in html
    assert json.loads(doc.read_text())["kind"] == "powerkit jobs"
    wrong = tmp_path / "wrong.json"
    wrong.write_text(cli("info", SAMPLE / "a100-7b.parquet", "--json").stdout)
    r = cli("report", "--jobs", wrong, "--out", tmp_path / "x.html")
    assert r.exit_code == 2 and "powerkit info" in r.stderr
