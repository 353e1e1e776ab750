"""Result documents: what a command's ``--json`` is, and reading one back.

Every document a command prints (or writes, as ``bloat plan --out`` does) names what it is:
``"kind": "powerkit <command>"`` and ``"version": <int>``, the first two keys. Whatever reads
one — ``econ``, ``pilot``, ``carbon``, ``report``, ``bloat run`` — asks :func:`read_document`
for the kind it takes, and a document of another kind, or of a version newer than this
powerkit knows, is one clear error naming the file, never a dict walked until something is
missing. A document without a kind was written before documents carried one: it is read as
version 1 of the kind asked for (design note 94).

Each document class carries its version (``VERSION``) and the oldest version still read
(``OLDEST``); :meth:`Document.upgrade` brings an older document to the current shape before it
is read. Its JSON Schema (:func:`powerkit.core.schemas.json_schema`) is published in
docs/schemas/.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from powerkit.core.errors import BadInputError
from powerkit.core.inputs import load_json
from powerkit.core.jsonable import to_plain

__all__ = [
    "DOCUMENTS",
    "Document",
    "check_document",
    "document_kind",
    "from_plain",
    "read_document",
    "stamp",
]

T = TypeVar("T")

#: each command's document classes, as their modules define them (``carbon`` has two: of a
#: trace and of a scenario; they share a version)
DOCUMENTS: dict[str, list[type[Document]]] = {}
_DEFAULT_VERSION = 1


def _versions(command: str) -> tuple[int, int]:
    """(oldest, current) version of ``command``'s document that this powerkit reads."""
    classes = DOCUMENTS.get(command)
    if not classes:
        return _DEFAULT_VERSION, _DEFAULT_VERSION
    return max(c.OLDEST for c in classes), min(c.VERSION for c in classes)


def document_kind(command: str) -> str:
    """The ``kind`` of a command's document: ``powerkit windows``, ``powerkit pfi allocate``."""
    return f"powerkit {command}"


def stamp(command: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as ``command``'s document: its kind and version first."""
    clash = {"kind", "version"} & set(body)
    if clash:
        raise ValueError(f"a {command} document may not hold {', '.join(sorted(clash))} itself")
    return {"kind": document_kind(command), "version": _versions(command)[1], **body}


def read_document(path: str | Path, command: str) -> dict[str, Any]:
    """The document of ``command`` in ``path``; one line naming the file for anything else:
    not JSON, not an object, another command's document, or a newer version."""
    p = Path(path)
    data = load_json(p, hint=f"write it with `{document_kind(command)} --json > {p}`")
    return check_document(data, command, str(p))


def check_document(data: Any, command: str, where: str) -> dict[str, Any]:
    """``data`` when it is ``command``'s document (its kind, or none: written before documents
    carried one; a version this powerkit reads); else one line naming ``where``."""
    wanted = document_kind(command)
    if not isinstance(data, dict):
        raise BadInputError(f"{where}: not a `{wanted} --json` document")
    kind = data.get("kind", wanted)  # (no kind: written before documents carried one)
    if kind != wanted:
        shown = kind if isinstance(kind, str) and kind.startswith("powerkit ") else None
        what = f"a `{shown} --json` document" if shown else f"a document of kind {kind!r}"
        raise BadInputError(f"{where}: {what}, where `{wanted} --json` output is wanted")
    version = data.get("version", _DEFAULT_VERSION)
    oldest, known = _versions(command)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise BadInputError(f"{where}: document version {version!r} is not a version")
    if version > known:
        raise BadInputError(
            f"{where}: a version {version} `{wanted}` document, written by a newer powerkit "
            f"(this one reads up to version {known})"
        )
    if version < oldest:
        raise BadInputError(
            f"{where}: a version {version} `{wanted}` document, no longer read (this powerkit "
            f"reads versions {oldest} to {known}; run the command again)"
        )
    return data


class Document:
    """A command's result, as the library returns it: a frozen dataclass whose
    :meth:`to_doc` is exactly what the command's ``--json`` prints, and whose
    :meth:`from_doc` (or :meth:`read`, from a file) is how every consumer reads one back.

    A subclass names its command (``COMMAND = "windows"``); one whose document holds more or
    other than its fields overrides :meth:`body` (and :meth:`from_body` to read it back); one
    with figures to check beyond their types overrides :meth:`check`."""

    COMMAND: ClassVar[str]
    #: how an error names the document (default: ```windows --json```)
    NAME: ClassVar[str | None] = None
    #: the document's version: raised when a key changes meaning or goes
    VERSION: ClassVar[int] = _DEFAULT_VERSION
    #: the oldest version still read; :meth:`upgrade` brings it to ``VERSION``
    OLDEST: ClassVar[int] = _DEFAULT_VERSION

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "COMMAND" in cls.__dict__:
            DOCUMENTS.setdefault(cls.COMMAND, []).append(cls)

    @classmethod
    def upgrade(cls, doc: dict[str, Any], version: int) -> dict[str, Any]:
        """``doc``, a checked document of an older ``version`` (``OLDEST`` <= version <
        ``VERSION``), as the current version holds it. A class that raises its version and
        still reads the old one renames, fills or converts keys here; this one has nothing to
        do."""
        return doc

    def body(self) -> dict[str, Any]:
        """The document's contents, without kind and version (the fields, as plain data)."""
        plain = to_plain(self)
        assert isinstance(plain, dict)
        return plain

    def to_doc(self) -> dict[str, Any]:
        """The command's ``--json`` document: kind and version first, then :meth:`body`."""
        return stamp(self.COMMAND, to_plain(self.body()))

    @classmethod
    def from_body(cls, doc: dict[str, Any]) -> Self:
        """The result a checked document's contents hold (the fields, each type-checked)."""
        return from_plain(cls, doc, "document")

    def check(self) -> None:
        """Refuse (BadInputError, naming the field) figures no command could have written."""

    @classmethod
    def from_doc(cls, doc: Any, where: str) -> Self:
        """The result ``doc`` holds; one line naming ``where`` for a document of another kind
        or a newer version, a field missing or of the wrong type, or a figure out of range."""
        check_document(doc, cls.COMMAND, where)
        version = doc.get("version", _DEFAULT_VERSION)
        try:
            if version < cls.VERSION:
                doc = cls.upgrade(dict(doc), version)
            result = cls.from_body(doc)
            result.check()
        except BadInputError as exc:
            name = cls.NAME or f"`{cls.COMMAND} --json`"
            article = "an" if name.lstrip("`")[:1] in "aeiou" else "a"
            raise BadInputError(f"{where}: not {article} {name} document ({exc})") from None
        return result

    @classmethod
    def read(cls, path: str | Path) -> Self:
        """The result in the document at ``path`` (:func:`read_document`, then :meth:`from_doc`)."""
        return cls.from_doc(read_document(path, cls.COMMAND), str(path))


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
        key = f.metadata.get("key", f.name)  # (to_plain's renamed keys; unwritten fields)
        if key not in data or not f.metadata.get("doc", True):
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            raise BadInputError(f"{where}: {key} is missing")
        values[f.name] = _plain_value(hints[f.name], data[key], f"{where}: {key}")
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
    if origin is tuple:
        if not isinstance(value, list):
            raise BadInputError(f"{where}: expected a list")
        kinds = [args[0]] * len(value) if args[1:] == (Ellipsis,) else list(args)
        if len(kinds) != len(value):
            raise BadInputError(f"{where}: expected a list of {len(kinds)}")
        return tuple(
            _plain_value(k, v, f"{where}[{i}]")
            for i, (k, v) in enumerate(zip(kinds, value, strict=True))
        )
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
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise BadInputError(f"{where}: {value!r} is not {getattr(kind, '__name__', kind)}")
