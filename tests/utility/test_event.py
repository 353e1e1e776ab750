"""``utility event``: a curtailment judged against figures worked out by hand.

The fleet: two GPUs logged every second for two hours from T0, 400 W each (800 W). The event
starts at T0+1h and lasts 30 min, committed 25 % (200 W of the 800 W baseline, target 600 W):
the fleet stays at 800 W for 20 s, then draws 280 W a GPU (560 W: 240 W less); after the end
it draws 450 W a GPU (900 W) for 60 s, then 800 W again.

- response: the first cell at or below 600 W is the one of 20 s, and the minute from it
  averages 560 W: reached and held in 20 s, within 30 s;
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
    assert doc["response_s"] == pytest.approx(20)
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


def _site(path: Path, watts: list[tuple[int, float]], hours: float = 2) -> Path:
    """One GPU a second for ``hours`` from T0, at the (from s, W) steps given (a member
    counted 250 times is a 250-GPU site: 4,000 W a GPU is 1,000 kW)."""
    lines = ["ts,gpu,power_w"]
    for t in range(int(hours * 3600)):
        w = [x for a, x in watts if a <= t][-1]
        lines.append(f"{T0 + t},0,{w}")
    path.write_text("\n".join(lines) + "\n")
    return path


CUT = ("--at", str(T0 + 3600), "--duration", "10m", "--commit", "30%")


def test_a_thousand_kw_cut_to_seven_hundred(cli: Cli, tmp_path: Path) -> None:
    """1,000 kW cut to 700 kW 20 s into a 10-minute event committed at 30 %: a 30 %
    reduction reached in 20 s; every 1-minute interval met but the first ((20 x 1,000 +
    40 x 700) / 60 = 800 kW: 20 %), which starts within the 30 s allowed: passed."""
    site = _site(tmp_path / "site.csv", [(0, 4000.0), (3620, 2800.0), (4200, 4000.0)])
    doc = cli.json("utility", "event", f"{site}:250", *CUT, "--respond-within", "30s")
    assert doc["baseline_w"] == pytest.approx(1e6) and doc["response_s"] == pytest.approx(20)
    shares = [i["reduction_share"] for i in doc["intervals"]]
    assert shares == [pytest.approx(0.2)] + [pytest.approx(0.3)] * 9
    assert [i["met"] for i in doc["intervals"]] == [False] + [True] * 9
    assert doc["passed"] is True
    assert doc["shortfall_j"] == pytest.approx(300e3 * 20)  # the 20 s before the cut


def test_a_dip_that_recovers_half_way(cli: Cli, tmp_path: Path) -> None:
    """The same cut, back to 1,000 kW at 5 minutes: the intervals from then on are not met,
    the held criterion fails, and the shortfall is the 300 kW committed for the 20 s before
    the cut and the 300 s after the recovery: 96,000 kJ."""
    site = _site(tmp_path / "site.csv", [(0, 4000.0), (3620, 2800.0), (3900, 4000.0)])
    doc = cli.json("utility", "event", f"{site}:250", *CUT)
    assert [i["met"] for i in doc["intervals"]] == [False] + [True] * 4 + [False] * 5
    held = next(c for c in doc["criteria"] if c["name"] == "held")
    assert held["passed"] is False and doc["passed"] is False
    assert doc["shortfall_j"] == pytest.approx(300e3 * (20 + 300))
    assert doc["performance_factor"] == pytest.approx((280 * 300e3 / 600) / 300e3)


def test_high_4_of_5_on_twelve_days(cli: Cli, tmp_path: Path) -> None:
    """Twelve days at one sample a minute, day d at 100 + 10 d W (the event on day 11, 12:00
    for an hour, at 50 W). days:10 averages the ten days before: 100 + 10 x 5.5 = 155 W;
    high:4of5 takes the five most recent (days 6-10: 160-200 W) and keeps the four highest
    (170-200 W): 185 W."""
    start = 1_767_225_600
    lines = ["ts,gpu,power_w"]
    for k in range(12 * 1440):
        day, minute = divmod(k, 1440)
        w = 50 if day == 11 and 720 <= minute < 780 else 100 + 10 * day
        lines.append(f"{start + 60 * k},0,{w}")
    fleet = tmp_path / "twelve.csv"
    fleet.write_text("\n".join(lines) + "\n")
    event = ("--at", "2026-01-12T12:00:00Z", "--duration", "1h", "--commit", "10%", "--grid", "1m")
    ten = cli.json("utility", "event", fleet, *event, "--baseline", "days:10")
    assert ten["baseline_w"] == pytest.approx(155)
    high = cli.json("utility", "event", fleet, *event, "--baseline", "high:4of5")
    assert high["baseline_w"] == pytest.approx(185)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--commit", "100%"), "a reduction is less than 100 % of the baseline"),
        (("--baseline", "median:3"), "--baseline 'median:3'"),
    ],
)
def test_more_bad_events(cli: Cli, tmp_path: Path, args: tuple[str, str], said: str) -> None:
    fleet = _fleet(tmp_path / "fleet.csv")
    given = dict(zip(EVENT[::2], EVENT[1::2], strict=True)) | {args[0]: args[1]}
    r = cli("utility", "event", fleet, *[x for kv in given.items() for x in kv])
    assert r.exit_code == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_baseline_csv_out_of_order(cli: Cli, tmp_path: Path) -> None:
    fleet = _fleet(tmp_path / "fleet.csv")
    program = tmp_path / "baseline.csv"
    program.write_text(f"time,kW\n{T0 + 3000},1.0\n{T0 + 2000},1.0\n")
    r = cli("utility", "event", fleet, *EVENT, "--baseline", f"csv:{program}")
    assert r.exit_code == 2 and "line 3" in r.stderr and "run forward in time" in r.stderr
