"""JSON Schemas of the result documents, made from their dataclasses (docs/schemas/).

A document's schema says what its ``--json`` holds: ``kind`` and ``version`` first, then each
field under its key (a field's ``{"key": ...}`` metadata renames it, ``{"doc": False}`` keeps it
out), typed from its annotation. Floats may be null (``to_plain`` writes NaN and infinity as
null); fields with a default may be absent; keys a later release adds within a version are
allowed (readers ignore them). A document whose body is not its fields (it overrides
``Document.body``) describes its body with a ``schema_body(defs)`` classmethod built from the
helpers here.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from pathlib import Path
from typing import Any

from powerkit.core.documents import Document, document_kind

__all__ = [
    "SCHEMA_DIALECT",
    "field_properties",
    "json_schema",
    "object_schema",
    "schema_name",
    "type_schema",
]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

Defs = dict[str, Any]


def type_schema(kind: Any, defs: Defs) -> dict[str, Any]:
    """The schema of a value of annotation ``kind`` (a nested result goes into ``defs``)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any or kind is object:
        return {}
    if origin in (typing.Union, types.UnionType):
        options = [type_schema(a, defs) for a in args if a is not type(None)]
        if type(None) in args:
            options.append({"type": "null"})
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, set, frozenset) or (origin is tuple and args[1:] == (Ellipsis,)):
        return {"type": "array", "items": type_schema(args[0], defs) if args else {}}
    if origin is tuple:
        items = [type_schema(a, defs) for a in args]
        return {
            "type": "array",
            "prefixItems": items,
            "minItems": len(items),
            "maxItems": len(items),
        }
    if origin is dict or kind is dict:
        value = type_schema(args[1], defs) if args else {}
        return {"type": "object", "additionalProperties": value}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if kind.__name__ not in defs:
            defs[kind.__name__] = {}  # (a result that holds itself)
            defs[kind.__name__] = object_schema(kind, defs)
        return {"$ref": f"#/$defs/{kind.__name__}"}
    if getattr(kind, "__module__", "") == "numpy" and kind.__name__ == "ndarray":
        return {"type": "array", "items": {"type": ["number", "null"]}}
    if kind is bool:
        return {"type": "boolean"}
    if kind is int:
        return {"type": "integer"}
    if kind is float:
        return {"type": ["number", "null"]}  # NaN and infinity are written as null
    if kind is str or kind is Path or (isinstance(kind, type) and issubclass(kind, str)):
        return {"type": "string"}
    raise TypeError(f"no JSON Schema for the annotation {kind!r}")


def field_properties(cls: type, defs: Defs) -> tuple[dict[str, Any], list[str]]:
    """(properties, required keys) of a result dataclass's document fields."""
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required = []
    for f in dataclasses.fields(cls):
        if not f.metadata.get("doc", True):
            continue
        key = f.metadata.get("key", f.name)
        properties[key] = type_schema(hints[f.name], defs)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(key)
    return properties, required


def object_schema(cls: type, defs: Defs) -> dict[str, Any]:
    """The schema of a result dataclass as ``to_plain`` writes it."""
    properties, required = field_properties(cls, defs)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    doc = inspect.getdoc(cls)
    if doc and not doc.startswith(f"{cls.__name__}("):  # (a dataclass's made-up docstring)
        schema = {"description": " ".join(doc.split("\n\n")[0].split()), **schema}
    return schema


def _body(cls: type[Document], defs: Defs) -> dict[str, Any]:
    custom = getattr(cls, "schema_body", None)
    return custom(defs) if custom is not None else object_schema(cls, defs)


def json_schema(*classes: type[Document]) -> dict[str, Any]:
    """The JSON Schema of a command's document (``kind`` and ``version`` first); a command
    with several document classes (``carbon``: a trace's, a scenario's) gets any of them."""
    first = classes[0]
    defs: Defs = {}
    bodies = [_body(cls, defs) for cls in classes]
    kind = document_kind(first.COMMAND)
    schema: dict[str, Any] = {
        "$schema": SCHEMA_DIALECT,
        "$id": f"{schema_name(first.COMMAND)}.schema.json",
        "title": f"`{kind} --json` (version {first.VERSION})",
    }
    head = {"kind": {"const": kind}, "version": {"const": first.VERSION}}
    if len(bodies) == 1:
        body = bodies[0]
        if "description" in body:
            schema["description"] = body["description"]
        schema |= {
            "type": "object",
            "properties": {**head, **body["properties"]},
            "required": ["kind", "version", *body.get("required", [])],
        }
    else:
        schema |= {
            "type": "object",
            "properties": head,
            "required": ["kind", "version"],
            "anyOf": [{k: v for k, v in b.items() if k != "type"} for b in bodies],
        }
    if defs:
        schema["$defs"] = dict(sorted(defs.items()))
    return schema


def schema_name(command: str) -> str:
    """The file name of a command's schema in docs/schemas/ (``carbon --regions``:
    ``carbon-regions``)."""
    return re.sub(r"[^a-z0-9]+", "-", command.lower()).strip("-")
