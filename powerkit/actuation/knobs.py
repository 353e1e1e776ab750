"""The knob channel between powerkit and a running workload (``sweep/control --actuator``).

powerkit writes a small JSON file, replacing it atomically, with a version counter::

    {"version": 7, "knobs": {"group_size": 8, "concurrency": 4}, "updated": 1767225600.0}

The workload polls it (between steps, or every few seconds) with :class:`Knobs`::

    from powerkit.actuation.knobs import Knobs
    knobs = Knobs("knobs.json")
    if knobs.poll():                       # True when powerkit wrote a new version
        engine.set_concurrency(knobs.get("concurrency", 8))
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from powerkit.core.errors import BadInputError, PowerkitError
from powerkit.core.outputs import write_text

__all__ = ["KnobChannel", "Knobs"]


#: the largest knob file a workload reads (a document of a few knobs is under 1 KB)
KNOB_FILE_BYTES = 1 << 20


class Knobs:
    """Workload side: read the latest knob settings when their version changes.

    A file that cannot be read as a knob document (being replaced, truncated, hand-edited)
    never raises: the last good settings stay, and ``error`` says what was wrong.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path, self.version = Path(path), -1
        self.values: dict[str, Any] = {}
        #: why the last poll could not read the file (None when it could, or it is not there)
        self.error: str | None = None

    def poll(self) -> bool:
        """Return True when a new version of the knobs has been read."""
        from powerkit.core.inputs import read_text_input

        if not self.path.exists():
            return False  # not written yet: keep the current settings
        try:  # (a regular file of at most 1 MiB: never a pipe or /dev/zero read whole)
            data = json.loads(read_text_input(self.path, "knob file", KNOB_FILE_BYTES))
        except (PowerkitError, OSError, ValueError) as exc:
            self.error = f"{self.path}: unreadable knob file ({exc}); keeping the last settings"
            return False
        version = data.get("version") if isinstance(data, dict) else None
        knobs = data.get("knobs") if isinstance(data, dict) else None
        if not isinstance(version, int) or not isinstance(knobs, dict):
            self.error = f"{self.path}: not a knob document; keeping the last settings"
            return False
        self.error = None
        if version == self.version:
            return False
        self.version, self.values = version, dict(knobs)
        return True

    def get(self, name: str, default: Any = None) -> Any:
        """Return the current value of one knob."""
        return self.values.get(name, default)


class KnobChannel:
    """powerkit side: write knob settings atomically, each with the next version number.

    One writer at a time: the channel holds an exclusive lock on ``PATH.lock`` from its
    creation until :meth:`close` (or the end of the process, however it ends), and a second
    writer is refused with one line. Without it, two writers would both write version n + 1 and
    the workload would never see the second update.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.version = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = self._acquire(self.path.with_name(self.path.name + ".lock"))
        # Continue the counter of an existing channel, so readers see the next write as new.
        with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
            self.version = int(json.loads(self.path.read_text()).get("version", 0))

    @staticmethod
    def _acquire(lock: Path) -> int:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise BadInputError(
                f"{lock.with_suffix('')}: another powerkit process{who} writes these knobs; "
                "one writer at a time"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return fd

    def write(self, knobs: dict[str, Any]) -> int:
        """Publish ``knobs``; return the version written."""
        if self._lock < 0:
            raise BadInputError(f"{self.path}: the knob channel is closed")
        self.version += 1
        doc = {"version": self.version, "knobs": knobs, "updated": time.time()}
        write_text(self.path, json.dumps(doc))
        return self.version

    def close(self) -> None:
        """Release the writer's lock."""
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1

    def __enter__(self) -> KnobChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
