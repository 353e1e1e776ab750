"""A fleet's members on the grid: each GPU series of the traces given (``path:count``
repeats), spooled to disk as it streams past, with its nameplate and coverage, and the offsets
they are composed at: what ``oversub`` composes, ``cap`` replays and ``utility`` sums."""

from __future__ import annotations

import functools
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from powerkit.analysis.windows import coarse_error, coarse_step
from powerkit.cells.fill import (
    NO_FILL,
    FillPolicy,
    SeriesCoverage,
)
from powerkit.cells.grid import SeriesCells
from powerkit.core.errors import BadInputError, option
from powerkit.engine import LOCAL, Engine, map_units
from powerkit.trace.arguments import MAX_MEMBER_COUNT
from powerkit.trace.model import Trace
from powerkit.trace.semantics import resolved_semantics


@dataclass(frozen=True)
class FleetMember:
    """One trace of a fleet as the fleet's documents list it (``members``).

    Attributes:
        path: where it was read from (a file, a dataset folder, a Prometheus address).
        count: how many times the fleet repeats it (``path:count``).
        gpus: its GPU series (each repetition adds as many members).
        power_semantics: what its power column is (``instant``, ``average_1s`` ...;
            ``unknown`` in a document written before members carried it).
    """

    path: str
    count: int
    gpus: int
    power_semantics: str = "unknown"


@dataclass
class Member:
    row: int  # the member's series in the spool (a trace's series repeated by path:count share)
    cells: int
    has_missing: bool
    nameplate_w: float
    trace: int = 0  # which of the traces given it comes from


class Spool:
    """Members' cells on disk, one row per distinct series: float32 cell means (0 where
    missing), then one byte per cell, 1 where missing. Read back with pread, a row at a time,
    so memory holds one member, not the fleet."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile(prefix="powerkit-fleet-")  # noqa: SIM115 - close()
        self.rows: list[tuple[int, int]] = []  # (offset, cells)
        self.size = 0

    def add(self, values: np.ndarray, missing: np.ndarray | None) -> int:
        data = values.astype(np.float32).tobytes()
        data += (
            np.zeros(values.size, np.uint8) if missing is None else missing.astype(np.uint8)
        ).tobytes()
        os.pwrite(self.file.fileno(), data, self.size)
        self.rows.append((self.size, values.size))
        self.size += len(data)
        return len(self.rows) - 1

    def read(
        self, row: int, horizon: int, with_missing: bool
    ) -> tuple[np.ndarray, np.ndarray | None]:
        offset, cells = self.rows[row]
        values = np.frombuffer(os.pread(self.file.fileno(), 4 * horizon, offset), np.float32)
        if not with_missing:
            return values, None
        raw = os.pread(self.file.fileno(), horizon, offset + 4 * cells)
        return values, np.frombuffer(raw, np.uint8).view(bool)

    def read_range(self, row: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Cells ``lo`` to ``hi`` of one row, and where they are missing."""
        offset, cells = self.rows[row]
        values = np.frombuffer(
            os.pread(self.file.fileno(), 4 * (hi - lo), offset + 4 * lo), np.float32
        )
        raw = os.pread(self.file.fileno(), hi - lo, offset + 4 * cells + lo)
        return values, np.frombuffer(raw, np.uint8).view(bool)

    def close(self) -> None:
        self.file.close()


@dataclass
class _Cells:
    """One series' cells as a fleet member needs them (what a Ray task sends back)."""

    host: str
    gpu: int
    values: np.ndarray  # float32
    missing: np.ndarray | None
    coverage: SeriesCoverage
    coarse_s: float | None = None  # sampled more coarsely than the grid: refused, with the rest


def _member_cells(origin: str, grid_s: float, acc: list[_Cells], s: SeriesCells) -> None:
    """Check one series on the grid and keep what composition needs (float32 cells)."""
    step = coarse_step(s, grid_s)
    if step is not None:
        acc.append(_Cells(s.host, s.gpu, np.empty(0, np.float32), None, s.coverage(origin), step))
        return
    missing = None if s.present.all() else ~s.present
    acc.append(_Cells(s.host, s.gpu, s.values.astype(np.float32), missing, s.coverage(origin)))


def _members(
    traces: list[tuple[Trace, int]],
    grid_s: float,
    nameplate_w: float | None,
    fill: FillPolicy,
    spool: Spool,
    engine: Engine = LOCAL,
    nameplate_required: bool = True,
) -> tuple[list[Member], list[FleetMember], list[SeriesCoverage]]:
    """Every member, its cells spooled as each series (or, on Ray, each unit's series)
    arrives: memory holds a series or a unit, not the fleet."""
    members: list[Member] = []
    described: list[FleetMember] = []
    coverage: list[SeriesCoverage] = []
    coarse: list[tuple[str, int, float]] = []
    for index, (trace, count) in enumerate(traces):
        if not 1 <= count <= MAX_MEMBER_COUNT:
            raise BadInputError(
                f"{trace.origin}: a member count must be from 1 to {MAX_MEMBER_COUNT:,}"
            )
        own: list[Member] = []

        def spooled(
            cells: list[_Cells], trace: Trace = trace, own: list[Member] = own, index: int = index
        ) -> None:
            for c in cells:
                if c.coarse_s is not None:
                    coarse.append((c.host, c.gpu, c.coarse_s))
                    continue
                coverage.append(c.coverage)
                plate = (
                    nameplate_w or trace.meta.nameplate_w(c.host, c.gpu) or trace.meta.nameplate_w()
                )
                if plate is None and not nameplate_required:
                    plate = math.nan  # composition only: the caller uses no fraction of it
                if plate is None:
                    raise BadInputError(
                        f"{trace.origin}: nameplate of host={c.host} gpu={c.gpu} is unknown "
                        f"(give {option('nameplate')})"
                    )
                own.append(
                    Member(
                        spool.add(c.values, c.missing),
                        c.values.size,
                        c.missing is not None,
                        plate,
                        index,
                    )
                )
            cells.clear()

        add = functools.partial(_member_cells, trace.origin, grid_s)
        step: Callable[[list[_Cells], SeriesCells], None] = add
        if engine.kind == "local":  # spool each series as it streams past

            def step(
                acc: list[_Cells], s: SeriesCells, add: Any = add, spooled: Any = spooled
            ) -> None:
                add(acc, s)
                spooled(acc)

        # on Ray, each unit's cells come back from its task and are spooled in unit order
        for part in map_units(trace, list, step, engine=engine, grid_s=grid_s, fill=fill):
            spooled(part)
        members.extend(own * count)
        described.append(FleetMember(trace.origin, count, len(own), resolved_semantics(trace.meta)))
    if coarse:
        raise coarse_error(coarse, grid_s)
    if not members:
        raise BadInputError("no members: give at least one trace")
    return members, described, coverage


class FleetMembers:
    """A fleet's members on a grid, each series spooled to disk as it streams past (memory
    holds a series, not the fleet): what ``oversub`` composes and ``cap`` replays. Use it as a
    context (the spool is a temporary file)."""

    def __init__(
        self,
        traces: list[tuple[Trace, int]],
        grid_s: float,
        nameplate_w: float | None = None,
        fill: FillPolicy = NO_FILL,
        engine: Engine = LOCAL,
        nameplate_required: bool = True,
    ) -> None:
        self.grid_s = grid_s
        self.spool = Spool()
        try:
            self.members, self.described, self.coverage = _members(
                traces, grid_s, nameplate_w, fill, self.spool, engine, nameplate_required
            )
        except BaseException:
            self.spool.close()
            raise
        self.horizon = min(m.cells for m in self.members)
        self.nameplate_w = float(sum(m.nameplate_w for m in self.members))

    def __enter__(self) -> FleetMembers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.spool.close()

    def offsets(self, compose: str, seed: int = 0) -> np.ndarray:
        """Each member's circular shift for one composition (``compose``; random: ``seed``)."""
        if compose not in COMPOSE:
            raise BadInputError(f"{option('compose')} {compose!r}: one of {', '.join(COMPOSE)}")
        return compose_offsets(
            compose, len(self.members), self.horizon, np.random.default_rng(seed)
        )

    def block(self, offsets: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Cells ``start`` to ``stop`` of the composed fleet, a row per member (W, float64),
        and where each is missing: member i's cell j is its series' cell (j - offset) mod the
        horizon, as :func:`compose_fleet` shifts it."""
        n = stop - start
        power = np.empty((len(self.members), n))
        missing = np.zeros((len(self.members), n), dtype=bool)
        seen: dict[tuple[int, int], int] = {}  # (series, first cell) -> a member read already
        for i, m in enumerate(self.members):
            lo = (start - int(offsets[i])) % self.horizon
            twin = seen.setdefault((m.row, lo), i)  # (path:count repeats a series)
            if twin != i:
                power[i], missing[i] = power[twin], missing[twin]
                continue
            first = min(n, self.horizon - lo)
            values, gone = self.spool.read_range(m.row, lo, lo + first)
            power[i, :first], missing[i, :first] = values, gone
            if first < n:  # (wrapped past the horizon's end)
                values, gone = self.spool.read_range(m.row, 0, n - first)
                power[i, first:], missing[i, first:] = values, gone
        return power, missing


COMPOSE = ("aligned", "random", "staggered")


def compose_offsets(
    compose: str, members: int, horizon: int, rng: np.random.Generator
) -> np.ndarray:
    if compose == "aligned":
        return np.zeros(members, dtype=np.int64)
    if compose == "staggered":
        return (np.arange(members) * horizon) // members
    return rng.integers(0, horizon, members)
