"""Who held which GPUs when: the scheduler's records, read into one shape.

A job's :class:`Job` holds its identity (id, user, account, partition, state) and one
:class:`Hold` per host: the GPU indices it held there (or, where the records name only a
count on a node others shared, that count) from its start to its end (epoch seconds; an end
of ``inf`` for a job still running). Three readers fill it: Slurm's accounting
(:mod:`powerkit.jobs.slurm`), a plain allocations CSV (:func:`read_allocations`), and a
trace's own pod labels (:mod:`powerkit.jobs.attribute`).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from powerkit.core.errors import BadInputError
from powerkit.core.inputs import read_text_input
from powerkit.core.units import is_number
from powerkit.trace.timeparse import parse_start

__all__ = [
    "MAX_LIST",
    "Hold",
    "Job",
    "expand_hosts",
    "expand_indices",
    "read_allocations",
    "when_s",
]

#: the most names or indices one compressed list may expand to (a typo like gpu[1-999999999]
#: would otherwise fill memory)
MAX_LIST = 100_000
#: the largest input of job records read (a month of a large cluster's sacct is tens of MB)
MAX_RECORDS_BYTES = 512 * 1024 * 1024


@dataclass
class Hold:
    """GPUs of one host a job held: ``gpus`` the indices, or None where only their ``count``
    is known (a node others shared, no index recorded)."""

    host: str
    gpus: tuple[int, ...] | None
    count: float  # GPUs held (a share where the job's total does not divide among its nodes)
    start_s: float
    end_s: float


@dataclass
class Job:
    """A job and the GPUs it held (see the module docstring)."""

    job: str
    user: str | None = None
    account: str | None = None
    partition: str | None = None
    state: str | None = None
    holds: list[Hold] = field(default_factory=list)

    @property
    def start_s(self) -> float:
        return min(h.start_s for h in self.holds)

    @property
    def end_s(self) -> float:
        return max(h.end_s for h in self.holds)


def expand_indices(text: str, what: str) -> tuple[int, ...]:
    """``0-3,6`` as (0, 1, 2, 3, 6): ascending ranges of indices, each at most once."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d{1,6})\s*(?:-\s*(\d{1,6})\s*)?", part)
        if m is None:
            raise BadInputError(f"{what}: GPU indices {text!r} are not like 0-3,6")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo or len(out) + hi - lo + 1 > MAX_LIST:
            raise BadInputError(f"{what}: GPU indices {text!r}: a range that runs backwards")
        out.extend(range(lo, hi + 1))
    if len(set(out)) != len(out):
        raise BadInputError(f"{what}: GPU indices {text!r} name a GPU twice")
    return tuple(sorted(out))


def _split_top(text: str) -> list[str]:
    """``a[1-2],b3`` at its top-level commas (those outside brackets)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("a ] without its [")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError("a [ without its ]")
    parts.append("".join(cur))
    return parts


def _expand_one(name: str, budget: int) -> list[str]:
    m = re.search(r"\[([^\[\]]*)\]", name)
    if m is None:
        return [name]
    head, tail = name[: m.start()], name[m.end() :]
    out: list[str] = []
    for item in m.group(1).split(","):
        r = re.fullmatch(r"(\d+)(?:-(\d+))?", item.strip())
        if r is None:
            raise ValueError(f"range {item!r} is not like 01-04")
        lo_text = r.group(1)
        lo, hi = int(lo_text), int(r.group(2) if r.group(2) is not None else lo_text)
        if hi < lo:
            raise ValueError(f"range {item!r} runs backwards")
        if len(out) + (hi - lo + 1) > budget:
            raise ValueError(f"more than {MAX_LIST:,} names")
        width = len(lo_text)
        for k in range(lo, hi + 1):
            out.extend(_expand_one(f"{head}{k:0{width}d}{tail}", budget - len(out)))
    return out


def expand_hosts(text: str, what: str) -> list[str]:
    """Slurm's compressed host list (``gpu[01-04,07],cpu3``, ``r[1-2]-n[01-02]``) as names,
    zero padding kept; an unparsable one is one line naming ``what``."""
    text = text.strip()
    if not text or text in ("None assigned", "(null)"):
        return []
    try:
        out: list[str] = []
        for part in _split_top(text):
            if not part.strip():
                raise ValueError("an empty name")
            out.extend(_expand_one(part.strip(), MAX_LIST - len(out)))
    except ValueError as exc:
        raise BadInputError(f"{what}: node list {text!r} does not parse ({exc})") from None
    return out


def when_s(text: str, what: str, tz: str | None, naive: list[str] | None = None) -> float:
    """A record's time: ISO 8601 (without an offset: in ``tz``, else UTC) or epoch seconds;
    a time without an offset is added to ``naive``."""
    when = parse_start(text, what, tz)
    if naive is not None and not is_number(text) and _without_offset(text):
        naive.append(text)
    return when.timestamp()


def _without_offset(text: str) -> bool:
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00")).tzinfo is None
    except ValueError:
        return False


_ALLOCATION_COLUMNS = ("job", "host", "gpus", "start", "end")


def read_allocations(path: Path, tz: str | None, naive: list[str] | None = None) -> list[Job]:
    """A plain allocations CSV, ``job,host,gpus,start,end[,user,account,partition,state]``, a
    row per job and host (``gpus`` like ``0-3,6``; an empty ``end``: still running); its
    times without an offset are added to ``naive``."""
    text = read_text_input(path, "--allocations", MAX_RECORDS_BYTES)
    reader = csv.reader(io.StringIO(text))
    header = [c.strip().lower() for c in next(reader, [])]
    missing = [c for c in _ALLOCATION_COLUMNS if c not in header]
    if missing:
        raise BadInputError(
            f"{path}: missing column(s) {', '.join(missing)} (an allocations file has "
            "job,host,gpus,start,end[,user,account,partition,state])"
        )
    col = {name: header.index(name) for name in header}
    jobs: dict[str, Job] = {}
    for line, row in enumerate(reader, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise BadInputError(
                f"{path}: line {line}: {len(row)} fields, the header has {len(header)}"
            )
        cell = {name: row[i].strip() for name, i in col.items()}
        where = f"{path}: line {line}"
        if not cell["job"] or not cell["host"]:
            raise BadInputError(f"{where}: an empty job or host")
        start = when_s(cell["start"], f"{where}: start", tz, naive)
        end = when_s(cell["end"], f"{where}: end", tz, naive) if cell["end"] else math.inf
        if end <= start:
            raise BadInputError(f"{where}: the end is not after the start")
        gpus = expand_indices(cell["gpus"], where)
        job = jobs.setdefault(cell["job"], Job(cell["job"]))
        for key in ("user", "account", "partition", "state"):
            if cell.get(key):
                setattr(job, key, cell[key])
        job.holds.append(Hold(cell["host"], gpus, len(gpus), start, end))
    if not jobs:
        raise BadInputError(f"{path}: no allocation rows")
    return list(jobs.values())
