"""Result documents name their kind and version, and whatever reads one refuses a document of
another kind, or of a newer version, in one line naming the file (powerkit/core/documents.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from powerkit.core.documents import read_document, stamp
from powerkit.core.errors import BadInputError
from tests.conftest import Cli

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
TRACE = SAMPLE / "a100-7b.parquet"


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real documents of the commands whose output other commands read."""
    work = tmp_path_factory.mktemp("docs")
    cli = Cli()
    runs = {
        "info": ["info", TRACE],
        "windows": ["windows", TRACE, "--budget", "300W"],
        "oversub": ["oversub", f"{TRACE}:4", "--capacity", "60%", "--margin", "5%"],
        "utility": ["utility", f"{TRACE}:4"],
    }
    found = {}
    for name, argv in runs.items():
        r = cli(*argv, "--json")
        assert r.exit_code == 0, r.stderr
        found[name] = work / f"{name}.json"
        found[name].write_text(r.stdout)
    r = cli(
        "econ",
        "--oversub",
        found["oversub"],
        "--gpus",
        "4096",
        "--gpu-tdp",
        "700W",
        "--pue",
        "1.2",
        "--price",
        "0.08/kWh",
        "--window",
        "30s",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    found["econ"] = work / "econ.json"
    found["econ"].write_text(r.stdout)
    return found


def test_every_document_names_its_kind_and_version_first(docs: dict[str, Path]) -> None:
    for name, path in docs.items():
        doc = json.loads(path.read_text())
        assert list(doc)[:2] == ["kind", "version"]
        assert (doc["kind"], doc["version"]) == (f"powerkit {name}", 1)


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["econ", "--oversub", "{info}", "--gpus", "64", "--gpu-tdp", "700W"], "powerkit oversub"),
        (["pilot", "--oversub", "{windows}", "--site-mw", "20"], "powerkit oversub"),
        (["carbon", "--econ", "{oversub}", "--intensity", "400g/kWh"], "powerkit econ"),
        (["report", "--windows", "{oversub}", "--out", "{out}"], "powerkit windows"),
        (["report", "--oversub", "{windows}", "--out", "{out}"], "powerkit oversub"),
        (["report", "--utility", "{econ}", "--out", "{out}"], "powerkit utility"),
        (["report", "--econ", "{utility}", "--out", "{out}"], "powerkit econ"),
    ],
)
def test_a_document_of_another_kind_is_refused_naming_both(
    cli: Cli, docs: dict[str, Path], tmp_path: Path, argv: list[str], wanted: str
) -> None:
    out = tmp_path / "r.html"
    args = [a.format(out=out, **{k: str(v) for k, v in docs.items()}) for a in argv]
    given = next(Path(a) for a in args if a.endswith(".json"))
    r = cli(*args)
    assert r.exit_code == 2, r.stdout
    line = r.stderr.strip()
    assert "\n" not in line and str(given) in line
    assert f"where `{wanted} --json` output is wanted" in line
    assert f"`powerkit {given.stem} --json` document" in line
    assert not out.exists()


def test_a_newer_version_is_refused_and_an_unstamped_document_is_read(
    cli: Cli, docs: dict[str, Path], tmp_path: Path
) -> None:
    doc = json.loads(docs["windows"].read_text())
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**doc, "version": 2}))
    r = cli("report", "--windows", newer, "--out", tmp_path / "a.html")
    assert r.exit_code == 2 and "written by a newer powerkit" in r.stderr
    older = tmp_path / "older.json"  # as written before documents carried a kind
    older.write_text(json.dumps({k: v for k, v in doc.items() if k not in ("kind", "version")}))
    r = cli("report", "--windows", older, "--out", tmp_path / "b.html")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("version", ["1", 0, -1, True, None, 1.5])
def test_a_version_that_is_not_one_is_refused(tmp_path: Path, version: object) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"kind": "powerkit windows", "version": version}))
    with pytest.raises(BadInputError, match="is not a version"):
        read_document(path, "windows")


def test_a_body_may_not_carry_its_own_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        stamp("energy", {"kind": "steps"})
    assert list(stamp("energy", {"by": "steps"})) == ["kind", "version", "by"]


def test_a_windows_document_is_read_back_as_the_report_it_was(
    docs: dict[str, Path], tmp_path: Path
) -> None:
    """`to_doc` is exactly the --json; `from_doc` rebuilds the typed report from it, and a
    field of the wrong type is one line naming the file and the field."""
    from powerkit.analysis.windows import WindowsReport

    doc = read_document(docs["windows"], "windows")
    report = WindowsReport.from_doc(doc, str(docs["windows"]))
    assert json.loads(json.dumps(report.to_doc())) == doc
    assert report.windows[0].window == "500ms" and isinstance(report.windows[0].positions, int)
    broken = json.loads(json.dumps(doc))
    broken["windows"][1]["positions"] = "many"
    with pytest.raises(
        BadInputError,
        match=r"d\.json: not a `windows --json` document "
        r"\(document: windows\[1\]: positions: 'many'",
    ):
        WindowsReport.from_doc(broken, str(tmp_path / "d.json"))
    del broken["budget_w"]
    with pytest.raises(BadInputError, match="budget_w is missing"):
        WindowsReport.from_doc(broken, "d.json")


GOLDENS = Path(__file__).resolve().parents[1] / "goldens"


def _document_classes() -> dict[str, type]:
    """Every result document the package declares, by the command it is the --json of."""
    import importlib
    import pkgutil

    import powerkit
    from powerkit.core.documents import Document

    for info in pkgutil.walk_packages(powerkit.__path__, "powerkit."):
        if not info.name.startswith(("powerkit.cli", "powerkit.__main__", "powerkit._entry")):
            importlib.import_module(info.name)
    found: dict[str, type] = {}
    stack = list(Document.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if hasattr(cls, "COMMAND"):  # (a base of several documents has none)
            found.setdefault(cls.COMMAND, cls)  # (carbon: the trace's; the scenario's too)
    return found


def test_every_document_is_the_command_of_a_real_command() -> None:
    """A document's kind names a command (or `carbon --regions`, `record --recover`) the CLI
    has, so that an error naming it points at something a user can run."""
    from powerkit.cli import COMMANDS

    for command in _document_classes():
        assert command.split()[0] in COMMANDS, command


@pytest.mark.parametrize(
    "name",
    [
        "info",
        "info-smi",
        "windows",
        "windows-sum",
        "oversub",
        "econ",
        "carbon",
        "cap",
        "record",
        "sweep",
        "pfi-sweep",
        "pfi-compute",
        "bloat-plan",
        "bloat-run",
    ],
)
def test_a_command_document_is_read_back_whole(name: str) -> None:
    """For every golden document: `from_doc` rebuilds the typed result and `to_doc` of it is
    the document again (what a consumer reads is what the producer wrote)."""
    doc = json.loads((GOLDENS / f"{name}.json").read_text())
    from powerkit.econ.carbon import carbon_from_doc

    command = doc["kind"].removeprefix("powerkit ")
    read = carbon_from_doc if command == "carbon" else _document_classes()[command].from_doc
    result = read(doc, name)
    assert json.loads(json.dumps(result.to_doc(), sort_keys=True)) == doc


def test_the_utility_document_is_read_back_whole(docs: dict[str, Path]) -> None:
    from powerkit.utility.document import UtilityDocument

    doc = read_document(docs["utility"], "utility")
    assert UtilityDocument.from_doc(doc, "u.json").to_doc() == doc


def test_a_control_evaluation_is_read_back_without_its_episodes() -> None:
    from powerkit.control.judge import EvalReport
    from tests.documents import arm, eval_doc

    doc = eval_doc([arm("ppo", 0.02, 9.1e9, vs_uncontrolled=0.25), arm("uncontrolled", 0.2, 7e9)])
    report = EvalReport.from_doc(doc, "e.json")
    assert report.arm("ppo").vs_uncontrolled == {"tokens_per_mwh": 0.25} and not report.episodes
    assert report.to_doc() == doc
    with pytest.raises(BadInputError, match="no random arm"):
        report.arm("random")


def test_only_a_result_document_is_printed() -> None:
    """`--json` is a result's `to_doc()`; a hand-built dict cannot reach stdout."""
    from powerkit.cli.common import emit_json

    with pytest.raises(TypeError, match="not a result document"):
        emit_json({"kind": "powerkit windows"})  # type: ignore[arg-type]


def test_an_older_version_is_upgraded_and_one_too_old_refused() -> None:
    """A class that raised its version reads the old one through ``upgrade``; a version
    older than ``OLDEST`` is one line; the registry knows each command's classes."""
    from powerkit.core.documents import DOCUMENTS, Document

    @dataclasses.dataclass(frozen=True)
    class Renamed(Document):
        COMMAND: ClassVar[str] = "test renamed"
        VERSION: ClassVar[int] = 3
        OLDEST: ClassVar[int] = 2

        budget_w: float

        @classmethod
        def upgrade(cls, doc: dict[str, Any], version: int) -> dict[str, Any]:
            doc["budget_w"] = doc.pop("budget")  # version 2 called it `budget`
            return doc

    try:
        assert DOCUMENTS["test renamed"] == [Renamed]
        assert Renamed(300.0).to_doc() == {
            "kind": "powerkit test renamed",
            "version": 3,
            "budget_w": 300.0,
        }
        old = {"kind": "powerkit test renamed", "version": 2, "budget": 250.0}
        assert Renamed.from_doc(old, "old.json") == Renamed(250.0)
        with pytest.raises(BadInputError, match=r"old\.json: a version 1 .* no longer read"):
            Renamed.from_doc({**old, "version": 1}, "old.json")
        with pytest.raises(BadInputError, match="written by a newer powerkit"):
            Renamed.from_doc({**old, "version": 4}, "new.json")
    finally:
        del DOCUMENTS["test renamed"]


def test_a_library_error_names_the_parameter_and_the_command_line_the_flag(cli: Cli) -> None:
    """From Python an error names the parameter (``windows_s``); inside a command, the flag."""
    from powerkit.analysis.windows import windowed_violations
    from powerkit.core.units import parse_power
    from powerkit.trace import read_trace

    trace = read_trace(Path("sample_data/a100-7b.parquet"))
    with pytest.raises(BadInputError, match=r"^windows_s 700ms is not a whole number") as exc:
        windowed_violations(trace, parse_power("300W"), [0.7])
    assert "--" not in str(exc.value)
    r = cli("windows", "sample_data/a100-7b.parquet", "--budget", "300W", "--windows", "0.7s")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: --windows 700ms is not a whole number of 500ms grid cells")
    assert "(or a --grid that divides it)" in r.stderr
