"""Every command and every option is documented in docs/<command>.md; README names them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main

from powerkit.cli import app

DOCS = Path(__file__).resolve().parents[1] / "docs"
README = Path(__file__).resolve().parents[1] / "README.md"


def commands() -> dict[str, Any]:
    group = typer.main.get_command(app)
    ctx = group.make_context("powerkit", ["--help"], resilient_parsing=True)
    return {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}  # type: ignore[attr-defined]


def options(command: Any) -> list[str]:
    """Every long option of a command and, for a group, of each of its subcommands."""
    found = [
        opt
        for param in command.params
        if param.param_type_name == "option"
        for opt in param.opts
        if opt.startswith("--") and opt != "--help"
    ]
    for sub in getattr(command, "commands", {}).values():
        found += options(sub)
    return found


@pytest.mark.parametrize("name", sorted(commands()))
def test_command_page_documents_every_option(name: str) -> None:
    page = DOCS / f"{name}.md"
    assert page.exists(), f"docs/{name}.md is missing"
    text = page.read_text()
    assert f"powerkit {name}" in text
    for sub in getattr(commands()[name], "commands", {}):
        assert f"powerkit {name} {sub}" in text, f"docs/{name}.md does not show {name} {sub}"
    for opt in options(commands()[name]):
        assert f"`{opt}" in text, f"docs/{name}.md does not document {opt}"


@pytest.mark.parametrize("name", sorted(commands()))
def test_readme_tours_every_command(name: str) -> None:
    assert f"powerkit {name}" in README.read_text()


def test_index_links_every_command_page() -> None:
    index = (DOCS / "index.md").read_text()
    for name in commands():
        assert f"({name}.md)" in index


def test_readme_links_every_page() -> None:
    """README's list of the docs names every page in docs/ (a new page without its line fails)."""
    text = README.read_text()
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if f"(docs/{p.name})" not in text]
    assert missing == []
