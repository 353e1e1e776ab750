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

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from powerkit.errors import BadInputError
from powerkit.inputs import load_json

__all__ = ["VERSIONS", "document_kind", "read_document", "stamp"]

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
