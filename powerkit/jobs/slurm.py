"""Slurm's records of who ran where: ``sacct -P`` and ``scontrol show job -d`` output, as Slurm
23.11 prints them.

``sacct -P --format=JobID,User,Account,Partition,NodeList,AllocTRES,Start,End,State`` prints
a ``|``-separated header and a line per job and per job step. A job's own line (``1001``, an
array task ``1001_4``, a heterogeneous component ``1001+0``) carries its allocation: its
nodes (a compressed list, ``gpu[01-04,07]``) and its GPUs (``gres/gpu=8`` in AllocTRES, the
job's total over its nodes). Its steps (``1001.batch``, ``1001.extern``, ``1001.0``) ran
inside that allocation and are folded into it. A job that never started (``Start`` Unknown
or None: pending, cancelled before it ran) or that held no GPU is left out and counted. An
``End`` of Unknown is a job still running. sacct prints the cluster's local time without a
zone: ``--tz`` names it; without it the times are read as UTC, and that is said.

sacct gives a job's GPU count per node, not which GPUs. ``scontrol show job -d`` (run while
the job ran, or kept by a prolog) prints, per node, ``Nodes=gpu01 ... GRES=gpu:a100:4(IDX:0-3)``:
the indices. Where a job's indices on a host are unknown, it holds a share of each of the
host's GPUs (:mod:`powerkit.jobs.attribute`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from powerkit.core.errors import BadInputError
from powerkit.core.inputs import read_text_input
from powerkit.jobs.records import (
    MAX_RECORDS_BYTES,
    Hold,
    Job,
    expand_hosts,
    expand_indices,
    when_s,
)

__all__ = ["SACCT_FIELDS", "SacctRead", "read_sacct", "read_scontrol"]

#: the fields ``jobs`` reads from sacct's header (any order, others ignored)
SACCT_FIELDS = (
    "JobID",
    "User",
    "Account",
    "Partition",
    "NodeList",
    "AllocTRES",
    "Start",
    "End",
    "State",
)
_NEVER = ("Unknown", "None", "")


class SacctRead:
    """What a sacct file held: the jobs with GPUs that ran, and the lines left out."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []
        self.steps = 0  # step lines folded into their job
        self.not_started = 0  # jobs that never ran
        self.no_gpu = 0  # jobs that held no GPU


def _gpus_of(tres: str, where: str) -> float:
    """The GPUs in an AllocTRES field: ``gres/gpu=N`` (else the sum of ``gres/gpu:TYPE=N``)."""
    plain = re.search(r"(?:^|,)gres/gpu=(\d+)(?:,|$)", tres)
    if plain:
        return float(plain.group(1))
    typed = re.findall(r"(?:^|,)gres/gpu:[^=,]+=(\d+)(?=,|$)", tres)
    if typed:
        return float(sum(int(n) for n in typed))
    if "gres/gpu" in tres:
        raise BadInputError(f"{where}: AllocTRES {tres!r}: a GPU count that does not parse")
    return 0.0


def read_sacct(path: Path, tz: str | None) -> SacctRead:
    """The jobs of a ``sacct -P`` file (module docstring); a malformed line is one error naming
    the file and the line."""
    text = read_text_input(path, "--sacct", MAX_RECORDS_BYTES)
    lines = text.splitlines()
    if not lines:
        raise BadInputError(
            f"{path}: empty (write it with sacct -P --format={','.join(SACCT_FIELDS)})"
        )
    header = [h.strip() for h in lines[0].rstrip("|").split("|")]
    missing = [f for f in SACCT_FIELDS if f not in header]
    if missing:
        raise BadInputError(
            f"{path}: not sacct -P output with the fields jobs needs (missing "
            f"{', '.join(missing)}): write it with sacct -P --format={','.join(SACCT_FIELDS)}"
        )
    at = {name: header.index(name) for name in SACCT_FIELDS}
    out = SacctRead()
    seen: set[str] = set()
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        where = f"{path}: line {number}"
        cells = raw.split("|")
        if len(cells) == len(header) + 1 and cells[-1] == "":  # sacct -p: a trailing |
            cells = cells[:-1]
        if len(cells) != len(header):
            raise BadInputError(
                f"{where}: {len(cells)} fields where the header has {len(header)} (a | in a "
                "field? sacct -P separates fields with |)"
            )
        cell = {name: cells[i].strip() for name, i in at.items()}
        job_id = cell["JobID"]
        if not re.fullmatch(r"\d+(?:_\d+|_\[[^\]]*\])?(?:\+\d+)?(?:\.[\w-]+)?", job_id):
            raise BadInputError(
                f"{where}: JobID {job_id!r} is not a Slurm job id (1001, 1001_4, 1001.batch)"
            )
        if "." in job_id:
            out.steps += 1
            continue
        if job_id in seen:
            raise BadInputError(f"{where}: job {job_id} appears twice")
        seen.add(job_id)
        if cell["Start"] in _NEVER:
            out.not_started += 1
            continue
        gpus = _gpus_of(cell["AllocTRES"], where)
        if gpus == 0:
            out.no_gpu += 1
            continue
        start = when_s(cell["Start"], f"{where}: Start", tz)
        end = math.inf if cell["End"] in _NEVER else when_s(cell["End"], f"{where}: End", tz)
        if end < start:
            raise BadInputError(f"{where}: job {job_id} ends before it starts")
        hosts = expand_hosts(cell["NodeList"], where)
        if not hosts:
            raise BadInputError(f"{where}: job {job_id} ran (it has a Start) on no node")
        per_host = gpus / len(hosts)
        state = cell["State"].split()[0] if cell["State"] else None  # "CANCELLED by 1001"
        job = Job(
            job_id, cell["User"] or None, cell["Account"] or None, cell["Partition"] or None, state
        )
        job.holds = [Hold(h, None, per_host, start, end) for h in hosts]
        out.jobs.append(job)
    return out


def read_scontrol(path: Path) -> dict[str, dict[str, tuple[int, ...]]]:
    """Each job's GPU indices per host from ``scontrol show job -d`` output: job id (and, for
    an array task, ``ARRAYJOB_TASK``) -> host -> indices."""
    text = read_text_input(path, "--scontrol", MAX_RECORDS_BYTES)
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    blocks = re.split(r"\n\s*\n", text)
    found = False
    for block in blocks:
        head = re.search(r"\bJobId=(\S+)", block)
        if head is None:
            continue
        found = True
        names = [head.group(1)]
        array = re.search(r"\bArrayJobId=(\d+)\s+ArrayTaskId=(\d+)", block)
        if array:
            names.append(f"{array.group(1)}_{array.group(2)}")
        where = f"{path}: job {head.group(1)}"
        per_host: dict[str, tuple[int, ...]] = {}
        for line in block.splitlines():
            nodes = re.search(r"\bNodes=(\S+)", line)
            idx = re.search(r"\bIDX:([0-9,\-]+)\)", line)
            if nodes is None or idx is None:
                continue
            indices = expand_indices(idx.group(1), where)
            for host in expand_hosts(nodes.group(1), where):
                per_host[host] = indices
        for name in names:
            out[name] = per_host
    if not found:
        raise BadInputError(f"{path}: no JobId= record (write it with scontrol show job -d)")
    return out
