"""The package's layers run one way: a module imports only modules of its own package or of
a lower layer (lazy imports inside functions included), so that the cell layer knows nothing
of the analyses, the analyses nothing of the commands, and no two packages need each other."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "powerkit"

#: bottom to top; a package may import its own modules and any package of a lower layer
LAYERS: list[set[str]] = [
    {"powerkit", "errors"},  # the package and its one error type
    {"units", "choices", "jsonable", "outputs", "inputs", "db"},  # parsing, writing, reading
    {"documents", "tables"},  # what a result document is, reading one back; declared tables
    {"trace", "actuator", "sim"},  # canonical traces, the device seam, the simulated GPU
    {"cells", "telemetry"},  # the scan, cells, fill, rolling, steps; recording
    {"engine"},  # runs the cell layer locally or on Ray
    {"analysis", "sweep", "monitor"},  # analyses over traces; knob sweeps; measuring in process
    {"utility", "pfi", "bloat", "smoothing", "top"},  # (smoothing: journaled by sweep's journal)
    {"control", "cap"},  # controllers; capping a fleet to a limit
    {"econ"},  # what the fleet's results (oversub, control eval) are worth
    {"report"},
    {"cli"},  # the command line
    {"__main__", "_entry"},  # its entry points
]


def _part(module: str) -> str:
    """The top-level part of a ``powerkit.x.y`` module name (``powerkit`` for the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "powerkit"


def _layer(part: str) -> int:
    found = [i for i, layer in enumerate(LAYERS) if part in layer]
    assert found, f"powerkit/{part} is in no layer: add it to tests/test_layers.py LAYERS"
    return found[0]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n == "powerkit" or n.startswith("powerkit.")}


def upward_imports() -> list[str]:
    """Every import of a module from a higher layer, or across packages of one layer."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        here = _part(module)
        for name in sorted(_imports(path)):
            there = _part(name)
            if there == here:
                continue
            if _layer(there) > _layer(here) or (
                _layer(there) == _layer(here) and here != "powerkit"
            ):
                found.append(f"{module} imports {name}")
    return found


def test_no_module_imports_upward() -> None:
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk reads lazy imports too (the rule is not satisfied by hiding an import)."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from powerkit.cli.common import err\n")
    assert "powerkit.cli.common" in _imports(source)
    assert _layer("cli") > _layer("cells")


#: the modules of powerkit/cli/ every command may use (the rest are commands)
SHARED_CLI = {"common", "options", "boundary", "progress"}


def test_no_command_imports_another_command() -> None:
    """A command's module imports the shared CLI modules and the library, never another
    command's module: what two commands share is library (or cli/common, cli/options)."""
    found = []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        for name in _imports(path):
            parts = name.split(".")
            other = parts[2] if parts[:2] == ["powerkit", "cli"] and len(parts) > 2 else None
            if other is not None and other not in SHARED_CLI and other != path.stem:
                found.append(f"cli/{path.name} imports {name}")
    assert found == []


def test_the_command_line_stays_thin() -> None:
    """The CLI parses and renders; the library computes: cli/ stays under 3,300 lines (about
    130 a command) and no module of it over 250 (what grows past that is library work in the
    wrong place)."""
    sizes = {p.name: len(p.read_text().splitlines()) for p in (PACKAGE / "cli").glob("*.py")}
    assert sum(sizes.values()) <= 3300, sizes
    assert {name: n for name, n in sizes.items() if n > 250} == {}
