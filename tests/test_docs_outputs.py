"""The worked outputs in docs/ are what the commands print now (docs/outputs.py makes them:
`make docs`), and the text after each quotes only figures its output shows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "docs_outputs", Path(__file__).resolve().parents[1] / "docs" / "outputs.py"
)
assert _SPEC is not None and _SPEC.loader is not None
outputs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(outputs)


def test_pages_with_worked_outputs_are_found() -> None:
    names = {p.name for p in outputs.pages()}
    assert {"windows.md", "oversub.md"} <= names


@pytest.mark.parametrize("page", outputs.pages(), ids=lambda p: p.name)
def test_worked_outputs_are_current(page: Path) -> None:
    assert outputs.stale(page) == [], "run `make docs` and review the diff"
    unchecked = outputs.absent(page)
    if unchecked:  # (the rest of the page was checked above)
        pytest.skip(f"{len(unchecked)} block(s) read ../shared/realdata, absent here: {unchecked}")


def test_a_changed_output_or_a_figure_it_does_not_show_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    args = "windows sample_data/a100-72b-tp4.parquet --budget 237.5W --windows 0.5s"
    good = f"<!-- output: {args} -->\n```\n{outputs.block(args)}```\n\nA rate of 13.83 %.\n"
    page.write_text(good)
    assert outputs.stale(page) == []
    page.write_text(good.replace("13.83%", "19.72%", 1))
    assert "has changed" in outputs.stale(page)[0]
    page.write_text(good.replace("A rate of 13.83 %", "A rate of 19.72 %"))
    assert "quotes 19.72" in outputs.stale(page)[0]


def test_the_reference_has_every_command() -> None:
    """docs/reference.md shows the --help of every command and subcommand (a new command
    without its block fails here; its block's text is checked current above)."""
    import typer.main

    from powerkit.cli import COMMANDS, SUBCOMMANDS, app

    text = (outputs.DOCS / "reference.md").read_text()
    group = typer.main.get_command(app)
    ctx = group.make_context("powerkit", ["--help"], resilient_parsing=True)
    wanted = ["--help"]
    for name in COMMANDS:
        command = group.get_command(ctx, name)
        subs = command.list_commands(ctx) if hasattr(command, "list_commands") else []
        wanted += [f"{name} --help", *(f"{name} {s} --help" for s in subs)]
    wanted += [f"{c} {s} --help" for c, s in SUBCOMMANDS]
    missing = [w for w in wanted if f"<!-- output: {w} -->" not in text]
    assert missing == [], "add them to docs/reference.md, then `make docs`"


def test_recorded_results_and_the_figures_quoted_after_them_are_checked(tmp_path: Path) -> None:
    tables = outputs.recorded("control-long")
    page = tmp_path / "p.md"
    good = f"<!-- results: control-long -->\n{tables}<!-- /results -->\n\nSee 9.46 %.\n"
    page.write_text(good)
    assert outputs.stale(page) == []
    page.write_text(good.replace("See 9.46 %", "See 9.47 %"))
    assert "quotes 9.47" in outputs.stale(page)[0]
    page.write_text(good.replace("+9.46", "+9.47", 1))
    assert "have changed" in outputs.stale(page)[0]


def test_every_recorded_run_names_its_commands_and_commit() -> None:
    import json

    folder = outputs.RESULTS_DIR / "control-long"
    runs = json.loads((folder / "runs.json").read_text())
    documents = {p.stem for p in folder.glob("*.json")} - {"runs"}
    assert documents and documents == set(runs)
    for record in runs.values():
        assert record["train"].startswith("powerkit control train ")
        assert record["eval"].startswith("powerkit control eval ")
        assert record["commit"] and record["date"]
