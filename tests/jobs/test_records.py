"""The scheduler's records as Slurm 23.11 prints them, and every way they can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from powerkit.core.errors import BadInputError
from powerkit.jobs.records import expand_hosts, expand_indices
from powerkit.jobs.slurm import read_sacct, read_scontrol
from tests.conftest import Cli
from tests.jobs.slurm_records import SACCT, SCONTROL


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("gpu01", ["gpu01"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("a[1-2],b3", ["a1", "a2", "b3"]),
        ("r[1-2]-n[08-09]", ["r1-n08", "r1-n09", "r2-n08", "r2-n09"]),
        ("node[9-10]", ["node9", "node10"]),
        ("None assigned", []),
    ],
)
def test_compressed_node_lists(text: str, names: list[str]) -> None:
    assert expand_hosts(text, "x") == names


@pytest.mark.parametrize(
    "text", ["gpu[01-", "gpu]01[", "gpu[a-b]", "gpu[3-1]", "gpu[1-999999999]", "a,,b"]
)
def test_an_unparsable_node_list_is_one_line(text: str) -> None:
    with pytest.raises(BadInputError, match="node list"):
        expand_hosts(text, "sacct.txt: line 2")


def test_gpu_indices() -> None:
    assert expand_indices("0-3,6", "x") == (0, 1, 2, 3, 6)
    for bad in ("0-", "3-1", "a", "1,1", ""):
        with pytest.raises(BadInputError):
            expand_indices(bad, "x")


def test_sacct_as_slurm_prints_it(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text(SACCT)
    read = read_sacct(path, "UTC")
    assert [j.job for j in read.jobs] == ["1001", "1002_3"]
    assert (read.steps, read.not_started, read.no_gpu) == (2, 1, 1)
    first = read.jobs[0]
    assert (first.user, first.account, first.partition, first.state) == (
        "carol",
        "ml",
        "gpu",
        "COMPLETED",
    )
    assert [(h.host, h.count, h.gpus) for h in first.holds] == [("n2", 2.0, None)]
    # -p (a trailing |) reads the same
    path.write_text("\n".join(line + "|" for line in SACCT.splitlines()) + "\n")
    assert [j.job for j in read_sacct(path, "UTC").jobs] == ["1001", "1002_3"]


def test_scontrol_indices_of_an_array_task(tmp_path: Path) -> None:
    path = tmp_path / "scontrol.txt"
    path.write_text(
        SCONTROL + "\nJobId=77 JobName=x\n     Nodes=n[1-2] CPU_IDs=0-3 Mem=1 GRES=gpu:4(IDX:0-3)\n"
    )
    found = read_scontrol(path)
    assert found["1002_3"] == {"n2": (3,)} and found["1005"] == {"n2": (3,)}
    assert found["77"] == {"n1": (0, 1, 2, 3), "n2": (0, 1, 2, 3)}


HEAD = "JobID|User|Account|Partition|NodeList|AllocTRES|Start|End|State\n"
OK_TRES = "billing=8,cpu=8,gres/gpu=2,node=1"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("1001|a|b|c|n1|x|y\n", "line 2: 7 fields where the header has 9"),
        (
            f"10x1|a|b|c|n1|{OK_TRES}|2026-01-05T09:00:00|2026-01-05T09:10:00|COMPLETED\n",
            "JobID '10x1'",
        ),
        (
            f"1001|a|b|c|n1|{OK_TRES}|2026-01-05T09:10:00|2026-01-05T09:00:00|COMPLETED\n",
            "ends before it starts",
        ),
        (
            f"1001|a|b|c|n[1-|{OK_TRES}|2026-01-05T09:00:00|Unknown|RUNNING\n",
            "node list 'n[1-' does not parse",
        ),
        (f"1001|a|b|c|n1|{OK_TRES}|yesterday|Unknown|RUNNING\n", "line 2: Start 'yesterday'"),
        (
            "1001|a|b|c|n1|gres/gpu=x|2026-01-05T09:00:00|Unknown|RUNNING\n",
            "a GPU count that does not parse",
        ),
        (
            f"1001|a|b|c|n1|{OK_TRES}|2026-01-05T09:00:00|Unknown|RUNNING\n" * 2,
            "line 3: job 1001 appears twice",
        ),
    ],
)
def test_a_malformed_sacct_line_is_one_line_naming_it(
    cli: Cli,
    tmp_path: Path,
    fleet: Path,
    body: str,
    said: str,
) -> None:
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(HEAD + body)
    r = cli("jobs", fleet, "--sacct", sacct, "--tz", "UTC")
    assert r.exit_code == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: {sacct}") and said in line, line
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        ("A,n1,0-1,1767600100,1767600050", "line 2: the end is not after the start"),
        ("A,n1,9,1767600100,1767600200", "GPU 9 of n1, which the trace does not have"),
        ("A,n1,0-x,1767600100,1767600200", "GPU indices '0-x' are not like 0-3,6"),
        ("A,,0,1767600100,1767600200", "line 2: an empty job or host"),
        ("A,n1,0,1767600100", "line 2: 4 fields, the header has 5"),
    ],
)
def test_bad_allocations_are_one_line(
    cli: Cli,
    tmp_path: Path,
    fleet: Path,
    rows: str,
    said: str,
) -> None:
    alloc = tmp_path / "alloc.csv"
    alloc.write_text(f"job,host,gpus,start,end\n{rows}\n")
    r = cli("jobs", fleet, "--allocations", alloc)
    assert r.exit_code == 2 and said in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_job_on_a_host_the_trace_lacks_is_said(cli: Cli, tmp_path: Path, fleet: Path) -> None:
    alloc = tmp_path / "alloc.csv"
    alloc.write_text(
        "job,host,gpus,start,end\nA,n9,0,1767600100,1767600200\nB,n1,0,1767600100,1767600200\n"
    )
    r = cli("jobs", fleet, "--allocations", alloc, "--tz", "UTC", "--json")
    assert r.exit_code == 0, r.stderr
    assert "1 host(s) the records name are not in the trace: n9 (1 job(s))" in r.stderr
    import json

    jobs = {j["job"]: j for j in json.loads(r.stdout)["jobs"]}
    assert jobs["A"]["energy_j"] == 0 and jobs["A"]["coverage"] == 0
    assert jobs["B"]["energy_j"] == pytest.approx(100 * 100)


def test_one_job_map_and_a_csv_for_chargeback(cli: Cli, tmp_path: Path, fleet: Path) -> None:
    alloc = tmp_path / "alloc.csv"
    alloc.write_text("job,host,gpus,start,end,user\n=cmd,n1,0,1767600100,1767600200,alice\n")
    r = cli("jobs", fleet, "--allocations", alloc, "--by-label", "pod")
    assert r.exit_code == 2 and "give one of --sacct, --allocations or --by-label" in r.stderr
    out = tmp_path / "jobs.csv"
    r = cli(
        "jobs", fleet, "--allocations", alloc, "--tz", "UTC", "--csv", out, "--price", "0.10/kWh"
    )
    assert r.exit_code == 0, r.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("job,user,account,partition,state,start,end,hosts,gpus")
    assert lines[1].startswith("'=cmd,alice,")  # a spreadsheet never runs it
    assert ",0.00277777778," in lines[1]  # 10,000 J in kWh
    r = cli("jobs", fleet, "--allocations", alloc, "--csv", out)
    assert r.exit_code == 2 and "--force" in r.stderr


@pytest.mark.parametrize("target", ["fifo", "records", "trace"])
def test_the_csv_never_replaces_an_input_or_a_pipe(
    cli: Cli, tmp_path: Path, fleet: Path, target: str
) -> None:
    import os

    alloc = tmp_path / "alloc.csv"
    alloc.write_text("job,host,gpus,start,end\nA,n1,0,1767600100,1767600200\n")
    out = {"records": alloc, "trace": fleet, "fifo": tmp_path / "pipe"}[target]
    if target == "fifo":
        os.mkfifo(out)
    before = None if target == "fifo" else out.read_bytes()
    r = cli("jobs", fleet, "--allocations", alloc, "--csv", out, "--force")
    assert r.exit_code == 2 and "--csv" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    if before is not None:
        assert out.read_bytes() == before
