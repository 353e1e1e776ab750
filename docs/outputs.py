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
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"<!-- output: (?P<args>[^\n]+?) -->\n```\n(?P<body>.*?)```\n", re.S)
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


def pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if "<!-- output: " in p.read_text())


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
        prose = re.split(r"\n## |```|<!-- output: ", text[m.end() :])[0]  # (up to what is next)
        numbers = {n.replace(",", "") for n in re.findall(r"\d[\d,]*(?:\.\d+)?", want)}
        for number, _ in FIGURE.findall(prose):
            if number.replace(",", "") not in numbers:
                found.append(
                    f"{page.name}: the text after `powerkit {m['args']}` quotes "
                    f"{number}, which its output does not show"
                )
    return found


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
    if new != text:
        page.write_text(new)
        print(f"wrote {page.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for page in pages():
        write(page)
