"""docs/schemas/: each result document's JSON Schema, made from its class
(``python -m tests.core.test_schemas`` writes them); every golden document validates against its
schema, and a document that breaks one does not."""

from __future__ import annotations

import copy
import importlib
import json
import re
from pathlib import Path

import jsonschema
import pytest

from powerkit.core.documents import DOCUMENTS, Document
from powerkit.core.schemas import json_schema, schema_name
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas"
GOLDENS = ROOT / "tests" / "goldens"


def document_classes() -> dict[str, list[type[Document]]]:
    """Every command's document class (each module that defines one imported)."""
    for path in sorted((ROOT / "powerkit").rglob("*.py")):
        if re.search(r"^class \w+\(Document\)", path.read_text(), re.M):
            rel = path.relative_to(ROOT).with_suffix("")
            importlib.import_module(".".join(rel.parts))
    return dict(sorted(DOCUMENTS.items()))


def schema_file(command: str) -> Path:
    return SCHEMAS / f"{schema_name(command)}.schema.json"


def schema_text(classes: list[type[Document]]) -> str:
    return json.dumps(json_schema(*classes), indent=1, ensure_ascii=False) + "\n"


def test_every_document_has_its_schema() -> None:
    classes = document_classes()
    assert sum(len(c) for c in classes.values()) >= 28
    for command, found in classes.items():
        assert schema_file(command).read_text() == schema_text(found), command
    written = {p.name for p in SCHEMAS.glob("*.schema.json")}
    assert written == {schema_file(c).name for c in classes}


def _series_of_lengths(value: object) -> object:
    if isinstance(value, dict):
        return {k: _series_of_lengths(v) for k, v in value.items()}
    return [0.0] * value if isinstance(value, int) else value


#: documents whose ``body`` reorders or leaves out fields but keeps their shape (their schema
#: is their fields'); every other ``body`` override describes itself with ``schema_body``
FIELD_SHAPED = {"info", "bloat plan", "pfi compute", "pfi sweep"}


def test_each_custom_document_describes_its_shape() -> None:
    for command, classes in document_classes().items():
        for cls in classes:
            custom = any("body" in c.__dict__ for c in cls.__mro__[:-1] if c is not Document)
            if custom and command not in FIELD_SHAPED:
                assert "schema_body" in {n for c in cls.__mro__ for n in c.__dict__}, command


#: goldens that keep only a document's shape (every number a placeholder: tests/goldens/make.py
#: SHAPE_ONLY); their commands' documents are validated as written below
_SHAPES = {"top-once"}


def _goldens() -> list[Path]:
    return sorted(p for p in GOLDENS.glob("*.json") if p.stem not in _SHAPES)


@pytest.mark.parametrize("path", _goldens(), ids=lambda p: p.stem)
def test_each_golden_document_validates(path: Path) -> None:
    doc = json.loads(path.read_text())
    if "figures" in doc:  # (a golden keeps only the lengths of the figures' series)
        doc["figures"] = _series_of_lengths(doc["figures"])
    classes = document_classes()
    found = classes[doc["kind"].removeprefix("powerkit ")]
    jsonschema.validate(doc, json_schema(*found))


def test_documents_as_written_validate(cli: Cli) -> None:
    """Whole documents, figures included, as the commands print them."""
    classes = document_classes()
    for args in (
        ("utility", "sample_data/a100-72b-tp4.parquet:64", "--site-mw", "5"),
        ("energy", "sample_data/a100-7b.parquet", "--steps", "trace"),
        ("carbon", "--trace", "sample_data/a100-7b.parquet", "--region", "germany"),
        ("carbon", "--econ", "tests/goldens/econ.json", "--region", "france"),
        ("carbon", "--list-regions"),
        ("top", "--backend", "sim", "--once", "--duration", "1s", "--interval", "0.1s"),
    ):
        doc = cli.json(*args)
        jsonschema.validate(doc, json_schema(*classes[doc["kind"].removeprefix("powerkit ")]))


def test_a_broken_document_does_not_validate() -> None:
    doc = json.loads((GOLDENS / "windows.json").read_text())
    schema = json_schema(*document_classes()["windows"])
    for broken in ("version", "windows"):
        bad = copy.deepcopy(doc)
        bad[broken] = "2"
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    bad = copy.deepcopy(doc)
    del bad["budget_w"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


if __name__ == "__main__":  # write docs/schemas/
    SCHEMAS.mkdir(exist_ok=True)
    for old in SCHEMAS.glob("*.schema.json"):
        old.unlink()
    for command, found in document_classes().items():
        schema_file(command).write_text(schema_text(found))
