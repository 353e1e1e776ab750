"""Where a per-series reduction runs: here (``local``), or as tasks on a Ray cluster (``ray``).

Every analysis that scales with the fleet is a reduction over GPU series: ``start()`` makes an
accumulator, ``add(acc, series)`` takes one series (raw samples, or cells on a grid), and
``merge(a, b)`` combines two accumulators. The local engine runs ``add`` over every series in
(host, gpu) order. The Ray engine splits the trace into *units* — the files of one host (a
dataset's ``host=`` partition), or one file — so that no series spans two units; consecutive
units are batched into two tasks per CPU of the cluster; each Ray task opens only its units'
files and runs the very same ``reduce_raw``/``reduce_series`` with the same ``start`` and
``add``; the driver merges the tasks' accumulators in order. One
implementation of the arithmetic, two drivers: integers come out equal, floats equal up to the
order of a few sums.

Without ``address``, ``ray`` starts a Ray instance on this machine for the command; with one
(``auto``, ``HOST:PORT``, ``ray://HOST:10001``), it joins that cluster. Ray is an optional
extra: ``pip install 'powerkit[ray]'``.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.core.errors import BadInputError, option
from powerkit.trace.model import Trace

__all__ = ["ENGINES", "LOCAL", "Engine", "batches", "map_units", "reduce", "units_of"]

ENGINES = ("local", "ray")
A = TypeVar("A")


@dataclass(frozen=True)
class Engine:
    """``local`` (this process) or ``ray`` (``address``: None starts a local instance)."""

    kind: str = "local"
    address: str | None = None
    #: called after each unit is merged with (done, units) — a progress display
    on_unit: Callable[[int, int], None] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ENGINES:
            raise BadInputError(f"{option('engine')} {self.kind!r}: one of {', '.join(ENGINES)}")
        if self.address is not None and self.kind != "ray":
            raise BadInputError(f"{option('address')} goes with {option('engine')} ray")
        if self.address is not None:
            _check_address(self.address)


LOCAL = Engine()


def units_of(trace: Trace) -> list[tuple[Path, ...]]:
    """The trace's files grouped so that no GPU series spans two groups: a hive dataset's
    files by ``host=`` partition, other files one by one — then any groups that share a
    (host, gpu) series (from the files' indexes) merged. In storage order."""
    from powerkit.trace.dataset import partition_of
    from powerkit.trace.parquet import file_series

    if not trace.files:
        raise BadInputError(
            f"{trace.origin}: {option('engine')} ray reads Parquet files (a dataset folder or "
            "canonical "
            "files); import the log first"
        )
    root_dir = Path(trace.origin)
    hive = root_dir.is_dir()
    groups: dict[str, list[Path]] = {}
    for f in trace.files:
        host = partition_of(f.relative_to(root_dir)).get("host") if hive else None
        groups.setdefault(f"host={host}" if host else f"file:{f}", []).append(f)
    units = [tuple(files) for files in groups.values()]
    # merge units that share a series (e.g. one host's GPUs spread over flat files)
    owner: dict[tuple[str, int], int] = {}
    parent = list(range(len(units)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, files in enumerate(units):
        for f in files:
            for series in file_series(f):
                j = owner.setdefault(series, i)
                if root(j) != root(i):
                    parent[root(i)] = root(j)
    merged: dict[int, list[Path]] = {}
    for i, files in enumerate(units):
        merged.setdefault(root(i), []).extend(files)
    return [tuple(sorted(files)) for files in merged.values()]


def _sub_trace(parent: Trace, files: tuple[Path, ...]) -> Trace:
    """The part of ``parent`` in ``files``: same metadata, slice and host filter."""
    from powerkit.trace.parquet import read_parquet_files

    sub = read_parquet_files(list(files), origin=parent.origin)
    sub.meta = parent.meta
    if parent.hosts is not None:
        sub.keep_hosts(parent.hosts)
    if parent.slice_us != (None, None):
        sub.cut(*parent.slice_us)
    return sub


def _run_unit(
    parent: Trace,
    files: tuple[Path, ...],
    start: Callable[[], Any],
    add: Callable[[Any, Any], None],
    grid_s: float | None,
    fill: FillPolicy,
    energy: bool,
    columns: tuple[str, ...],
    summarize: Callable[[Any], Any] | None = None,
) -> Any:
    """One unit's reduction (what a Ray task runs): the same code the local engine runs."""
    from powerkit.cells.grid import reduce_raw, reduce_series

    trace = parent if not files else _sub_trace(parent, files)
    if grid_s is None:
        return reduce_raw(trace, start, add, energy=energy, columns=columns)
    return reduce_series(trace, grid_s, start, add, fill, columns=columns, summarize=summarize)


def map_units(
    trace: Trace,
    start: Callable[[], A],
    add: Callable[[A, Any], None],
    *,
    engine: Engine = LOCAL,
    grid_s: float | None = None,
    fill: FillPolicy = NO_FILL,
    energy: bool = False,
    columns: tuple[str, ...] = (),
    summarize: Callable[[Any], Any] | None = None,
) -> Iterator[A]:
    """Each unit's accumulator after ``add`` over its series (raw samples, or cells on
    ``grid_s`` after ``fill``, each cell series carrying ``summarize`` of its samples), in
    unit order; the local engine's one unit is the whole trace."""
    if engine.kind == "local":
        yield _run_unit(trace, (), start, add, grid_s, fill, energy, columns, summarize)
        return
    units = units_of(trace)
    for k, (part, tasks) in enumerate(
        _ray_map(engine, trace, units, start, add, grid_s, fill, energy, columns, summarize)
    ):
        yield part
        if engine.on_unit is not None:
            engine.on_unit(k + 1, tasks)


def reduce(
    trace: Trace,
    start: Callable[[], A],
    add: Callable[[A, Any], None],
    merge: Callable[[A, A], A],
    *,
    engine: Engine = LOCAL,
    grid_s: float | None = None,
    fill: FillPolicy = NO_FILL,
    energy: bool = False,
    columns: tuple[str, ...] = (),
    summarize: Callable[[Any], Any] | None = None,
) -> A:
    """``add`` over every series of ``trace`` on ``engine``, the units' accumulators merged
    in order; see the module docstring."""
    acc: A | None = None
    for part in map_units(
        trace,
        start,
        add,
        engine=engine,
        grid_s=grid_s,
        fill=fill,
        energy=energy,
        columns=columns,
        summarize=summarize,
    ):
        acc = part if acc is None else merge(acc, part)
    assert acc is not None
    return acc


def batches(units: list[tuple[Path, ...]], tasks: int) -> list[tuple[Path, ...]]:
    """Consecutive units joined into at most ``tasks`` groups of about equal bytes (a task per
    unit would spend more on starting than on reading when units are small)."""
    sizes = [sum(f.stat().st_size for f in unit) for unit in units]
    share = sum(sizes) / max(1, tasks)
    groups: list[list[Path]] = [[]]
    filled = 0.0
    for unit, size in zip(units, sizes, strict=True):
        if groups[-1] and filled + size / 2 > share and len(groups) < tasks:
            groups.append([])
            filled = 0.0
        groups[-1].extend(unit)
        filled += size
    return [tuple(g) for g in groups]


def _ray_map(
    engine: Engine, trace: Trace, units: list[tuple[Path, ...]], *args: Any
) -> Iterator[tuple[Any, int]]:
    """Each task's result and the number of tasks, in unit order: consecutive units batched
    into two tasks per CPU of the cluster, run in parallel (Ray retries a task whose worker
    dies)."""
    ray = _ray()
    # Ray prints cluster events (a worker that died, a task retried) to stdout, which is the
    # command's answer: they go to stderr while the engine runs.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            _connect(ray, engine.address or "local")
            task = ray.remote(max_retries=3, retry_exceptions=False)(_run_unit)
            shared = ray.put(dataclasses.replace(trace, table_=None))
            cpus = int(ray.cluster_resources().get("CPU", 1))
            groups = batches(units, 2 * max(1, cpus))
            refs = [task.remote(shared, files, *args) for files in groups]
            for ref in refs:
                yield ray.get(ref), len(refs)
        except Exception as exc:
            cause = getattr(exc, "cause", None)  # a task's own error, inside Ray's wrapper
            if isinstance(cause, BadInputError):
                raise type(cause)(str(cause)) from None
            if isinstance(exc, BadInputError):
                raise
            raise BadInputError(f"the Ray engine failed: {type(exc).__name__}: {exc}") from None


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BadInputError(
            f"{option('engine')} ray needs Ray: pip install 'powerkit[ray]' (or pip install ray)"
        ) from None
    return ray


_session: list[str] = []  # the address this process joined (a command's reductions share it)
_leave_registered: list[bool] = []


def _leave(ray: Any) -> None:
    """Leave the cluster at exit, its parting messages kept off the command's output."""
    with (
        open(os.devnull, "w") as sink,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
    ):
        ray.shutdown()


def _check_address(address: str) -> tuple[str, int] | None:
    """Refuse an ``--address`` that names no cluster (empty, or a HOST:PORT whose port is not
    a number); return (host, port) for one to probe, None for ``auto``."""
    text = address.strip()
    if not text:
        raise BadInputError(f"{option('address')} '': give auto, HOST:PORT or ray://HOST:10001")
    if text == "auto":
        return None
    rest = text.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInputError(
            f"{option('address')} {address!r}: give auto, HOST:PORT or ray://HOST:10001"
        )
    return host.strip("[]"), int(port)


#: how long joining a cluster waits for its address to answer before it is refused
PROBE_S = 5.0


def _probe(address: str) -> None:
    """Refuse, within PROBE_S, an address where nothing listens: Ray itself would keep
    retrying for minutes."""
    import socket

    target = _check_address(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=PROBE_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise BadInputError(
            f"{option('engine')} ray: nothing answers at {address} ({reason}); is the Ray head "
            "running?"
        ) from None


def _connect(ray: Any, address: str) -> None:
    """Join ``address`` (``local``: a new instance for this process, even where a cluster
    runs) unless this process is joined to it already; Ray leaves it when the process ends."""
    if ray.is_initialized() and _session == [address]:
        return
    if ray.is_initialized():
        ray.shutdown()
    _session.clear()
    options: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address == "local":
        options["include_dashboard"] = False
    else:
        _probe(address)
    try:
        ray.init(address=address, **options)
        _session.append(address)
        if len(_session) == 1 and not _leave_registered:
            atexit.register(_leave, ray)
            _leave_registered.append(True)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = "a local Ray instance" if address == "local" else address
        raise BadInputError(
            f"{option('engine')} ray: cannot start or join {where} ({exc})"
        ) from None
