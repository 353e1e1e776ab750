"""powerkit cap on hand-computable fleets: two jobs with linear cap curves on a square wave.

Job A keeps c / 400 of its throughput under a cap c (1/400 per watt shed); job B keeps
0.5 + 0.5 c / 400 (half that per watt). Each runs on one GPU of 400 W nameplate that draws
200 W for 10 s, then 400 W for 10 s, six times over (120 s on a 0.5 s grid): the fleet's
demand is 400 W, then 800 W. Under a 600 W limit 200 W must be shed in every high half.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from powerkit.analysis.fleet import FleetMembers
from powerkit.cap.policies import pfi, uniform
from powerkit.cap.replay import replay
from powerkit.cap.response import response_of
from powerkit.errors import BadInputError
from powerkit.pfi.curves import JobCurve
from powerkit.trace.parquet import write_trace
from tests.conftest import Cli
from tests.test_windows import make_trace

CAPS = np.array([200.0, 300.0, 400.0])
CURVE_A = JobCurve("a", CAPS, 2 * CAPS, 1000 * CAPS / 400)  # rate c / 400
CURVE_B = JobCurve("b", CAPS, 2 * CAPS, 1000 * (0.5 + 0.5 * CAPS / 400))
HIGH_S = 60.0  # seconds of high demand in the 120 s


def wave(origin: str):  # type: ignore[no-untyped-def]
    rows = [(0, 0.5 * i, 400.0 if i % 40 >= 20 else 200.0) for i in range(240)]
    return dataclasses.replace(make_trace(rows), origin=origin)


def fleet() -> FleetMembers:
    return FleetMembers([(wave("a.parquet"), 1), (wave("b.parquet"), 1)], 0.5)


def run(policy: str, latency_s: float = 0.0, limit_w: float = 600.0):  # type: ignore[no-untyped-def]
    responses = [response_of(CURVE_A, 400.0), response_of(CURVE_B, 400.0)]
    with fleet() as f:
        return replay(f, f.offsets("aligned"), limit_w, policy, responses, ["a", "b"],
                      period_s=0.5, latency_s=latency_s)  # fmt: skip


def test_a_linear_curve_is_its_own_response() -> None:
    r = response_of(CURVE_B, 400.0)
    assert r.floor_w == 200 and r.top_w == 400
    assert float(r.rate(300.0)) == pytest.approx(0.875) and float(r.rate(np.inf)) == 1.0


def test_the_policies_shed_exactly_what_the_limit_needs() -> None:
    responses = [response_of(CURVE_A, 400.0), response_of(CURVE_B, 400.0)]
    demand, floors = np.array([400.0, 400.0]), np.array([200.0, 200.0])
    assert uniform(demand, 600.0, responses, floors) == pytest.approx([300.0, 300.0])
    # B loses half as much per watt: all 200 W come from it
    assert pfi(demand, 600.0, responses, floors).tolist() == [np.inf, 200.0]
    assert np.isinf(pfi(demand, 900.0, responses, floors)).all()


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
    with pytest.raises(BadInputError, match="--latency 200ms is not a whole number"):
        run("uniform", latency_s=0.2)
    with pytest.raises(BadInputError, match="--policy 'fastest'"):
        run("fastest")


def test_the_command_replays_ratios_and_names_what_it_lacks(cli: Cli, tmp_path: Path) -> None:
    paths = []
    for name in ("a", "b"):
        t = wave(f"{name}.parquet")
        paths.append(write_trace(t.table(), t.meta, tmp_path / f"{name}.parquet"))
    jobs = tmp_path / "jobs.csv"
    rows = [f"{c.job},{cap:g},{p:g},{tok:g}" for c in (CURVE_A, CURVE_B)
            for cap, p, tok in zip(c.cap_w, c.power_w, c.tokens_per_s, strict=True)]  # fmt: skip
    jobs.write_text("job,cap_w,power_w,tokens_per_s\n" + "\n".join(rows) + "\n")
    doc = cli.json("cap", *paths, "--ratios", "1,1.3333333333333333", "--policy", "uniform,pfi",
                   "--jobs", jobs, "--period", "0.5s")  # fmt: skip
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
