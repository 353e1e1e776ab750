"""The cap journal: every GPU power limit (and locked clock) powerkit changes is written down
before the change.

A handler restores limits on exit, errors and signals (:class:`powerkit.actuation.caps.PowerCaps`),
but no handler sees SIGKILL or a power loss. So before the first change, the original limit of
each GPU goes into a small JSON journal on the host (with the changing process's pid); a clean
restore removes the entries; entries whose process is gone are limits left behind, which
``powerkit restore`` puts back and which the next cap-setting run warns about. Locked SM clocks
(a sweep's GPU-frequency axis) are journaled the same way, with kind ``locked_clocks``: restoring
them is resetting them to the driver's default (NVML cannot read a lock to put it back). A power
smoothing setting (``powerkit smoothing set``) is journaled with kind ``power_smoothing``, the
original setting in ``settings``. Each entry names its GPU's ``vendor``, whose library
``restore`` opens.

The journal is also the lock on each GPU's limit and clocks. :func:`claim` writes a run's entries
and refuses, under the journal's file lock, a GPU (by UUID, else index) whose entry belongs to
another process that still runs, naming its pid and command: two runs never set the same GPU,
so neither restores a limit in the middle of the other's measurement, nor takes the other's
cap for an original. An entry whose process is gone (SIGKILL, a power loss) is taken over with
its original: whatever order runs end in, the limit put back is the one before the first run.
A process is the same one when its pid and its start time (``/proc/PID/stat``) both match, so
a reused pid does not hold a GPU forever.

The journal lives in ``$POWERKIT_STATE_DIR`` (default ``$XDG_STATE_HOME/powerkit``, else
``~/.local/state/powerkit``), one file per host: ``caps-HOST.json``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from powerkit.core.errors import BadInputError
from powerkit.core.outputs import write_text

__all__ = [
    "CLOCKS",
    "LIMIT",
    "SMOOTHING",
    "CapEntry",
    "GpuHeldError",
    "alive",
    "claim",
    "journal_path",
    "read_entries",
    "remove_entries",
    "stale",
]


LIMIT, CLOCKS, SMOOTHING = "power_limit", "locked_clocks", "power_smoothing"


@dataclass(frozen=True)
class CapEntry:
    """One GPU whose power limit (or SM clock) a powerkit process changed: what to put back."""

    pid: int
    gpu: int
    uuid: str | None
    original_w: float  # the limit to put back (0 for locked clocks: they are reset)
    since: float  # epoch s of the first change
    kind: str = LIMIT
    #: the holder's command line (shown when another run is refused) and start time
    command: str = ""
    started: int | None = None
    #: whose library sets it back (powerkit.telemetry.gpu.VENDORS); journals written before
    #: AMD GPUs were supported hold NVIDIA GPUs only
    vendor: str = "nvidia"
    #: the setting to put back where one number does not say it (power smoothing's)
    settings: dict[str, Any] | None = None

    def same_gpu(self, gpu: int, uuid: str | None) -> bool:
        """True when this entry is of the GPU (index, UUID): by UUID where both have one."""
        if self.uuid is not None and uuid is not None:
            return self.uuid == uuid
        return self.gpu == gpu


class GpuHeldError(BadInputError):
    """A GPU's limit or clocks are held by another running powerkit process."""


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rpartition(")")[2].split()[19])
    except (IndexError, ValueError):
        return None


def _command() -> str:
    text = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))
    return text[:200]


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
    except (KeyError, TypeError, AttributeError) as exc:
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


def claim(
    gpus: list[tuple[int, str | None]],
    read_original: Callable[[int], float | None],
    kind: str = LIMIT,
    *,
    vendor: str = "nvidia",
    settings: Callable[[int], dict[str, Any]] | None = None,
) -> tuple[list[float | None], list[CapEntry]]:
    """Take ``gpus`` (index, UUID) for this process's changes of ``kind``; return the original
    to restore for each (None where ``read_original`` knows none), and the entries of gone
    processes taken over.

    Refused (GpuHeldError, nothing written) when another running process holds any of them,
    of either kind. An entry of a process that is gone is taken over, its original kept; a GPU
    without one gets its original from ``read_original(index)``, read under the lock.
    """
    me, started, command, now = os.getpid(), _start_time(os.getpid()), _command(), time.time()
    with _locked() as path:
        entries = _read(path)
        for gpu, uuid in gpus:
            for e in entries:
                if e.same_gpu(gpu, uuid) and e.pid != me and alive(e.pid, e.started):
                    what = "power limit" if e.kind == LIMIT else "SM clock lock"
                    raise GpuHeldError(
                        f"GPU {gpu} ({uuid or 'no UUID'}) is held by pid {e.pid} "
                        f"({e.command or 'a powerkit run'}), which set its {what}; wait for it "
                        "to end (or stop it, then `powerkit restore`)"
                    )
        # this kind's entries of these GPUs are re-owned below (ours, or a gone process's)
        ours = [e.kind == kind and any(e.same_gpu(g, u) for g, u in gpus) for e in entries]
        taken = [e for e, o in zip(entries, ours, strict=True) if o and e.pid != me]
        kept = [e for e, o in zip(entries, ours, strict=True) if not o]
        originals: list[float | None] = []
        claimed: list[CapEntry] = []
        for gpu, uuid in gpus:
            old = next((e for e in entries if e.kind == kind and e.same_gpu(gpu, uuid)), None)
            value = old.original_w if old is not None else read_original(gpu)
            originals.append(value)
            if value is None:
                continue
            kept_settings = old.settings if old is not None else None
            if kept_settings is None and settings is not None:
                kept_settings = settings(gpu)
            claimed.append(
                CapEntry(
                    me,
                    gpu,
                    uuid,
                    value,
                    old.since if old else now,
                    kind,
                    command,
                    started,
                    vendor,
                    kept_settings,
                )
            )
        _write(path, kept + claimed)
    return originals, taken


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


def alive(pid: int, started: int | None = None) -> bool:
    """Return True when process ``pid`` still runs (and, given its start time, is the same
    process: a pid the system has handed to another process is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if started is not None:
        now = _start_time(pid)
        return now is None or now == started
    return True


def stale() -> list[CapEntry]:
    """Return the entries whose process is gone: limits nobody will restore."""
    return [e for e in read_entries() if not alive(e.pid, e.started)]
