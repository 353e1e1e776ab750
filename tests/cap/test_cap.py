"""powerkit cap on hand-computable fleets: two jobs with linear cap curves on a square wave.

Job A keeps c / 400 of its throughput under a cap c (1/400 per watt shed); job B keeps
0.5 + 0.5 c / 400 (half that per watt). Each runs on one GPU of 400 W nameplate that draws
200 W for 10 s, then 400 W for 10 s, six times over (120 s on a 0.5 s grid): the fleet's
demand is 400 W, then 800 W. Under a 600 W limit 200 W must be shed in every high half.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from powerkit.analysis.members import FleetMembers
from powerkit.cap.policies import Fleet, pfi, polca, priority, uniform
from powerkit.cap.replay import replay
from powerkit.cap.response import Response, response_of
from powerkit.core.errors import BadInputError
from powerkit.pfi.curves import JobCurve
from powerkit.trace.writing import write_trace
from tests.analysis.test_windows import make_trace
from tests.conftest import Cli

CAPS = np.array([200.0, 300.0, 400.0])
CURVE_A = JobCurve("a", CAPS, 2 * CAPS, 1000 * CAPS / 400)  # rate c / 400
CURVE_B = JobCurve("b", CAPS, 2 * CAPS, 1000 * (0.5 + 0.5 * CAPS / 400))
HIGH_S = 60.0  # seconds of high demand in the 120 s


def wave(origin: str):  # type: ignore[no-untyped-def]
    rows = [(0, 0.5 * i, 400.0 if i % 40 >= 20 else 200.0) for i in range(240)]
    return dataclasses.replace(make_trace(rows), origin=origin)


def wave_files(folder: Path, names: tuple[str, ...] = ("a", "b")) -> list[Path]:
    """The wave as canonical Parquet files, one per job, named for it."""
    out = []
    for name in names:
        t = wave(f"{name}.parquet")
        out.append(write_trace(t.table(), t.meta, folder / f"{name}.parquet"))
    return out


def fleet() -> FleetMembers:
    return FleetMembers([(wave("a.parquet"), 1), (wave("b.parquet"), 1)], 0.5)


def run(policy: str, latency_s: float = 0.0, limit_w: float = 600.0):  # type: ignore[no-untyped-def]
    responses = [response_of(CURVE_A, 400.0), response_of(CURVE_B, 400.0)]
    with fleet() as f:
        return replay(
            f,
            f.offsets("aligned"),
            limit_w,
            policy,
            responses,
            ["a", "b"],
            period_s=0.5,
            latency_s=latency_s,
        )


def test_a_linear_curve_is_its_own_response() -> None:
    r = response_of(CURVE_B, 400.0)
    assert r.floor_w == 200 and r.top_w == 400
    assert float(r.rate(300.0)) == pytest.approx(0.875) and float(r.rate(np.inf)) == 1.0


def test_the_policies_shed_exactly_what_the_limit_needs() -> None:
    responses = [response_of(CURVE_A, 400.0), response_of(CURVE_B, 400.0)]
    demand = np.array([400.0, 400.0])
    fleet = Fleet(responses, np.array([200.0, 200.0]), np.array([0, 1]))
    assert uniform(demand, 600.0, fleet) == pytest.approx([300.0, 300.0])
    # B loses half as much per watt: all 200 W come from it
    assert pfi(demand, 600.0, fleet).tolist() == [np.inf, 200.0]
    assert np.isinf(pfi(demand, 900.0, fleet)).all()
    # polca: above 90 % of a 850 W limit B (class 1) holds the fleet at 765 W; below 85 %
    # (722.5 W) the caps go; above the limit itself every GPU is capped to it
    assert polca(demand, 850.0, fleet).tolist() == [np.inf, pytest.approx(365.0)]
    # under T1 but above RELEASE the cap stays; below RELEASE it goes
    assert polca(np.array([400.0, 350.0]), 850.0, fleet).tolist() == [np.inf, pytest.approx(365.0)]
    assert np.isinf(polca(np.array([300.0, 300.0]), 850.0, fleet)).all()
    # over the limit: B alone can hold the fleet at T1 (630 W of 700) ...
    assert float(np.minimum(demand, polca(demand, 700.0, fleet)).sum()) == pytest.approx(630.0)
    # ... but not at 500 W (T1 450): B at its floor, then everyone to the limit
    fleet.state.clear()
    assert polca(demand, 500.0, fleet).tolist() == pytest.approx([300.0, 200.0])
    # priority with B in class 2 (25 % tolerated): B alone down to where it keeps 75 %
    # (200 W) covers a 600 W limit; at 500 W everyone goes to the limit as the last resort
    ranked = Fleet(responses, np.array([200.0, 200.0]), np.array([0, 2]))
    assert priority(demand, 600.0, ranked).tolist() == [np.inf, pytest.approx(200.0)]
    assert priority(np.array([400.0, 300.0]), 600.0, ranked).tolist() == [
        np.inf,
        pytest.approx(200.0),
    ]
    assert priority(demand, 500.0, ranked).tolist() == pytest.approx([300.0, 200.0])


def test_uniform_and_pfi_lose_what_the_arithmetic_says_and_pfi_less() -> None:
    flat, fair = run("uniform"), run("pfi")
    # uniform: both at 300 W while high: A keeps 0.75, B 0.875
    assert flat.lost_gpu_hours == pytest.approx((0.25 + 0.125) * HIGH_S / 3600)
    # pfi: B at 200 W keeps 0.75, A uncapped
    assert fair.lost_gpu_hours == pytest.approx(0.25 * HIGH_S / 3600)
    assert fair.lost_gpu_hours < flat.lost_gpu_hours
    for r in (flat, fair):
        assert r.over_limit_share == 0 and r.over_limit_energy_j == 0  # latency 0: never over
        assert r.capped_share == pytest.approx(0.5) and r.cap_events == 6
        assert r.longest_event_s == pytest.approx(10.0)
        assert r.energy_j == pytest.approx(r.uncapped_energy_j - 200.0 * HIGH_S)
    jobs = {j.job: j for j in fair.jobs}
    assert jobs["a"].lost_share == 0 and jobs["b"].lost_share == pytest.approx(0.25 * 0.5)


def test_the_timeline_shows_each_cell_of_a_short_run() -> None:
    """240 cells, fewer than a timeline's points: a span a cell. Uniform holds the 800 W halves
    at 600 W, both GPUs capped there, A keeping 0.75 and B 0.875 of their throughput."""
    t = run("uniform").timeline
    assert t is not None and t.span_s == 0.5 and t.capped_w.size == 240
    high = t.uncapped_w > 700
    assert high.sum() == 120 and (t.capped_w[high] == pytest.approx(600.0))
    assert (t.capped_w[~high] == t.uncapped_w[~high]).all() and (t.limit_w == 600).all()
    assert t.capped_gpus[high] == pytest.approx(1.0) and (t.capped_gpus[~high] == 0).all()
    assert t.kept["a"][high] == pytest.approx(0.75) and t.kept["b"][high] == pytest.approx(0.875)
    assert (t.kept["a"][~high] == 1).all()


def test_a_latency_lets_exactly_its_cells_over_the_limit() -> None:
    r = run("uniform", latency_s=1.0)
    # each of the 6 rising edges: 2 cells at 800 W before the caps act, 200 W over each
    assert r.over_limit_share == pytest.approx(12 / 240)
    assert r.over_limit_energy_j == pytest.approx(12 * 200.0 * 0.5)
    assert r.over_limit_peak_w == pytest.approx(200.0)
    # the caps act 2 cells late and are released 2 cells late: 20 cells a cycle under a cap,
    # but the last release would fall after the horizon's end
    assert r.capped_share == pytest.approx((6 * 20 - 2) / 240)


def test_none_sees_what_oversub_sees() -> None:
    r = run("none")
    assert r.capped_share == 0 and r.lost_gpu_hours == 0
    assert r.over_limit_share == pytest.approx(0.5)
    assert r.over_limit_energy_j == pytest.approx(200.0 * HIGH_S)


def test_a_period_or_latency_off_the_grid_is_refused() -> None:
    with pytest.raises(BadInputError, match=r"^latency_s 200ms is not a whole number"):
        run("uniform", latency_s=0.2)
    with pytest.raises(BadInputError, match=r"^policy 'fastest'"):
        run("fastest")


def jobs_table(folder: Path) -> Path:
    """Curves A and B as a jobs table (``pfi compute --curves-out``'s shape)."""
    jobs = folder / "jobs.csv"
    rows = [
        f"{c.job},{cap:g},{p:g},{tok:g}"
        for c in (CURVE_A, CURVE_B)
        for cap, p, tok in zip(c.cap_w, c.power_w, c.tokens_per_s, strict=True)
    ]
    jobs.write_text("job,cap_w,power_w,tokens_per_s\n" + "\n".join(rows) + "\n")
    return jobs


def test_the_command_replays_ratios_and_names_what_it_lacks(cli: Cli, tmp_path: Path) -> None:
    paths = wave_files(tmp_path)
    jobs = jobs_table(tmp_path)
    doc = cli.json(
        "cap",
        *paths,
        "--ratios",
        "1,1.3333333333333333",
        "--policy",
        "uniform,pfi",
        "--jobs",
        jobs,
        "--period",
        "0.5s",
    )
    assert doc["kind"] == "powerkit cap" and len(doc["runs"]) == 4
    loss = {(round(r["ratio"], 2), r["policy"]): r["lost_gpu_hours"] for r in doc["runs"]}
    assert loss[(1.0, "uniform")] == 0
    assert loss[(1.33, "pfi")] == pytest.approx(0.25 * HIGH_S / 3600)
    assert doc["assigned"] == {str(paths[0]): "a", str(paths[1]): "b"}  # by name
    r = cli("cap", paths[0], "--limit", "50%", "--jobs", jobs, "--assign", "a.parquet=zz")
    assert r.exit_code == 2 and "no cap curve for job 'zz'" in r.stderr
    r = cli("cap", paths[0], "--limit", "50%")
    assert r.exit_code == 0 and "no cap curve for" in r.stderr  # capped for power only
    r = cli("cap", paths[0])
    assert r.exit_code == 2 and "give one of --limit" in r.stderr


def _step_log(tmp_path: Path) -> tuple[Path, Path]:
    """300 W; a cap to 200 W at 10 s that the power follows linearly over 100 ms; back up to
    300 W at 20 s over 400 ms; 30 s at 100 Hz."""
    rows = []
    for i in range(3000):
        t = i / 100
        p = 300.0
        if 10 <= t < 20:
            p = 300 - 100 * min(1.0, (t - 10) / 0.1)
        elif t >= 20:
            p = 200 + 100 * min(1.0, (t - 20) / 0.4)
        rows.append(f"{t:.2f},0,{p:.3f}")
    log = tmp_path / "step.csv"
    log.write_text("t_s,gpu,power_w\n" + "\n".join(rows) + "\n")
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "applied": [
                    {"t_actual": 0.0, "pcap_w": 300},
                    {"t_actual": 10.0, "pcap_w": 200, "label": "down"},
                    {"t_actual": 20.0, "pcap_w": 300, "label": "up"},
                ]
            }
        )
    )
    return log, plan


READ = ["--map", "ts=t_s,gpu=gpu,power_w=power_w", "--time-unit", "s", "--start", "2026-01-01"]


def test_cap_latency_is_the_time_to_90_percent_of_the_move(cli: Cli, tmp_path: Path) -> None:
    log, plan = _step_log(tmp_path)
    doc = cli.json("cap", "latency", log, "--steps", plan, *READ)
    down, up = doc["steps"]
    assert (down["before_w"], down["after_w"]) == (300.0, 200.0)
    assert down["settle_s"] == pytest.approx(0.09, abs=1e-6)  # 90 W of 100 in 90 ms
    assert up["settle_s"] == pytest.approx(0.36, abs=1e-6)  # 90 W of 100 in 360 ms
    assert doc["median_s"] == pytest.approx(0.225) and doc["kind"] == "powerkit cap latency"
    plan.write_text('{"applied": [{"t_actual": 0, "pcap_w": 300}]}')
    r = cli("cap", "latency", log, "--steps", plan, *READ)
    assert r.exit_code == 2 and "at least two cap settings" in r.stderr
    r = cli("cap", "latency", log, *READ)
    assert r.exit_code == 2 and "Missing option '--steps'" in r.stderr
    r = cli("cap", "./latency", "--ratios", "1")  # (a trace of that name, as a path)
    assert r.exit_code == 2 and "latency" in r.stderr and "Missing option" not in r.stderr


REALDATA = Path(__file__).resolve().parents[3] / "shared" / "realdata"
STEP = REALDATA / "nvml_1xV100_capstep_280to200W_100hz"


@pytest.mark.skipif(not STEP.with_suffix(".csv").exists(), reason="needs ../shared/realdata")
def test_cap_latency_on_the_v100_cap_step(cli: Cli) -> None:
    """The V100 log stepped 280 -> 200 W at 10 s and back at 20 s (a bursty workload): the
    power falls within tens of ms of the cap, and climbs back in hundreds (the workload's
    own ramp, not the driver's)."""
    doc = cli.json(
        "cap",
        "latency",
        STEP.with_suffix(".csv"),
        "--steps",
        Path(f"{STEP}.step_plan.json"),
        "--map",
        "ts=t_s,gpu=gpu_index,power_w=power_w",
        "--time-unit",
        "s",
        "--start",
        "1777378919.5280404",
    )
    down, up = doc["steps"]
    assert down["before_w"] == pytest.approx(276.3, abs=0.5)
    assert down["after_w"] == pytest.approx(195.7, abs=0.5)
    assert 0.005 < down["settle_s"] < 0.1 < 0.3 < up["settle_s"] < 1.0


def test_an_event_is_met_when_the_shed_power_covers_the_cut() -> None:
    """A 25 % cut for 40 s from +20 s: the window holds two cycles (mean demand 600 W), so the
    target is 450 W; uniform caps the 800 W halves to it (350 W shed for 20 s). A 60 % cut
    (240 W) is under the two GPUs' 200 W floors: not met."""
    from powerkit.cap.events import parse_event

    responses = [response_of(CURVE_A, 400.0), response_of(CURVE_B, 400.0)]
    with fleet() as f:
        runs = [
            replay(
                f,
                f.offsets("aligned"),
                800.0,
                "uniform",
                responses,
                ["a", "b"],
                period_s=0.5,
                events=[parse_event(f"start=+20s,cut={cut},for=40s")],
            )
            for cut in ("25%", "60%")
        ]
    held, missed = runs[0].events[0], runs[1].events[0]
    assert held.baseline_w == pytest.approx(600.0) and held.target_w == pytest.approx(450.0)
    assert held.met and held.reached_s == 0.0
    assert held.shed_energy_j == pytest.approx(350.0 * 20.0)
    assert held.shed_share == pytest.approx(350.0 * 20.0 / (600.0 * 40.0))
    assert missed.target_w == pytest.approx(240.0) and not missed.met
    assert missed.reached_s is None  # the floors keep the fleet at 400 W in every cell
    assert runs[0].over_limit_share == 0  # (the limit is the event's target in its window)


def test_notice_lets_the_caps_act_at_the_event_s_start() -> None:
    """A 25 % cut for 40 s from +35 s (mid-way through a high half; the window's mean demand
    is 600 W, its target 450 W) with 1 s of latency: told at the start, the fleet is over the
    target for the 2 cells the caps take at the start and at each of the two rising edges in
    the window; told 1 s ahead, only at the edges. Either way the caps end with the window."""
    from powerkit.cap.events import parse_event

    responses = [response_of(CURVE_A, 400.0), response_of(CURVE_B, 400.0)]
    runs = {}
    with fleet() as f:
        for notice in ("0s", "1s"):
            event = parse_event(f"start=+35s,cut=25%,for=40s,notice={notice}")
            runs[notice] = replay(
                f,
                f.offsets("aligned"),
                800.0,
                "uniform",
                responses,
                ["a", "b"],
                period_s=0.5,
                latency_s=1.0,
                events=[event],
            )
    assert runs["0s"].events[0].target_w == pytest.approx(450.0)
    assert runs["0s"].over_limit_share == pytest.approx(6 / 240)
    assert runs["1s"].over_limit_share == pytest.approx(4 / 240)
    # capped: each high stretch in the window from when the caps act, and the 2 cells after
    # it that the release takes, except at the window's end (released as it ends)
    assert runs["0s"].capped_share == pytest.approx((10 + 20 + 8) / 240)
    assert runs["1s"].capped_share == pytest.approx((12 + 20 + 8) / 240)
    assert "1s notice" in runs["1s"].events[0].event


def test_an_event_is_written_as_the_command_takes_it() -> None:
    from powerkit.cap.events import parse_event

    e = parse_event("start=+2h,cut=25%,for=3h,within=30s,notice=10m")
    assert (e.start_s, e.cut, e.for_s, e.within_s, e.notice_s) == (
        7200.0,
        0.25,
        10800.0,
        30.0,
        600.0,
    )
    cases = [
        ("start=2h,cut=25%,for=3h", r"\+DUR"),
        ("start=+2h,for=3h", "give cut"),
        ("start=+2h,cut=100%,for=3h", "under 100"),
        ("when=+2h", "expected"),
    ]
    for bad, why in cases:
        with pytest.raises(BadInputError, match=why):
            parse_event(bad)


BREAKER = """
name = "test curve"
cooling_s = 100
[[point]]
ratio = 1.5
trip_s = 100
[[point]]
ratio = 3
trip_s = 10
[magnetic]
ratio = 10
"""


def breaker_file(folder: Path, text: str = BREAKER) -> Path:
    path = folder / "breaker.toml"
    path.write_text(text)
    return path


def test_a_breaker_trips_exactly_where_its_integral_crosses(tmp_path: Path) -> None:
    """At a constant overload the thermal element trips after exactly t(x); a changing one
    adds cell / t(x) until the sum reaches 1; under the pickup the state relaxes by
    exp(-t / cooling); at the magnetic level it trips at once."""
    from powerkit.cap.breaker import BreakerState, read_breaker

    b = read_breaker(breaker_file(tmp_path))
    t2 = float(
        np.exp(
            np.log(100)
            + (np.log(2) - np.log(1.5)) / (np.log(3) - np.log(1.5)) * (np.log(10) - np.log(100))
        )
    )  # (log-log between the points)
    assert float(b.trip_time(np.array([2.0]))[0]) == pytest.approx(t2)
    assert np.isinf(b.trip_time(np.array([1.49]))).all()
    assert b.trip_time(np.array([5.0]))[0] == pytest.approx(10)  # (beyond the last point)

    def trip(ratios: list[tuple[float, int]], grid: float = 1.0) -> BreakerState:
        state = BreakerState(b, 1000.0, grid)
        power = np.concatenate([np.full(cells, 1000.0 * x) for x, cells in ratios])
        for first in range(0, power.size, 7):  # (fed in blocks, as the replay does)
            state.feed(power[first : first + 7])
        return state

    assert trip([(2.0, 200)]).tripped_s == pytest.approx(t2)
    # 50 s at 1.5 (half of its 100 s), then 2.0: the other half of t(2)
    assert trip([(1.5, 50), (2.0, 200)]).tripped_s == pytest.approx(50 + 0.5 * t2)
    # ... with 100 s under the pickup between: the half relaxes to 0.5 / e
    assert trip([(1.5, 50), (0.5, 100), (3.0, 20)]).tripped_s == pytest.approx(
        150 + (1 - 0.5 / np.e) * 10
    )
    magnetic = trip([(1.0, 30), (12.0, 1), (1.0, 5)]).result()
    assert magnetic.tripped_s == 30 and magnetic.cause == "magnetic"
    held = trip([(1.5, 30), (0.9, 10)]).result()
    assert held.tripped_s is None and held.thermal_peak == pytest.approx(0.3)
    assert held.margin == pytest.approx(0.7) and held.peak_ratio == pytest.approx(1.5)


def test_the_replay_reports_the_breaker_of_the_capped_and_the_uncapped_fleet(
    cli: Cli, tmp_path: Path
) -> None:
    """The square wave under a 600 W feed with its breaker rated at the feed: uncapped, the
    fleet is at 800 / 600 = 1.333 x its rating in every high half — under the 1.5 pickup, so
    the state never heats: no trip, margin 1 - 1.333 / 10; capped, at 1.0."""
    paths = wave_files(tmp_path)
    doc = cli.json(
        "cap",
        *paths,
        "--limit",
        "600W",
        "--policy",
        "none,uniform",
        "--period",
        "0.5s",
        "--breaker",
        breaker_file(tmp_path),
    )
    assert doc["breaker"] == "test curve"
    none, flat = doc["runs"]
    assert none["breaker_uncapped"] == none["breaker"]
    assert none["breaker"]["peak_ratio"] == pytest.approx(800 / 600)
    assert none["breaker"]["margin"] == pytest.approx(1 - 800 / 600 / 10)
    assert (
        flat["breaker"]["peak_ratio"] == pytest.approx(1.0) and flat["breaker"]["tripped_s"] is None
    )
    # a lower rating (a 400 W breaker): 2 x in the high halves, t(2) = 46.4 s of them
    hot = breaker_file(tmp_path, BREAKER.replace('name = "test curve"', 'rating = "400W"'))
    doc = cli.json(
        "cap", *paths, "--limit", "600W", "--policy", "none", "--period", "0.5s", "--breaker", hot
    )
    run = doc["runs"][0]["breaker"]
    assert run["cause"] == "thermal" and 40 < run["tripped_s"] < 120 and run["margin"] < 0
    r = cli("cap", *paths, "--limit", "600W", "--policy", "none", "--breaker", hot)
    assert r.exit_code == 0 and "thermal at" in r.stdout


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("name = 'x'", "no \\[\\[point\\]\\] tables"),
        ("[[point]]\nratio = 2\n[magnetic]\nratio = 5", "needs ratio and trip_s"),
        (
            "[[point]]\nratio = 2\ntrip_s = 10\n[[point]]\nratio = 1.5\ntrip_s = 5\n"
            "[magnetic]\nratio = 5",
            "ratios must rise",
        ),
        ("[[point]]\nratio = 2\ntrip_s = 10", "needs a \\[magnetic\\] table"),
        ("[[point]]\nratio = 2\ntrip_s = 10\n[magnetic]\nratio = 1.5", "must be above"),
        ("[[point]]\nratio = 2\ntrip_s = nan\n[magnetic]\nratio = 5", "positive finite"),
        ("[[point]]\nratio = 'two'\ntrip_s = 1\n[magnetic]\nratio = 5", "must be a number"),
        (
            "rating = 'lots'\n[[point]]\nratio = 2\ntrip_s = 1\n[magnetic]\nratio = 5",
            "rating 'lots'",
        ),
        ("speed = 1\n[[point]]\nratio = 2\ntrip_s = 1\n[magnetic]\nratio = 5", "unknown key"),
    ],
)
def test_a_broken_trip_curve_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    from powerkit.cap.breaker import read_breaker

    with pytest.raises(BadInputError, match=why):
        read_breaker(breaker_file(tmp_path, text))


def test_the_bundled_trip_curve_cites_every_point() -> None:
    from powerkit.cap.breaker import BUNDLED, bundled_breakers, read_breaker
    from powerkit.core.inputs import load_toml

    assert "iec60898-1-type-c" in bundled_breakers()
    b = read_breaker("iec60898-1-type-c")
    assert (b.ratios, b.trip_s, b.magnetic) == ((1.13, 2.55), (3600.0, 1.0), 5.0)
    raw = load_toml(BUNDLED / "iec60898-1-type-c.toml")
    assert all("IEC 60898-1" in p["source"] for p in [*raw["point"], raw["magnetic"]])


def test_a_limit_schedule_holds_the_fleet_to_each_row(cli: Cli, tmp_path: Path) -> None:
    """800 W for the first minute (the demand never exceeds it), 600 W from then: uniform caps
    the three high halves of the second minute, losing half of what 600 W all along does."""
    paths = wave_files(tmp_path)
    plan = tmp_path / "feed.csv"
    plan.write_text("time,kW\n0,0.8\n1m,0.6\n")
    doc = cli.json(
        "cap",
        *paths,
        "--limit-csv",
        plan,
        "--policy",
        "uniform",
        "--period",
        "0.5s",
        "--jobs",
        jobs_table(tmp_path),
    )
    (run,) = doc["runs"]
    assert doc["limit_csv"] == str(plan) and run["limit_w"] == pytest.approx(800.0)
    assert run["lost_gpu_hours"] == pytest.approx((0.25 + 0.125) * HIGH_S / 2 / 3600)
    assert run["over_limit_share"] == 0 and run["capped_share"] == pytest.approx(0.25)
    cases = [
        ("time,W\n0,1\n", "header must be time,kW"),
        ("time,kW\n", "no rows"),
        ("time,kW\n10,1\n", "first row's time must be 0"),
        ("time,kW\n0,1\n0,2\n", "row 3: time '0' does not come after"),
        ("time,kW\n0,-1\n", "row 2: kW '-1' must be a positive"),
        ("time,kW\n0,lots\n", "row 2: kW 'lots' is not a number"),
        ("time,kW\n0,1,2\n", "row 2: expected 2 fields"),
        ("time,kW\nsoon,1\n", "row 2: time 'soon'"),
    ]
    for text, why in cases:
        plan.write_text(text)
        r = cli("cap", *paths, "--limit-csv", plan)
        assert r.exit_code == 2 and why in r.stderr, (text, r.stderr)


def test_econ_prices_the_ratio_curve(cli: Cli, tmp_path: Path) -> None:
    """100 GPUs of 400 W at ratio 4/3 (a feed of 30 kW): the capex of 10 kW avoided, at
    $10,000/kW over 10 years, is $10,000 a year; pfi loses 1/16 of the GPU time (B at 200 W
    half the time), 100 x 8,760 / 16 GPU-hours a year, at $3 each."""
    paths = wave_files(tmp_path)
    cap = tmp_path / "cap.json"
    r = cli(
        "cap",
        *paths,
        "--ratios",
        "1,1.3333333333333333",
        "--policy",
        "pfi",
        "--jobs",
        jobs_table(tmp_path),
        "--period",
        "0.5s",
        "--json",
    )
    cap.write_text(r.stdout)
    fleet = tmp_path / "fleet.json"
    fleet.write_text(cli("oversub", *paths, "--json").stdout)
    doc = cli.json(
        "econ",
        "--oversub",
        fleet,
        "--cap",
        cap,
        "--gpus",
        "100",
        "--gpu-tdp",
        "400W",
        "--capex-per-kw",
        "10000",
        "--amortize",
        "10y",
        "--gpu-hour",
        "3/h",
    )
    flat, tight = doc["cap"]
    assert flat["avoided_capex_usd_per_year"] == 0 and flat["lost_gpu_hours_per_year"] == 0
    assert tight["ratio"] == pytest.approx(4 / 3) and tight["feed_kw"] == pytest.approx(30.0)
    assert tight["avoided_capex_usd_per_year"] == pytest.approx(10_000.0)
    assert tight["lost_gpu_hours_per_year"] == pytest.approx(100 * 8760 / 16)
    assert tight["net_usd_per_year"] == pytest.approx(10_000.0 - 3 * 100 * 8760 / 16)
    assert tight["gpus_same_feed"] == 133 and tight["effective_gain"] == pytest.approx(0.25)
    # the text labels IT and facility kW apart, and says whether each priced ratio holds its feed
    from powerkit.econ.economics import CAP_VALUE_COLUMNS

    headers = [c.header for c in CAP_VALUE_COLUMNS]
    assert "IT feed kW" in headers and "IT capex avoided $/y" in headers
    held = next(c for c in CAP_VALUE_COLUMNS if c.header == "feed held")
    rows = {round(row["ratio"], 2): row for row in doc["cap"]}
    for row in rows.values():
        over = row["over_limit_share"] or 0
        assert held.cell(SimpleNamespace(**row)) == ("no" if over > 0 else "yes")
    assert doc["assumptions"]["gpu_hour"]["value"] == 3.0
    r = cli("econ", "--oversub", fleet, "--cap", fleet, "--gpus", "100", "--gpu-tdp", "400W")
    assert r.exit_code == 2 and "where `powerkit cap --json` output is wanted" in r.stderr
    r = cli("econ", "--oversub", fleet, "--cap", cap, "--gpus", "100", "--gpu-tdp", "400W")
    assert r.exit_code == 0 and "DeepSeek-V3" in r.stdout and "more work" in r.stdout


def test_uniform_brings_any_fleet_exactly_to_the_limit() -> None:
    """The water level on random fleets: the capped draw is the limit exactly, unless the
    demand is under it (no caps) or the floors alone are over it (every GPU at its floor)."""
    from powerkit.cap.policies import _uniform

    rng = np.random.default_rng(1)
    for _ in range(500):
        n = int(rng.integers(1, 30))
        demand, floors = rng.uniform(0, 500, n), rng.choice([0.0, 100.0, 200.0], n)
        limit = float(rng.uniform(0, demand.sum() * 1.2))
        caps = _uniform(demand, limit, floors)
        if demand.sum() <= limit:
            assert np.isinf(caps).all()
        elif np.minimum(demand, floors).sum() > limit:
            assert caps == pytest.approx(floors)
        else:
            assert np.minimum(demand, caps).sum() == pytest.approx(limit, rel=1e-9)


def test_pfi_brings_any_fleet_exactly_to_the_limit_above_the_floors() -> None:
    from powerkit.pfi.allocate import upper_hull

    rng = np.random.default_rng(2)
    for _ in range(300):
        caps = np.sort(rng.choice(np.arange(100.0, 701.0, 50.0), 4, replace=False))
        rates = np.minimum(rng.uniform(0.2, 1, 4), 1.0)
        rates[-1] = 1.0
        r = Response("j", *upper_hull(caps, rates))
        n = int(rng.integers(1, 12))
        responses = [r if rng.random() < 0.7 else None for _ in range(n)]
        floors = np.array([0.0 if x is None else x.floor_w for x in responses])
        demand = rng.uniform(0, 750, n)
        limit = float(rng.uniform(np.minimum(demand, floors).sum(), demand.sum() * 1.1))
        got = pfi(demand, limit, Fleet(responses, floors, np.zeros(n, int)))
        assert (got >= floors - 1e-9).all()
        drawn = float(np.minimum(demand, got).sum())
        assert drawn == pytest.approx(min(limit, demand.sum()), rel=1e-9, abs=1e-6)


def test_pfi_sheds_exactly_as_its_greedy_definition() -> None:
    """The policy (which finds the covering cost without sorting the pieces) against the
    definition (sorting them), on random fleets of two curves and GPUs without one, many of
    them drawing the same power (ties, broken GPU by GPU)."""
    from powerkit.pfi.allocate import upper_hull

    rng = np.random.default_rng(7)
    for _ in range(400):
        caps = np.sort(rng.choice(np.arange(100.0, 701.0, 50.0), 4, replace=False))
        rates = np.minimum(rng.uniform(0.2, 1, 4), 1.0)
        rates[-1] = 1.0
        r, r2 = (
            Response("j", *upper_hull(caps, rates)),
            Response("k", *upper_hull(caps, np.sort(rates))),
        )
        n = int(rng.integers(1, 40))
        responses = [[r, r2, None][int(rng.choice(3, p=[0.5, 0.3, 0.2]))] for _ in range(n)]
        floors = np.array([0.0 if x is None else x.floor_w for x in responses])
        if rng.random() < 0.4:
            demand = rng.choice([float(rng.uniform(0, 750)), 100.0, 300.0, 450.0, 700.0], n)
        else:
            demand = rng.uniform(0, 750, n)
        limit = float(rng.uniform(np.minimum(demand, floors).sum() * 0.8, demand.sum() * 1.1))
        fleet = Fleet(responses, floors, np.zeros(n, int))
        want = greedy_pfi(demand, limit, Fleet(responses, floors, np.zeros(n, int)))
        got = pfi(demand, limit, fleet)
        assert (np.isinf(got) == np.isinf(want)).all()
        assert got[np.isfinite(got)] == pytest.approx(want[np.isfinite(want)], rel=1e-9, abs=1e-6)


def test_the_policies_decide_many_at_once_as_one_at_a_time() -> None:
    """A matrix of decisions (the replay's) is answered as each column alone would be, and
    polca's hysteresis carries from column to column as from call to call."""
    rng = np.random.default_rng(3)
    responses = [response_of(CURVE_A, 400.0), response_of(CURVE_B, 400.0)] * 3
    floors = np.array([r.floor_w for r in responses])
    demand = rng.uniform(150, 400, (6, 200))
    limits = rng.uniform(900, 2000, 200)
    for policy in (uniform, pfi, polca, priority):
        many, one = (
            Fleet(responses, floors, np.arange(6) % 3),
            Fleet(responses, floors, np.arange(6) % 3),
        )
        together = policy(demand, limits, many)
        apart = np.stack([policy(demand[:, j], float(limits[j]), one) for j in range(200)], axis=1)
        assert (np.isinf(together) == np.isinf(apart)).all(), policy
        assert together[np.isfinite(together)] == pytest.approx(apart[np.isfinite(apart)])


def test_the_report_draws_a_cap_document(cli: Cli, tmp_path: Path) -> None:
    paths = wave_files(tmp_path)
    doc = tmp_path / "cap.json"
    r = cli("cap", *paths, "--ratios", "1,1.5", "--policy", "none,uniform", "--json")
    assert r.exit_code == 0, r.stderr
    doc.write_text(r.stdout)
    out = tmp_path / "r.html"
    assert cli("report", "--cap", doc, "--out", out).exit_code == 0
    html = out.read_text()
    assert "<h2>Capping: 2 GPUs, aligned, 2 policies</h2>" in html
    assert html.count("<figcaption>") == 2
    doc.write_text(json.dumps({"kind": "powerkit cap", "version": 1, "gpus": 2}))
    r = cli("report", "--cap", doc, "--out", tmp_path / "r2.html")
    assert r.exit_code == 2 and "not a `cap --json` document" in r.stderr


def test_the_command_writes_its_page_and_keeps_an_existing_one(cli: Cli, tmp_path: Path) -> None:
    (trace,) = wave_files(tmp_path, ("a",))
    page = tmp_path / "cap.html"
    r = cli(
        "cap",
        trace,
        "--limit",
        "75%",
        "--policy",
        "uniform,pfi",
        "--jobs",
        jobs_table(tmp_path),
        "--html",
        page,
    )
    assert r.exit_code == 0, r.stderr
    html = page.read_text()
    assert "<h2>Capping: 1 GPUs" in html and html.count("<figcaption>") == 5
    assert "against the tightest feed (0.3 kW)" in html and "Each job&#x27;s throughput" in html
    before = page.read_bytes()
    r = cli("cap", trace, "--limit", "75%", "--html", page)
    assert r.exit_code == 2 and "exists" in r.stderr and page.read_bytes() == before


# pfi by its definition: the reference the policy is tested against


def greedy_pfi(demand_w: np.ndarray, limit_w: float, fleet: Fleet) -> np.ndarray:
    """pfi by its definition (powerkit.cap.policies): every GPU's pieces, sorted by cost
    per watt, then GPU, then from the top, taken until the fleet is at the limit."""
    need = float(demand_w.sum()) - limit_w
    caps = np.full(demand_w.size, np.inf)
    if need <= 0:
        return caps
    parts = [_greedy_pieces(idx, r, demand_w, fleet.floors_w) for r, idx in fleet.by_response()]
    cost, gpu, hi, lo = (np.concatenate([p[k] for p in parts]) for k in range(4))
    order = np.lexsort((-hi, gpu, cost))  # cheapest first; a GPU's own watts from the top
    cost, gpu, hi, lo = cost[order], gpu[order], hi[order], lo[order]
    taken = np.cumsum(hi - lo)
    last = int(np.searchsorted(taken, need))  # the piece that covers what is still needed
    if last >= taken.size:  # every watt down to the floors is not enough: all of them
        np.minimum.at(caps, gpu, lo)
        return caps
    np.minimum.at(caps, gpu[:last], lo[:last])
    before = float(taken[last - 1]) if last else 0.0
    caps[gpu[last]] = min(caps[gpu[last]], float(hi[last] - (need - before)))
    return caps


def _greedy_pieces(
    idx: np.ndarray, r: Response | None, demand_w: np.ndarray, floors_w: np.ndarray
) -> tuple[np.ndarray, ...]:
    """The sheddable watts of the GPUs ``idx`` (one response ``r``) as pieces (cost per
    watt, GPU, from, to), from each GPU's demand down to its floor along the response's
    hull; the cost of setting a cap at all joins the top piece, which is pooled with the ones
    below it while they are cheaper per watt (so that taking the cheapest first takes a
    GPU's watts in order). GPUs without a response: one piece of unknown (inf) cost."""
    empty = np.empty(0)
    if idx.size == 0:
        return empty, empty.astype(int), empty, empty
    d, floor = demand_w[idx].astype(float), floors_w[idx].astype(float)
    live = d > floor
    idx, d, floor = idx[live], d[live], floor[live]
    if r is None or idx.size == 0:
        return np.full(idx.size, np.inf), idx, d, floor
    c = r.caps_w.astype(float)
    # pieces from the top: [top cap, demand] (no cost), then each hull interval, downwards
    tops = np.concatenate([[np.inf], c[::-1]])  # upper bounds of the pieces
    bottoms = np.concatenate([c[::-1], [-np.inf]])  # their lower bounds
    hi = np.minimum(tops[None, :], d[:, None])
    lo = np.maximum(bottoms[None, :], floor[:, None])
    watts = np.clip(hi - lo, 0.0, None)
    cost = r.rate(np.maximum(hi, lo)) - r.rate(lo)  # (rate is 1 above the top cap)
    entry = 1.0 - r.rate(d)
    first = np.argmax(watts > 0, axis=1)  # each GPU's top piece
    rows = np.arange(idx.size)
    cost[rows, first] += entry
    # pool the top piece with the next ones while it costs more per watt than the next
    cum_c, cum_w = np.cumsum(cost, axis=1), np.cumsum(watts, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        avg = cum_c / cum_w
        unit = np.where(watts > 0, cost / watts, np.inf)
    nxt = np.concatenate([unit[:, 1:], np.full((idx.size, 1), np.inf)], axis=1)
    cols = np.arange(watts.shape[1])[None, :]
    stop = (cols >= first[:, None]) & (avg <= nxt)
    end = np.argmax(stop, axis=1)  # the last piece of the pooled block
    keep = (cols > end[:, None]) & (watts > 0)
    block_cost = cum_c[rows, end] / cum_w[rows, end]
    out_cost = np.concatenate([block_cost, unit[keep]])
    out_gpu = np.concatenate([idx, np.broadcast_to(idx[:, None], watts.shape)[keep]])
    out_hi = np.concatenate([d, hi[keep]])
    out_lo = np.concatenate([lo[rows, end], lo[keep]])
    return out_cost, out_gpu, out_hi, out_lo
