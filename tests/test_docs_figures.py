"""The figures in docs/ are what docs/figures.py draws now from the program's own models
(`make docs` writes them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "docs_figures", Path(__file__).resolve().parents[1] / "docs" / "figures.py"
)
assert _SPEC is not None and _SPEC.loader is not None
figures = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(figures)


@pytest.mark.parametrize("name", sorted(figures.DRAWN))
def test_a_figure_is_current(name: str) -> None:
    drawn = figures.DRAWN[name]()
    assert (figures.FIGURES / name).read_text() == drawn, "run `make docs` and review the diff"


def test_the_trust_figure_shows_the_truth_and_both_sensors() -> None:
    svg = figures.DRAWN["trust.svg"]()
    for name in ("true power (every 5 ms)", "average_1s", "a100-power.draw"):
        assert f">{name}</text>" in svg
    assert svg.count("<path ") == 3


def test_the_windows_figure_shows_the_band_and_the_budget() -> None:
    svg = figures.DRAWN["trust-windows.svg"]()
    assert 'fill-opacity="0.22"' in svg and 'stroke-dasharray="6 4"' in svg
    for name in ("where the truth lies", "true 0.5 s means", "budget 300 W"):
        assert f">{name}</text>" in svg
