"""The knob channel between powerkit and a running workload (``sweep/control --actuator``).

powerkit writes a small JSON file, replacing it atomically, with a version counter::

    {"version": 7, "knobs": {"group_size": 8, "concurrency": 4}, "updated": 1767225600.0}

The workload polls it (between steps, or every few seconds) with :class:`Knobs`::

    from powerkit.actuator import Knobs
    knobs = Knobs("knobs.json")
    if knobs.poll():                       # True when powerkit wrote a new version
        engine.set_concurrency(knobs.get("concurrency", 8))
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["KnobChannel", "Knobs"]


class Knobs:
    """Workload side: read the latest knob settings when their version changes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path, self.version = Path(path), -1
        self.values: dict[str, Any] = {}

    def poll(self) -> bool:
        """Return True when a new version of the knobs has been read."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return False  # not written yet: keep the current settings
        if not isinstance(data, dict) or data.get("version", -1) == self.version:
            return False
        self.version, self.values = data["version"], dict(data.get("knobs", {}))
        return True

    def get(self, name: str, default: Any = None) -> Any:
        """Return the current value of one knob."""
        return self.values.get(name, default)


class KnobChannel:
    """powerkit side: write knob settings atomically, each with the next version number."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.version = 0
        # Continue the counter of an existing channel, so readers see the next write as new.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.version = int(json.loads(self.path.read_text()).get("version", 0))

    def write(self, knobs: dict[str, Any]) -> int:
        """Publish ``knobs``; return the version written."""
        self.version += 1
        doc = {"version": self.version, "knobs": knobs, "updated": time.time()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh)
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.path)
        return self.version
