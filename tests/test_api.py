"""docs/api.md: its code blocks run as written, and `import powerkit` loads nothing heavy."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_api_page_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    assert len(blocks) >= 3
    scope: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), scope)


def test_every_public_name_resolves_and_import_is_light() -> None:
    import powerkit

    for name in powerkit.__all__:
        assert getattr(powerkit, name) is not None
    code = (
        "import sys, powerkit\n"
        "print(sorted(m for m in ('numpy', 'polars', 'duckdb') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.strip() == "[]"


def test_every_exported_job_is_documented() -> None:
    """Each command's options and job that ``powerkit`` exports are in docs/api.md's table."""
    import powerkit

    page = (ROOT / "docs" / "api.md").read_text()
    jobs = [n for n in powerkit.__all__ if n.startswith("run_") or n.endswith("Options")]
    assert len(jobs) >= 25
    assert [n for n in jobs if not re.search(rf"\b{n}\(", page)] == []


def test_every_options_class_documents_each_field() -> None:
    """Each exported ``XOptions`` says, in its docstring's Attributes, what every field is
    (with its unit and default where it has them): the reference a Python caller reads."""
    import dataclasses
    import inspect

    import powerkit

    undocumented = {}
    for name in powerkit.__all__:
        if not name.endswith("Options"):
            continue
        cls = getattr(powerkit, name)
        doc = inspect.getdoc(cls) or ""
        attributes = doc.partition("Attributes:")[2]
        missing = [
            f.name for f in dataclasses.fields(cls) if not re.search(rf"\b{f.name}\b", attributes)
        ]
        if missing:
            undocumented[name] = missing
    assert undocumented == {}
