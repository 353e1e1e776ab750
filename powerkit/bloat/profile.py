"""Stage profiles: time and energy of one microbatch's forward or backward computation per
pipeline stage at each SM frequency, in the CSV layout Perseus publishes:
``stage,instruction,frequency,time,energy`` (instruction forward/backward, frequency MHz,
time s, energy J)."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from powerkit.core.errors import BadInputError
from powerkit.core.inputs import read_text_input
from powerkit.core.outputs import write_text

__all__ = ["INSTRUCTIONS", "Choices", "Profile", "read_profile", "write_profile"]

INSTRUCTIONS = ("forward", "backward")
_COLUMNS = ("stage", "instruction", "frequency", "time", "energy")


@dataclass
class Choices:
    """One computation's choices, fastest first: frequency (MHz), time (s), energy (J)."""

    frequency: np.ndarray
    time: np.ndarray
    energy: np.ndarray


@dataclass
class Profile:
    """Choices per (stage, instruction)."""

    stages: int
    options: dict[tuple[int, str], Choices]
    origin: str = ""

    def rows(self) -> list[tuple[int, str, float, float, float]]:
        return [
            (s, i, float(f), float(t), float(e))
            for (s, i), o in sorted(self.options.items())
            for f, t, e in zip(o.frequency, o.time, o.energy, strict=True)
        ]


def read_profile(path: Path) -> Profile:
    """Read and check a profile CSV; one line naming the row for anything wrong."""
    text = read_text_input(path)
    reader = csv.DictReader(io.StringIO(text))
    if tuple(c.strip() for c in reader.fieldnames or ()) != _COLUMNS:
        raise BadInputError(
            f"{path}: expected the header {','.join(_COLUMNS)}, got "
            f"{','.join(reader.fieldnames or [])}"
        )
    found: dict[tuple[int, str], dict[float, tuple[float, float]]] = {}
    for n, row in enumerate(reader, start=2):
        where = f"{path}:{n}"
        if None in row or any(v is None for v in row.values()):
            raise BadInputError(f"{where}: expected {len(_COLUMNS)} fields")
        try:
            stage = int(row["stage"])
            freq, time_s, energy = (float(row[k]) for k in ("frequency", "time", "energy"))
        except ValueError:
            raise BadInputError(f"{where}: unreadable row {','.join(row.values())!r}") from None
        instruction = row["instruction"].strip().lower()
        if instruction not in INSTRUCTIONS:
            raise BadInputError(f"{where}: instruction {instruction!r} (forward or backward)")
        if stage < 0 or not all(math.isfinite(x) and x > 0 for x in (freq, time_s, energy)):
            raise BadInputError(f"{where}: stage must be >= 0 and frequency, time, energy > 0")
        options = found.setdefault((stage, instruction), {})
        if freq in options:
            raise BadInputError(f"{where}: stage {stage} {instruction} at {freq:g} MHz twice")
        options[freq] = (time_s, energy)
    if not found:
        raise BadInputError(f"{path}: no profile rows")
    stages = max(s for s, _ in found) + 1
    missing = [f"{s} {i}" for s in range(stages) for i in INSTRUCTIONS if (s, i) not in found]
    if missing:
        raise BadInputError(f"{path}: no rows for stage/instruction {', '.join(missing[:4])}")
    return Profile(stages, {key: _options(opts) for key, opts in found.items()}, str(path))


def _options(opts: dict[float, tuple[float, float]]) -> Choices:
    freqs = np.array(sorted(opts, reverse=True))
    return Choices(
        freqs,
        np.array([opts[f][0] for f in freqs]),
        np.array([opts[f][1] for f in freqs]),
    )


def write_profile(profile: Profile, path: Path) -> Path:
    """Write ``profile`` as CSV (atomically)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_COLUMNS)
    for s, i, f, t, e in profile.rows():
        writer.writerow([s, i, f"{f:g}", f"{t:.9g}", f"{e:.9g}"])
    return write_text(path, out.getvalue())
