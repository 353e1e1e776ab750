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
import math
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from powerkit.core.errors import BadInputError
from powerkit.core.outputs import write_text

__all__ = [
    "CHANGED",
    "CLOCKS",
    "KINDS",
    "LIMIT",
    "SMOOTHING",
    "CapEntry",
    "GpuHeldError",
    "alive",
    "claim",
    "journal_path",
    "lock_dir",
    "read_checked",
    "read_entries",
    "remove_entries",
    "stale",
]


LIMIT, CLOCKS, SMOOTHING = "power_limit", "locked_clocks", "power_smoothing"
#: what each kind of entry changed, as a message names it
CHANGED = {LIMIT: "power limit", CLOCKS: "SM clock lock", SMOOTHING: "power smoothing"}


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


KINDS = (LIMIT, CLOCKS, SMOOTHING)
#: the vendors whose library restore opens (powerkit.telemetry.gpu.VENDORS)
_VENDORS = ("nvidia", "amd")


def _read_raw(path: Path) -> list[Any]:
    """The journal's entries as written (each checked by :func:`_entry` where it is used)."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise BadInputError(f"{path}: unreadable cap journal ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        raise BadInputError(f"{path}: not a powerkit cap journal (no entries list)")
    return list(raw["entries"])


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _entry(raw: Any) -> CapEntry:
    """One journal entry, its every field checked (ValueError names the first wrong one): a
    tampered or damaged entry is never applied to a GPU."""
    if not isinstance(raw, dict):
        raise ValueError("not an object")
    names = {f.name for f in fields(CapEntry)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    try:
        entry = CapEntry(**raw)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    checks = [
        ("pid", isinstance(entry.pid, int) and not isinstance(entry.pid, bool) and entry.pid > 0),
        ("gpu", isinstance(entry.gpu, int) and not isinstance(entry.gpu, bool) and entry.gpu >= 0),
        ("uuid", entry.uuid is None or isinstance(entry.uuid, str)),
        ("original_w", _number(entry.original_w) and 0 <= entry.original_w <= 100_000),
        ("since", _number(entry.since)),
        ("kind", entry.kind in KINDS),
        ("command", isinstance(entry.command, str)),
        ("started", entry.started is None or isinstance(entry.started, int)),
        ("vendor", entry.vendor in _VENDORS),
        ("settings", entry.settings is None or isinstance(entry.settings, dict)),
    ]
    wrong = next((name for name, ok in checks if not ok), None)
    if wrong is not None:
        raise ValueError(f"{wrong} {getattr(entry, wrong)!r} is not valid")
    return entry


def _read(path: Path) -> list[CapEntry]:
    """Every entry, or a one-line error naming the first that is not valid (a run never
    rewrites a journal it cannot read whole)."""
    entries = []
    for n, raw in enumerate(_read_raw(path), start=1):
        try:
            entries.append(_entry(raw))
        except ValueError as exc:
            raise BadInputError(
                f"{path}: entry {n} is not valid ({exc}); `powerkit restore` puts back the "
                "valid entries and names the others, which must be removed by hand"
            ) from None
    return entries


def _write(path: Path, entries: list[CapEntry], invalid: list[Any] | None = None) -> None:
    rows = [*(invalid or []), *(asdict(e) for e in entries)]
    if rows:
        write_text(path, json.dumps({"entries": rows}, indent=1) + "\n")
    else:
        path.unlink(missing_ok=True)


def read_checked() -> tuple[list[CapEntry], list[str]]:
    """This host's journal: its valid entries, and a line for each entry that is not."""
    with _locked() as path:
        entries, problems = [], []
        for n, raw in enumerate(_read_raw(path), start=1):
            try:
                entries.append(_entry(raw))
            except ValueError as exc:
                problems.append(f"entry {n}: {exc}")
        return entries, problems


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
                    what = CHANGED[e.kind]
                    raise GpuHeldError(
                        f"GPU {gpu} ({uuid or 'no UUID'}) is held by pid {e.pid} "
                        f"({e.command or 'a powerkit run'}), which set its {what}; wait for it "
                        "to end (or stop it, then `powerkit restore`)"
                    )
        held: list[str] = []
        try:  # the machine's lock on each GPU, whatever journal another run writes
            for gpu, uuid in gpus:
                key = _hold_gpu(gpu, uuid)
                if key is not None:
                    held.append(key)
        except GpuHeldError:
            for key in held:
                _release(key)
            raise
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


#: the machine-wide lock held on each GPU this process changed: key -> (fd, gpu, uuid)
_HELD: dict[str, tuple[int, int, str | None]] = {}


def lock_dir() -> Path:
    """Where the machine's GPU locks live: ``$POWERKIT_LOCK_DIR``, else ``/run/lock`` (or the
    temporary folder) ``/powerkit-gpus`` — one place for every user and every journal, so that
    runs with different journals (``sudo`` with and without ``-H``) never set one GPU."""
    base = os.environ.get("POWERKIT_LOCK_DIR")
    if base:
        return Path(base)
    run = Path("/run/lock")
    return (run if os.access(run, os.W_OK) else Path(tempfile.gettempdir())) / "powerkit-gpus"


def _hold_gpu(gpu: int, uuid: str | None) -> str | None:
    """Take this machine's lock on the GPU (by UUID, else index) for this process; the key,
    or None where it was held already. GpuHeldError when another process holds it."""
    key = re.sub(r"[^A-Za-z0-9._-]", "_", uuid or f"index-{gpu}")
    if key in _HELD:
        return None
    folder = lock_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            folder.chmod(0o1777)  # (every user's runs lock here; the sticky bit keeps files)
        path = folder / f"{key}.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:  # (another user's lock file: read is enough to lock)
            fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise BadInputError(f"{folder}: cannot take the GPU lock there ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise GpuHeldError(
            f"GPU {gpu} ({uuid or 'no UUID'}) is held by {holder} (its lock: {path}); wait for "
            "it to end, or stop it and `powerkit restore` with its journal"
        ) from None
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({_command()})".encode(), 0)
    _HELD[key] = (fd, gpu, uuid)
    return key


def _release(key: str) -> None:
    fd, _, _ = _HELD.pop(key)
    os.close(fd)  # (the lock goes with the descriptor)


def remove_entries(
    gpus: list[int] | None = None, pid: int | None = None, kind: str | None = None
) -> None:
    """Remove the entries of ``pid`` (default: this process), of ``gpus`` and ``kind`` when
    given."""
    owner = os.getpid() if pid is None else pid

    def mine(e: CapEntry) -> bool:
        return e.pid == owner and (gpus is None or e.gpu in gpus) and kind in (None, e.kind)

    with _locked() as path:  # (entries that are not valid are kept as they are)
        keep, invalid = [], []
        for raw in _read_raw(path):
            try:
                entry = _entry(raw)
            except ValueError:
                invalid.append(raw)
                continue
            if not mine(entry):
                keep.append(entry)
        _write(path, keep, invalid)
        if owner == os.getpid():  # the machine's lock on a GPU this process changes no more
            for key, (_, gpu, uuid) in list(_HELD.items()):
                if not any(e.pid == owner and e.same_gpu(gpu, uuid) for e in keep):
                    _release(key)


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
