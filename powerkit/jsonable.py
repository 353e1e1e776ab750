"""Results as plain data: what ``--json`` prints, for the library's users too."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

__all__ = ["to_plain"]


def to_plain(value: Any) -> Any:
    """Return ``value`` (a result dataclass, dict, list, NumPy scalar...) as JSON-ready data:
    dataclasses become dicts, paths text, and NaN or infinite floats None, as ``--json`` does."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: to_plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # NumPy scalars
        return value.item()
    return value
