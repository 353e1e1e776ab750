"""Each command's document and table on the sample data are its golden files
(tests/goldens/; `make goldens` writes them anew, to be reviewed in the diff)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "goldens_make", Path(__file__).resolve().parent / "goldens" / "make.py"
)
assert _SPEC is not None and _SPEC.loader is not None
goldens = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(goldens)


@pytest.mark.parametrize("name", list(goldens.COMMANDS))
def test_the_output_is_the_golden(name: str) -> None:
    for path, text in goldens.outputs(name).items():
        assert path.exists(), f"{path.name} is missing: run `make goldens`"
        assert text == path.read_text(), f"{path.name} changed: run `make goldens`, review the diff"
