"""``utility event``: a curtailment judged against figures worked out by hand.

The fleet: two GPUs logged every second for two hours from T0, 400 W each (800 W). The event
starts at T0+1h and lasts 30 min, committed 25 % (200 W of the 800 W baseline, target 600 W):
the fleet stays at 800 W for 20 s, then draws 280 W a GPU (560 W: 240 W less); after the end
it draws 450 W a GPU (900 W) for 60 s, then 800 W again.

- response: the trailing 10 s mean first reaches 600 W at the cell of 28 s (19 s at 800 W,
  nine at 560: (800 + 9 x 560) / 10 = 584) and holds: 28 s, within 30 s;
- intervals (1 min): the first (20 x 800 + 40 x 560) / 60 = 640 W, a 160 W reduction, not
  met; the 29 others 560 W, met: met share 29/30; every interval after the response window
  met: passed;
- shortfall: 200 W x 20 s = 4,000 J; performance factor min(1, 237.3 / 200) = 1;
- rebound: 900 − 800 = 100 W.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli

T0 = 1_767_600_000


def _fleet(path: Path, gap: tuple[int, int] | None = None) -> Path:
    lines = ["ts,gpu,power_w"]
    for t in range(7200):
        if gap and gap[0] <= t < gap[1]:
            continue
        e = t - 3600
        w = 400.0 if e < 20 or e >= 1860 else (280.0 if e < 1800 else 450.0)
        lines += [f"{T0 + t},{g},{w}" for g in (0, 1)]
    path.write_text("\n".join(lines) + "\n")
    return path


EVENT = ("--at", str(T0 + 3600), "--duration", "30m", "--commit", "25%")


def test_an_event_against_the_hand_figures(cli: Cli, tmp_path: Path) -> None:
    fleet = _fleet(tmp_path / "fleet.csv")
    doc = cli.json("utility", "event", fleet, *EVENT)
    assert doc["kind"] == "powerkit utility event"
    assert doc["baseline_w"] == pytest.approx(800) and doc["committed_w"] == pytest.approx(200)
    assert doc["response_s"] == pytest.approx(28)
    first, second = doc["intervals"][:2]
    assert first["mean_w"] == pytest.approx(640) and first["met"] is False
    assert second["reduction_w"] == pytest.approx(240) and second["met"] is True
    assert second["reduction_share"] == pytest.approx(0.3)
    assert len(doc["intervals"]) == 30 and doc["met_share"] == pytest.approx(29 / 30)
    assert doc["shortfall_j"] == pytest.approx(4000)
    assert doc["performance_factor"] == pytest.approx(1.0)
    assert doc["rebound_w"] == pytest.approx(100)
    assert doc["passed"] is True and doc["coverage"] == 1.0
    (given,) = doc["inputs"]
    import hashlib

    assert given["sha256"] == hashlib.sha256(fleet.read_bytes()).hexdigest()
    assert given["samples"] == 14_400 and given["coverage"] == pytest.approx(1.0)


def test_a_slow_response_and_a_gap_fail(cli: Cli, tmp_path: Path) -> None:
    fleet = _fleet(tmp_path / "fleet.csv")
    late = cli.json("utility", "event", fleet, *EVENT, "--respond-within", "10s")
    assert late["passed"] is False
    assert [c["passed"] for c in late["criteria"]] == [False, True, True]
    holed = _fleet(tmp_path / "holed.csv", gap=(3700, 4300))  # 10 minutes of the event gone
    doc = cli.json("utility", "event", holed, *EVENT)
    assert doc["coverage"] == pytest.approx(1 - 600 / 1800)
    assert doc["passed"] is False
    assert sum(i["met"] is None for i in doc["intervals"]) >= 9  # (not judged, not filled)


def test_baselines_of_earlier_days_and_of_the_program(cli: Cli, tmp_path: Path) -> None:
    fleet = _fleet(tmp_path / "fleet.csv")
    r = cli("utility", "event", fleet, *EVENT, "--baseline", "days:3")
    assert r.exit_code == 2 and "needs 3 earlier day(s)" in r.stderr and "hold 0" in r.stderr
    program = tmp_path / "baseline.csv"
    program.write_text(f"time,kW\n{T0 + 3000},1.0\n")
    doc = cli.json("utility", "event", fleet, *EVENT, "--baseline", f"csv:{program}")
    assert doc["baseline_w"] == pytest.approx(1000) and doc["committed_w"] == pytest.approx(250)
    assert doc["intervals"][1]["reduction_w"] == pytest.approx(440)
    r = cli("utility", "event", fleet, *EVENT, "--baseline", "before:3h")
    assert r.exit_code == 2 and "hold 33% of the 3h before the event" in r.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--baseline", "yesterday"), "--baseline 'yesterday'"),
        (("--interval", "45m"), "--interval 45m"),
        (("--interval", "1.5s", "--grid", "1s"), "a whole number of 1s cells"),
        (("--at", str(T0 + 7000)), "is not within the traces"),
        (("--commit", "0W"), "'0W': power must be more than zero"),
    ],
)
def test_bad_events_are_one_line(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    fleet = _fleet(tmp_path / "fleet.csv")
    given = dict(zip(EVENT[::2], EVENT[1::2], strict=True)) | dict(
        zip(args[::2], args[1::2], strict=True)
    )
    r = cli("utility", "event", fleet, *[x for kv in given.items() for x in kv])
    assert r.exit_code == 2, r.stderr
    assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_certificate_page_and_report(cli: Cli, tmp_path: Path) -> None:
    fleet = _fleet(tmp_path / "fleet.csv")
    page = tmp_path / "event.html"
    r = cli("utility", "event", fleet, *EVENT, "--html", page, "--json")
    assert r.exit_code == 0, r.stderr
    doc = tmp_path / "event.json"
    doc.write_text(r.stdout)
    assert "Curtailment event at" in page.read_text() and ": passed" in page.read_text()
    out = tmp_path / "report.html"
    assert cli("report", "--event", doc, "--out", out).exit_code == 0
    assert json.loads(doc.read_text())["inputs"][0]["path"] == str(fleet)
    assert "SHA-256" in out.read_text()


def test_baselines_of_the_same_hours_on_earlier_days(cli: Cli, tmp_path: Path) -> None:
    """Three days at one sample a minute: 500 W the first day, 700 W the second, 800 W the
    third but 400 W during its event (12:00, 1 h). days:2 = (500 + 700) / 2 = 600 W (a 200 W
    reduction); high:1of2, the highest of the two = 700 W (300 W); days:3 has too few."""
    start = 1_767_225_600  # 2026-01-01T00:00:00Z
    lines = ["ts,gpu,power_w"]
    for k in range(3 * 1440):
        t = start + 60 * k
        day, minute = divmod(k, 1440)
        watts = (500, 700, 800)[day]
        if day == 2 and 720 <= minute < 780:
            watts = 400
        lines.append(f"{t},0,{watts}")
    fleet = tmp_path / "days.csv"
    fleet.write_text("\n".join(lines) + "\n")
    event = ("--at", "2026-01-03T12:00:00Z", "--duration", "1h", "--commit", "25%")
    common = ("--grid", "1m", "--interval", "5m", "--respond-within", "5m")
    doc = cli.json("utility", "event", fleet, *event, *common, "--baseline", "days:2")
    assert doc["baseline_w"] == pytest.approx(600)
    assert [i["reduction_w"] for i in doc["intervals"]] == [pytest.approx(200)] * 12
    high = cli.json("utility", "event", fleet, *event, *common, "--baseline", "high:1of2")
    assert high["baseline_w"] == pytest.approx(700)
    r = cli("utility", "event", fleet, *event, *common, "--baseline", "days:3")
    assert r.exit_code == 2 and "needs 3 earlier day(s)" in r.stderr and "hold 2" in r.stderr
