"""The cap journal: every GPU power limit (and locked clock) powerkit changes is written down
before the change.

A handler restores limits on exit, errors and signals (:class:`powerkit.sweep.caps.PowerCaps`),
but no handler sees SIGKILL or a power loss. So before the first change, the original limit of
each GPU goes into a small JSON journal on the host (with the changing process's pid); a clean
restore removes the entries; entries whose process is gone are limits left behind, which
``powerkit restore`` puts back and which the next cap-setting run warns about. Locked SM clocks
(a sweep's GPU-frequency axis) are journaled the same way, with kind ``locked_clocks``: restoring
them is resetting them to the driver's default (NVML cannot read a lock to put it back).

The journal lives in ``$POWERKIT_STATE_DIR`` (default ``$XDG_STATE_HOME/powerkit``, else
``~/.local/state/powerkit``), one file per host: ``caps-HOST.json``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from powerkit.errors import BadInputError
from powerkit.outputs import write_text

__all__ = [
    "CLOCKS",
    "LIMIT",
    "CapEntry",
    "add_entries",
    "journal_path",
    "read_entries",
    "remove_entries",
    "stale",
]


LIMIT, CLOCKS = "power_limit", "locked_clocks"


@dataclass(frozen=True)
class CapEntry:
    """One GPU whose power limit (or SM clock) a powerkit process changed: what to put back."""

    pid: int
    gpu: int
    uuid: str | None
    original_w: float  # the limit to put back (0 for locked clocks: they are reset)
    since: float  # epoch s of the first change
    kind: str = LIMIT


def journal_path() -> Path:
    """Return this host's journal file."""
    base = os.environ.get("POWERKIT_STATE_DIR")
    if not base:
        xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        base = str(Path(xdg) / "powerkit")
    return Path(base) / f"caps-{socket.gethostname()}.json"


@contextlib.contextmanager
def _locked() -> Iterator[Path]:
    path = journal_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # short: a read-modify-write of a small file
        yield path
    finally:
        os.close(fd)


def _read(path: Path) -> list[CapEntry]:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise BadInputError(f"{path}: unreadable cap journal ({exc})") from None
    try:
        return [CapEntry(**e) for e in raw["entries"]]
    except (KeyError, TypeError) as exc:
        raise BadInputError(f"{path}: not a powerkit cap journal ({exc})") from None


def _write(path: Path, entries: list[CapEntry]) -> None:
    if entries:
        write_text(path, json.dumps({"entries": [asdict(e) for e in entries]}, indent=1) + "\n")
    else:
        path.unlink(missing_ok=True)


def read_entries() -> list[CapEntry]:
    """Return every entry of this host's journal."""
    with _locked() as path:
        return _read(path)


def add_entries(originals: list[tuple[int, str | None, float]], kind: str = LIMIT) -> None:
    """Write down (gpu, uuid, original W) for this process before it changes any limit (or,
    with ``kind`` CLOCKS, locks any clock).

    A GPU already in the journal keeps its first original: a limit left behind by a killed run
    is not the original of the next one.
    """
    now = time.time()
    with _locked() as path:
        entries = _read(path)
        known = {(e.gpu, e.uuid, e.kind) for e in entries}
        entries += [
            CapEntry(os.getpid(), gpu, uuid, watts, now, kind)
            for gpu, uuid, watts in originals
            if (gpu, uuid, kind) not in known
        ]
        _write(path, entries)


def remove_entries(
    gpus: list[int] | None = None, pid: int | None = None, kind: str | None = None
) -> None:
    """Remove the entries of ``pid`` (default: this process), of ``gpus`` and ``kind`` when
    given."""
    owner = os.getpid() if pid is None else pid

    def mine(e: CapEntry) -> bool:
        return e.pid == owner and (gpus is None or e.gpu in gpus) and kind in (None, e.kind)

    with _locked() as path:
        _write(path, [e for e in _read(path) if not mine(e)])


def alive(pid: int) -> bool:
    """Return True when process ``pid`` still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale() -> list[CapEntry]:
    """Return the entries whose process is gone: limits nobody will restore."""
    return [e for e in read_entries() if not alive(e.pid)]
