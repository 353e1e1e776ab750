"""Result documents: what a command's ``--json`` is, and reading one back.

Every document a command prints (or writes, as ``bloat plan --out`` does) names what it is:
``"kind": "powerkit <command>"`` and ``"version": <int>``, the first two keys. Whatever reads
one — ``econ``, ``pilot``, ``carbon``, ``report``, ``bloat run`` — asks :func:`read_document`
for the kind it takes, and a document of another kind, or of a version newer than this
powerkit knows, is one clear error naming the file, never a dict walked until something is
missing. A document without a kind was written before documents carried one: it is read as
version 1 of the kind asked for (design note 94).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from powerkit.errors import BadInputError
from powerkit.inputs import load_json

__all__ = ["VERSIONS", "document_kind", "from_plain", "read_document", "stamp"]

T = TypeVar("T")

#: the version of each command's document (raised when its keys change meaning)
VERSIONS: dict[str, int] = {}
_DEFAULT_VERSION = 1


def document_kind(command: str) -> str:
    """The ``kind`` of a command's document: ``powerkit windows``, ``powerkit pfi allocate``."""
    return f"powerkit {command}"


def stamp(command: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as ``command``'s document: its kind and version first."""
    clash = {"kind", "version"} & set(body)
    if clash:
        raise ValueError(f"a {command} document may not hold {', '.join(sorted(clash))} itself")
    version = VERSIONS.get(command, _DEFAULT_VERSION)
    return {"kind": document_kind(command), "version": version, **body}


def read_document(path: str | Path, command: str) -> dict[str, Any]:
    """The document of ``command`` in ``path``; one line naming the file for anything else:
    not JSON, not an object, another command's document, or a newer version."""
    p = Path(path)
    wanted = document_kind(command)
    data = load_json(p, hint=f"write it with `{wanted} --json > {p}`")
    if not isinstance(data, dict):
        raise BadInputError(f"{p}: not a `{wanted} --json` document")
    kind = data.get("kind", wanted)  # (no kind: written before documents carried one)
    if kind != wanted:
        shown = kind if isinstance(kind, str) and kind.startswith("powerkit ") else None
        what = f"a `{shown} --json` document" if shown else f"a document of kind {kind!r}"
        raise BadInputError(f"{p}: {what}, where `{wanted} --json` output is wanted")
    version = data.get("version", _DEFAULT_VERSION)
    known = VERSIONS.get(command, _DEFAULT_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise BadInputError(f"{p}: document version {version!r} is not a version")
    if version > known:
        raise BadInputError(
            f"{p}: a version {version} `{wanted}` document, written by a newer powerkit "
            f"(this one reads up to version {known})"
        )
    return data


def from_plain(cls: type[T], data: Any, where: str) -> T:
    """A result dataclass rebuilt from its document (the plain data ``to_plain`` made of it):
    each field checked against its annotation — numbers, strings, lists, nested results,
    None where the annotation allows it — and one line naming ``where`` and the field for
    anything else. Keys the class does not know are ignored (a later release may add some
    within a version); fields with defaults may be absent."""
    if not isinstance(data, dict):
        raise BadInputError(f"{where}: expected an object, not {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in data:
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            raise BadInputError(f"{where}: {f.name} is missing")
        values[f.name] = _plain_value(hints[f.name], data[f.name], f"{where}: {f.name}")
    return cls(**values)


def _plain_value(kind: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _plain_value(option, value, where)
            except BadInputError:
                continue
        raise BadInputError(f"{where}: {value!r} is not {kind}")
    if origin is list:
        if not isinstance(value, list):
            raise BadInputError(f"{where}: expected a list")
        return [_plain_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise BadInputError(f"{where}: expected an object")
        return {str(k): _plain_value(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return from_plain(kind, value, where)
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise BadInputError(f"{where}: {value!r} is not a finite number")
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind in (str, bool) and isinstance(value, kind):
        return value
    raise BadInputError(f"{where}: {value!r} is not {getattr(kind, '__name__', kind)}")
