"""Read the intervals ``powerkit energy`` accounts: training steps and workload phases.

Steps (``--steps``):

* JSON lines as ``record --annotate-from`` reads them (powerkit/telemetry/annotate.py): each
  line an object with ``ts`` (unix seconds or ISO 8601) and ``step``; ``tokens`` there is the
  *cumulative* count. A step starts at the first line carrying its number; it ends where the
  next step starts, so the last step needs an end: a final line with ``"end": true`` (or
  ``"phase": "end"``), otherwise the last start only closes the step before it.
* CSV with a header: ``step,start`` and optionally ``end`` (or ``duration_s``) and ``tokens``
  (tokens *of that step*). Without ``end``, a step ends where the next one starts, as above.

Phases (``--phases``): a CSV with one row per phase: ``Timestamp`` (unix epoch seconds, UTC:
the phase's start), ``Phase``, ``Runtime (s)`` and the workload's own energy-counter deltas,
``GPU-<k> Energy (<unit>)`` per GPU or one ``GPU Energy (<unit>)`` for a single GPU, unit mJ,
uJ (µJ) or J. Quoted fields may hold newlines (a real CSV parser reads them).

Times in ISO 8601 without a zone are read in ``tz`` (UTC unless given).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from powerkit.core.errors import BadInputError
from powerkit.core.inputs import read_text_input
from powerkit.trace.timeparse import TIME_RANGE_S, parse_start

__all__ = ["Interval", "read_phases", "read_steps"]

_ENERGY_COLUMN = re.compile(r"GPU(?:[-_ ]?(\d+))?\s+Energy\s*\(\s*(mJ|uJ|µJ|J)\s*\)", re.I)
_TO_J = {"mj": 1e-3, "uj": 1e-6, "µj": 1e-6, "j": 1.0}


@dataclass
class Interval:
    """A named span of the run (epoch seconds) and what the workload said of it."""

    name: str | int  # a step number stays a number (as the file wrote it); a phase is text
    start_s: float
    end_s: float
    tokens: float | None = None
    counter_j: dict[int, float] = field(default_factory=dict)  # GPU ordinal -> J


def _read_text(path: Path) -> str:
    return read_text_input(path, max_bytes=1 << 30)


def _epoch(value: object, tz: str | None, where: str) -> float:
    """Unix seconds from a number or an ISO 8601 text (naive: in ``tz``, else UTC)."""
    if isinstance(value, bool) or value is None:
        raise BadInputError(f"{where}: no time")
    return parse_start(str(value), f"{where}: time", tz).timestamp()


def _number(value: object, where: str, what: str) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise BadInputError(f"{where}: {what} {value!r} is not a number") from None
    if not math.isfinite(number) or number < 0:
        raise BadInputError(f"{where}: {what} {value!r} must be a finite number of at least 0")
    return number


def _label(value: object) -> str | int:
    """A step's name: a whole number as a number (``7`` or ``"7"``), anything else as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value)
    return int(text) if text.isdigit() and len(text) < 19 else text


def read_steps(path: Path, tz: str | None = None) -> list[Interval]:
    """Return the steps of a JSON-lines annotation file or a CSV of step starts, in time order."""
    text = _read_text(path)
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if not first:
        raise BadInputError(f"{path}: empty")
    rows = _steps_jsonl(path, text, tz) if first.lstrip().startswith("{") else None
    intervals = rows if rows is not None else _steps_csv(path, text, tz)
    if not intervals:
        raise BadInputError(f"{path}: no complete step (a step ends where the next one starts)")
    return intervals


def _steps_jsonl(path: Path, text: str, tz: str | None) -> list[Interval]:
    starts: list[tuple[float, str | int, float | None]] = []  # (start, step, cumulative tokens)
    end: float | None = None
    last_tokens: float | None = None
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInputError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise BadInputError(f"{where}: expected a JSON object")
        if "ts" not in obj:
            raise BadInputError(f"{where}: no ts (step files need the time of each line)")
        when = _epoch(obj["ts"], tz, where)
        if starts and when < starts[-1][0]:
            raise BadInputError(f"{where}: time goes backwards")
        if "tokens" in obj:
            count = _number(obj["tokens"], where, "tokens")
            if last_tokens is not None and count < last_tokens:
                raise BadInputError(
                    f"{where}: tokens {count:g} is less than the {last_tokens:g} before it (a "
                    "cumulative count never goes down: a restarted counter?)"
                )
            last_tokens = count
        if obj.get("end") is True or obj.get("phase") == "end":
            end = when
            break
        if "step" in obj and (not starts or _label(obj["step"]) != starts[-1][1]):
            starts.append((when, _label(obj["step"]), last_tokens))
    if end is not None:
        starts.append((end, "", last_tokens))
    out = []
    for (a, name, tok_a), (b, _, tok_b) in itertools.pairwise(starts):
        tokens = tok_b - tok_a if tok_a is not None and tok_b is not None else None
        out.append(Interval(name, a, b, tokens))
    return out


def _steps_csv(path: Path, text: str, tz: str | None) -> list[Interval]:
    reader = csv.DictReader(io.StringIO(text))
    columns = {c.strip().lower(): c for c in reader.fieldnames or []}
    if "step" not in columns or "start" not in columns:
        raise BadInputError(
            f"{path}: a step CSV needs the columns step,start (optionally end or duration_s, "
            f"and tokens); found {', '.join(reader.fieldnames or [])}"
        )
    rows: list[tuple[str | int, float, float | None, float | None]] = []
    for n, row in enumerate(reader, start=2):
        where = f"{path}:{n}"
        if None in row or any(v is None for v in row.values()):
            raise BadInputError(f"{where}: expected {len(columns)} fields")
        start = _epoch(row[columns["start"]], tz, where)
        end = None
        if "end" in columns and row[columns["end"]].strip():
            end = _epoch(row[columns["end"]], tz, where)
        elif "duration_s" in columns and row[columns["duration_s"]].strip():
            end = start + _number(row[columns["duration_s"]], where, "duration_s")
        if end is not None and end <= start:
            raise BadInputError(f"{where}: the step ends before it starts")
        tokens = None
        if "tokens" in columns and row[columns["tokens"]].strip():
            tokens = _number(row[columns["tokens"]], where, "tokens")
        if rows and start < rows[-1][1]:
            raise BadInputError(f"{where}: steps must be in time order")
        rows.append((_label(row[columns["step"]].strip()), start, end, tokens))
    out = []
    for k, (name, start, end, tokens) in enumerate(rows):
        if end is None:
            if k + 1 == len(rows):
                break  # the last start only closes the step before it
            end = rows[k + 1][1]
        out.append(Interval(name, start, end, tokens))
    return out


def read_phases(path: Path) -> list[Interval]:
    """Return the phases of a workload's phase file (see the module docstring)."""
    text = _read_text(path)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    fields = reader.fieldnames or []
    need = {"timestamp", "phase", "runtime (s)"}
    columns = {c.strip().lower(): c for c in fields}
    if not need <= set(columns):
        raise BadInputError(
            f"{path}: a phase file needs the columns Timestamp, Phase and Runtime (s); found "
            f"{', '.join(fields[:8])}{'…' if len(fields) > 8 else ''}"
        )
    energy: dict[int, tuple[str, float]] = {}
    single: tuple[str, float] | None = None
    for name in fields:
        m = _ENERGY_COLUMN.fullmatch(name.strip())
        if m is None:
            continue
        scale = _TO_J[m.group(2).lower()]
        if m.group(1) is None:
            single = (name, scale)
        else:
            energy[int(m.group(1))] = (name, scale)
    if not energy and single is not None:
        energy = {0: single}  # one GPU's counter (with per-GPU columns it is their total)
    if not energy:
        raise BadInputError(f"{path}: no GPU energy column (e.g. 'GPU-0 Energy (mJ)')")
    out = []
    for n, row in enumerate(reader, start=2):
        where = f"{path}: row {n - 1} (phase {row.get(columns['phase'], '?')!r})"
        if None in row or any(v is None for v in row.values()):
            raise BadInputError(f"{where}: expected {len(fields)} fields")
        start = _epoch(row[columns["timestamp"]], None, where)
        runtime = _number(row[columns["runtime (s)"]], where, "Runtime (s)")
        if start + runtime >= TIME_RANGE_S[1]:
            raise BadInputError(f"{where}: Runtime (s) {runtime:g} ends the phase after 2199")
        counters = {
            gpu: _number(row[name], where, name) * scale for gpu, (name, scale) in energy.items()
        }
        out.append(Interval(row[columns["phase"]].strip(), start, start + runtime, None, counters))
    if not out:
        raise BadInputError(f"{path}: no phase rows")
    return out
