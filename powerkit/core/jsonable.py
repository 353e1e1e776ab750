"""Results as plain data: what ``--json`` prints, for the library's users too."""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import Any

__all__ = ["OMIT_NONE", "to_plain"]

#: field metadata: the key is left out of the document where the value is None
OMIT_NONE = {"omit_none": True}


_AS_IS = (str, int, bool, type(None))


@functools.cache
def _fields(kind: type) -> tuple[tuple[str, str, bool], ...]:
    """A dataclass's document fields: (attribute, key, left out where None), in order."""
    return tuple(
        (f.name, f.metadata.get("key", f.name), bool(f.metadata.get("omit_none")))
        for f in dataclasses.fields(kind)
        if f.metadata.get("doc", True)
    )


def to_plain(value: Any) -> Any:
    """Return ``value`` (a result dataclass, dict, list, NumPy scalar...) as JSON-ready data:
    dataclasses become dicts, paths text, and NaN or infinite floats None, as ``--json`` does.

    A dataclass field's metadata may rename its key (``{"key": "pass"}``, for a name Python
    reserves), keep it out of the document (``{"doc": False}``: arrays held for figures), or
    leave it out where it is None (:data:`OMIT_NONE`: a key some documents hold)."""
    kind = type(value)
    if kind in _AS_IS:  # (the common case first: a large document is mostly these)
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for name, key, omit_none in _fields(kind):  # type: ignore[arg-type]
            item = getattr(value, name)
            if not (omit_none and item is None):
                out[key] = to_plain(item)
        return out
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
