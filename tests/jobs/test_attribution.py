"""``powerkit jobs``: every job's energy against a figure worked out by hand.

The fleet: two hosts of four GPUs sampled every second for ten minutes from T0, each GPU at a
constant power: n1's GPU g at 100 + 10 g W, n2's at 200 + 10 g W; n1's GPU 3 logs nothing
from T0+300 s to T0+360 s (a gap: 60 s of its time are not integrated). Fleet energy:
n1 (100 + 110 + 120) W x 600 s + 130 W x 540 s = 268,200 J; n2 860 W x 600 s = 516,000 J.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.jobs.conftest import T0
from tests.jobs.conftest import iso as _iso


def _by_job(doc: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {j["job"]: j for j in doc["jobs"]}


def test_jobs_mid_sample_overlapping_and_across_a_gap(
    cli: Cli, tmp_path: Path, fleet: Path
) -> None:
    """A holds n1's GPUs 0-1 from T0+100.5 to T0+300.5; B holds n1's GPU 1 from T0+200 to
    T0+400 (with A from 200 to 300.5: an equal split); D holds n1's GPU 3 from T0+250 to
    T0+450, across its gap.

    A: 100 W x 200 s + 110 W x 99.5 s + 110 W x 100.5 s / 2 = 36,472.5 J
    B: 110 W x 100.5 s / 2 + 110 W x 99.5 s = 16,472.5 J
    D: 130 W x (200 − 60) s = 18,200 J, coverage 140 / 200 = 0.7
    unattributed: 268,200 + 516,000 − 71,145 = 713,055 J
    """
    alloc = tmp_path / "alloc.csv"
    alloc.write_text(
        "job,host,gpus,start,end,user,account\n"
        f"A,n1,0-1,{T0 + 100.5},{T0 + 300.5},alice,ml\n"
        f"B,n1,1,{T0 + 200},{T0 + 400},bob,ml\n"
        f"D,n1,3,{_iso(250)},{_iso(450)},alice,vision\n"
    )
    doc = cli.json("jobs", fleet, "--allocations", alloc, "--tz", "UTC")
    jobs = _by_job(doc)
    assert jobs["A"]["energy_j"] == pytest.approx(36_472.5)
    assert jobs["B"]["energy_j"] == pytest.approx(16_472.5)
    assert jobs["D"]["energy_j"] == pytest.approx(18_200)
    assert jobs["D"]["coverage"] == pytest.approx(0.7)
    assert jobs["A"]["coverage"] == pytest.approx(1.0)
    assert jobs["A"]["gpu_hours"] == pytest.approx(2 * 200 / 3600)
    assert jobs["A"]["overlap_s"] == pytest.approx(100.5) and jobs["D"]["overlap_s"] == 0
    assert jobs["D"]["mean_power_w"] == pytest.approx(130)
    assert jobs["A"]["peak_power_w"] == 110
    assert doc["total_j"] == pytest.approx(784_200)
    assert doc["unattributed_j"] == pytest.approx(713_055)
    assert doc["attributed_j"] + doc["unattributed_j"] == pytest.approx(doc["total_j"], rel=1e-12)
    by_user = cli.json("jobs", fleet, "--allocations", alloc, "--tz", "UTC", "--by", "user")
    sums = {g["key"]: g["energy_j"] for g in by_user["groups"]}
    assert sums == {"alice": pytest.approx(54_672.5), "bob": pytest.approx(16_472.5)}


from tests.jobs.slurm_records import SACCT, SCONTROL  # noqa: E402


def test_slurm_records_shared_node_with_and_without_indices(
    cli: Cli, tmp_path: Path, fleet: Path
) -> None:
    """sacct, the cluster's clock in UTC+1 (Europe/Paris in January): job 1001 holds 2 of
    n2's 4 GPUs from T0+0 to T0+600 (09:00-09:10 local) with no indices: half of each GPU;
    array task 1002_3, still running from T0+300, holds GPU 3 (scontrol says IDX:3).

    1002_3: GPU 3 (230 W) from 300 to 600 s with 1001's half: 230 x 300 x 1 / 1.5 = 46,000 J
    1001: half of n2's 860 W x 600 s, less what 1002_3 took of GPU 3's time:
    (200 + 210 + 220) x 600 / 2 + 230 x 300 / 2 + 230 x 300 x 0.5 / 1.5 = 246,500 J
    """
    sacct, scontrol = tmp_path / "sacct.txt", tmp_path / "scontrol.txt"
    sacct.write_text(SACCT)
    scontrol.write_text(SCONTROL)
    r = cli(
        "jobs", fleet, "--sacct", sacct, "--scontrol", scontrol, "--tz", "Europe/Paris", "--json"
    )
    assert r.exit_code == 0, r.stderr
    import json

    doc = json.loads(r.stdout)
    jobs = _by_job(doc)
    assert set(jobs) == {"1001", "1002_3"}
    assert jobs["1002_3"]["energy_j"] == pytest.approx(46_000)
    assert jobs["1001"]["energy_j"] == pytest.approx(246_500)
    assert jobs["1002_3"]["end"] is None and jobs["1002_3"]["state"] == "RUNNING"
    assert jobs["1001"]["indices_known"] is False and jobs["1002_3"]["indices_known"] is True
    assert jobs["1001"]["gpus"] == pytest.approx(2)
    assert doc["attributed_j"] + doc["unattributed_j"] == pytest.approx(784_200)
    for said in (
        "2 job step line(s) folded",
        "1 job(s) that never started",
        "1 job(s) without GPUs",
    ):
        assert said in r.stderr, r.stderr
    assert "without GPU indices on a host" in r.stderr
