"""The worked outputs in docs/, made by the program itself.

A block that follows a ``<!-- output: ARGS -->`` line in a page of docs/ is what
``powerkit ARGS`` prints on stdout, run from the repository root as a pipe would see it (100
columns), under the command line itself; a file the command writes is named ``{tmp}/NAME``
in ARGS, written into a fresh folder and shown as ``NAME``. ``SETUP && ARGS`` runs the
``powerkit SETUP`` commands first in the same folder (a sweep before the command that reads
it) and shows the last command alone. ``python docs/outputs.py`` writes
every such block anew; tests/test_docs_outputs.py fails when one differs from what the
command prints now, and when the paragraph after a block quotes a figure (``13.83 %``,
``1.65×``) the block does not hold — so a page cannot show figures the program no longer
gives.

Results too long to run in a docs build (hours of simulation) are recorded instead: a run
writes the program's own ``--json`` documents into ``docs/results/NAME/`` (with the commands
and the commit in its ``runs.json``), and a block between ``<!-- results: NAME -->`` and
``<!-- /results -->`` is the tables :func:`recorded` renders from them — made anew by
``python docs/outputs.py`` from the recorded documents, checked current and its prose's
figures checked by the same test, and recorded anew only by the run that makes them
(``python bench/control_long.py`` for ``control-long``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"<!-- output: (?P<args>[^\n]+?) -->\n```\n(?P<body>.*?)```\n", re.S)
RESULTS_BLOCK = re.compile(
    r"<!-- results: (?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /results -->\n", re.S
)
RESULTS_DIR = DOCS / "results"
FIGURE = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s?(%|×)")


def run(args: str) -> str:
    """What ``powerkit args`` prints on stdout, trailing spaces and blank edge lines cut."""
    from typer.testing import CliRunner

    from powerkit.cli import app

    saved = os.getcwd()
    os.chdir(ROOT)
    try:
        with tempfile.TemporaryDirectory(prefix="powerkit-docs-") as tmp:
            for one in args.split(" && "):
                argv = shlex.split(one.replace("{tmp}/", f"{tmp}/"))
                env = {"COLUMNS": "100"}
                result = CliRunner().invoke(app, argv, env=env, catch_exceptions=False)
                if result.exit_code != 0:
                    raise SystemExit(
                        f"powerkit {one}: exit {result.exit_code}: {result.stderr.strip()}"
                    )
            shown = result.stdout.replace(f"{tmp}/", "")  # (a written file: by its name)
    finally:
        os.chdir(saved)
    lines = [line.rstrip() for line in shown.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def block(args: str) -> str:
    """The block's text: the command line, then its output."""
    shown = args.split(" && ")[-1].replace("{tmp}/", "")
    return f"$ powerkit {shown}\n\n{run(args)}"


def recorded(name: str) -> str:
    """The tables of the recorded results ``name`` (docs/results/NAME), as a page shows them."""
    renderers = {"control-long": ("bench/control_long.py", "tables")}
    if name not in renderers:
        raise SystemExit(f"<!-- results: {name} -->: no such recorded results")
    script, function = renderers[name]
    spec = importlib.util.spec_from_file_location(f"results_{name}", ROOT / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up while it loads)
    spec.loader.exec_module(module)
    folder = RESULTS_DIR / name
    if not folder.is_dir():
        raise SystemExit(f"{folder.relative_to(ROOT)}: absent (run {script} to record it)")
    return str(getattr(module, function)(folder))


def pages() -> list[Path]:
    return sorted(
        p
        for p in DOCS.glob("*.md")
        if "<!-- output: " in p.read_text() or "<!-- results: " in p.read_text()
    )


def _unshown(page: Path, shown: str, prose: str, what: str) -> list[str]:
    """The figures (``13.83 %``, ``1.65×``) ``prose`` quotes that ``shown`` does not hold."""
    numbers = {n.replace(",", "") for n in re.findall(r"\d[\d,]*(?:\.\d+)?", shown)}
    return [
        f"{page.name}: the text after {what} quotes {number}, which its output does not show"
        for number, _ in FIGURE.findall(prose)
        if number.replace(",", "") not in numbers
    ]


def stale(page: Path) -> list[str]:
    """What is wrong with the worked outputs of a page (empty: nothing)."""
    text = page.read_text()
    found = []
    for m in BLOCK.finditer(text):
        if "../shared/realdata" in m["args"] and not (ROOT.parent / "shared/realdata").exists():
            continue  # (a real log's output, where the logs are not here: see absent())
        want = block(m["args"])
        if m["body"] != want:
            found.append(f"{page.name}: the output of `powerkit {m['args']}` has changed")
            continue
        prose = _prose(text[m.end() :])
        found += _unshown(page, want, prose, f"`powerkit {m['args']}`")
    for m in RESULTS_BLOCK.finditer(text):
        want = recorded(m["name"])
        if m["body"] != want:
            found.append(f"{page.name}: the tables of results {m['name']} have changed")
            continue
        found += _unshown(page, want, _prose(text[m.end() :]), f"results {m['name']}")
    return found


def _prose(after: str) -> str:
    """The text that comments on a block: up to the next heading, block or results."""
    return re.split(r"\n## |```|<!-- output: |<!-- results: ", after)[0]


def absent(page: Path) -> list[str]:
    """The blocks of a page that read ../shared/realdata where it is not (they cannot be
    checked here: the test says so by name instead of passing quietly)."""
    if (ROOT.parent / "shared/realdata").exists():
        return []
    return [
        m["args"] for m in BLOCK.finditer(page.read_text()) if "../shared/realdata" in m["args"]
    ]


def write(page: Path) -> None:
    text = page.read_text()
    new = BLOCK.sub(lambda m: f"<!-- output: {m['args']} -->\n```\n{block(m['args'])}```\n", text)
    new = RESULTS_BLOCK.sub(
        lambda m: f"<!-- results: {m['name']} -->\n{recorded(m['name'])}<!-- /results -->\n", new
    )
    if new != text:
        page.write_text(new)
        print(f"wrote {page.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for page in pages():
        write(page)
