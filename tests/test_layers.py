"""The package's layers run one way: a module imports only modules of its own package or of
a lower layer (lazy imports inside functions included), so that the cell layer knows nothing
of the analyses, the analyses nothing of the commands, and no two packages need each other."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "powerkit"

#: bottom to top; a package may import its own modules and any package of a lower layer
LAYERS: list[set[str]] = [
    {"powerkit"},  # the package: its public names, loaded lazily
    {"core"},  # errors, units, choices, plain values, the one writer, inputs, db, documents
    {"sensors"},  # power sensor models: how a reading relates to the truth, and its bounds
    {"trace", "sim"},  # canonical traces and their readers; the simulated GPU and workload
    {"cells", "telemetry"},  # the scan, cells, fill, rolling, steps; the GPU seam, recording
    {"engine", "actuation"},  # where the cell layer runs (local, Ray); changing GPU state
    {"analysis", "sweep", "monitor"},  # analyses over traces; knob sweeps; measuring in process
    {"utility", "pfi", "bloat", "top"},  # the grid's view; flexibility; energy bloat; live view
    {"control", "cap"},  # controllers; capping a fleet to a limit
    {"econ"},  # what the fleet's results (oversub, control eval) are worth
    {"jobs"},  # whose energy it was: per job, user and account, with its cost and carbon
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
SHARED_CLI = {"common", "options", "reading", "boundary", "progress"}


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
    """The CLI parses and renders; the library computes: cli/ stays under 3,500 lines (about
    125 a command, as the formatter lays them out) and no module of it over 250 (what grows
    past that is library work in the wrong place)."""
    sizes = {p.name: len(p.read_text().splitlines()) for p in (PACKAGE / "cli").glob("*.py")}
    assert sum(sizes.values()) <= 3500, sizes
    assert {name: n for name, n in sizes.items() if n > 250} == {}


def _module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _graph() -> dict[str, set[str]]:
    """Each module -> the powerkit modules it imports (lazy imports included), a name
    imported from a module (``from powerkit.x import y``) counted as that module."""
    modules = {_module_of(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in _imports(path):
            while name not in modules and "." in name:
                name = name.rpartition(".")[0]
            if name in modules and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of modules that import each other within one top-level package (Tarjan's
    strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if _part(w) != _part(v):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_inside_a_package() -> None:
    """Inside a package the imports run one way too: no two modules need each other, lazily
    or not (a cycle is two modules that are one)."""
    assert import_cycles(_graph()) == []


def test_no_relative_imports() -> None:
    """Every import names its module whole (``from powerkit.trace.model import Trace``), so
    the layer check and a reader's grep see it."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert found == []


#: the modules that may sit at the top of powerkit/ (everything else lives in its layer's
#: folder): the public face, the entry points, and the one engine
TOP_LEVEL = {"__init__.py", "__main__.py", "_entry.py", "engine.py"}


def test_the_folders_are_the_layers() -> None:
    """Every package folder is a layer's member, and no loose module sits at the top."""
    loose = {p.name for p in PACKAGE.glob("*.py")} - TOP_LEVEL
    assert loose == set()
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders - set().union(*LAYERS) == set()


def test_the_cycle_check_sees_a_cycle(tmp_path: Path) -> None:
    """The check finds a cycle of three modules, and none across packages."""
    graph = {
        "powerkit.a.x": {"powerkit.a.y"},
        "powerkit.a.y": {"powerkit.a.z", "powerkit.b.w"},
        "powerkit.a.z": {"powerkit.a.x"},
        "powerkit.b.w": {"powerkit.a.x"},
    }
    assert import_cycles(graph) == [["powerkit.a.x", "powerkit.a.y", "powerkit.a.z"]]
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from powerkit.trace.model import Trace\n")
    assert _imports(source) == {"powerkit.trace.model"}


def test_the_tests_mirror_the_packages() -> None:
    """A package's tests live in tests/<package>/; what spans them all (layers, goldens, the
    hostile-input tiers, the docs) at the top."""
    tests = PACKAGE.parent / "tests"
    folders = {p.name for p in tests.iterdir() if (p / "__init__.py").exists()}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders <= packages, folders - packages
    assert len(folders) >= 15


def _summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    return text.split(". ")[0].rstrip(".") + "."


def layout_text() -> str:
    """README's layout block: each folder of powerkit/, layer by layer from the bottom, with
    the first sentence of its docstring."""
    import textwrap

    lines = []
    for layer in LAYERS:
        for part in sorted(layer):
            path = PACKAGE / part / "__init__.py"
            if part == "powerkit":
                path = PACKAGE / "__init__.py"
            elif not path.exists():
                path = PACKAGE / f"{part}.py"
            if not path.exists():
                continue
            name = "powerkit/" if part == "powerkit" else str(path.relative_to(PACKAGE.parent))
            name = name.removesuffix("__init__.py")
            wrapped = textwrap.wrap(_summary(path), 100 - 24)
            lines.append(f"{name:<22}  {wrapped[0]}")
            lines += [" " * 24 + w for w in wrapped[1:]]
    return "\n".join(lines) + "\n"


def test_the_readme_shows_the_folders() -> None:
    """README's layout block is made from the folders (``python tests/test_layers.py``
    writes it), so it cannot drift from them."""
    readme = (PACKAGE.parent / "README.md").read_text()
    block = readme.split("<!-- layout -->\n```\n", 1)[1].split("```\n<!-- /layout -->", 1)[0]
    assert block == layout_text()


if __name__ == "__main__":  # write README's layout block
    readme_path = PACKAGE.parent / "README.md"
    head, rest = readme_path.read_text().split("<!-- layout -->\n", 1)
    tail = rest.split("<!-- /layout -->", 1)[1]
    readme_path.write_text(
        f"{head}<!-- layout -->\n```\n{layout_text()}```\n<!-- /layout -->{tail}"
    )
