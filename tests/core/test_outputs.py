"""The one writer: never over an input, never through a link, never half a file, no orphans."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from powerkit.core.errors import BadInputError
from powerkit.core.outputs import TEMP_MARK, atomic_write, check_output, write_text
from tests.conftest import Cli

SAMPLES = Path(__file__).resolve().parents[2] / "sample_data"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def files(tmp_path: Path, cli: Cli) -> dict[str, Path]:
    """A trace, a sweep, a jobs table and a policy, copied into the test's folder."""
    trace = tmp_path / "a.parquet"
    trace.write_bytes((SAMPLES / "a100-7b.parquet").read_bytes())
    sweep = tmp_path / "s.parquet"
    args = ("--preset", "a100-7b", "--group-size", "4,16", "--point", "2m", "--warmup", "10s")
    assert cli("sweep", *args, "--out", sweep, "--json").exit_code == 0
    jobs = tmp_path / "j.csv"
    jobs.write_text("job,cap_w,power_w,tokens_per_s\na,,700,100\na,500,520,90\na,300,320,60\n")
    csv = tmp_path / "s.csv"
    csv.write_text("ts,gpu,power_w\n1767225600,0,100\n1767225601,0,110\n")
    return {"trace": trace, "sweep": sweep, "jobs": jobs, "csv": csv}


SAME_FILE_CASES = [
    ("report", "--trace", "{trace}", "--out", "{trace}"),
    ("oversub", "{trace}:2", "--html", "{trace}"),
    ("sweep", "show", "{sweep}", "--html", "{sweep}"),
    ("pfi", "compute", "{jobs}", "--html", "{jobs}"),
    ("pfi", "compute", "{jobs}", "--curves-out", "{jobs}"),
    ("pfi", "allocate", "--jobs", "{jobs}", "--html", "{jobs}"),
    ("import", "{csv}", "--out", "{csv}"),
]


@pytest.mark.parametrize("argv", SAME_FILE_CASES, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("force", [False, True])
def test_an_input_is_never_its_own_output(
    cli: Cli, files: dict[str, Path], argv: tuple[str, ...], force: bool
) -> None:
    before = {k: digest(p) for k, p in files.items()}
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]
    result = cli(*args, *(["--force"] if force else []))
    assert result.exit_code == 2, result.stderr
    assert "is one of the command's inputs" in result.stderr
    assert {k: digest(p) for k, p in files.items()} == before


def test_existing_outputs_need_force(cli: Cli, files: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("keep me")
    for argv in (
        ("report", "--trace", files["trace"], "--out", page),
        ("oversub", f"{files['trace']}:2", "--html", page),
        ("sweep", "show", files["sweep"], "--html", page),
    ):
        r = cli(*argv)
        assert r.exit_code == 2 and "already exists (use --force" in r.stderr
        assert page.read_text() == "keep me"
    assert cli("sweep", "show", files["sweep"], "--html", page, "--force").exit_code == 0
    assert "<html>" in page.read_text()


def test_links_are_never_written_through(cli: Cli, files: dict[str, Path], tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "out.html"
    link.symlink_to(victim)
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "nowhere.html")
    for target in (link, dangling):
        for force in ([], ["--force"]):
            r = cli("report", "--trace", files["trace"], "--out", target, *force)
            assert r.exit_code == 2 and "symbolic link" in r.stderr
    assert victim.read_text() == "precious" and not (tmp_path / "nowhere.html").exists()
    # A link planted at the old, predictable temp name is not followed either.
    curves = tmp_path / "c.csv"
    (tmp_path / "c.csv.tmp").symlink_to(victim)
    assert cli("pfi", "compute", files["jobs"], "--curves-out", curves).exit_code == 0
    assert victim.read_text() == "precious" and curves.read_text().startswith("job,")


def test_a_failed_write_keeps_the_old_file_and_leaves_no_orphan(
    cli: Cli, files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.parquet"
    assert cli("import", files["csv"], "--out", out).exit_code == 0
    old = digest(out)

    def full_disk(table: object, where: object, **kwargs: object) -> None:
        Path(str(where)).write_bytes(b"PAR1 half a file")
        raise OSError(errno.ENOSPC, "No space left on device", str(where))

    monkeypatch.setattr(pq, "write_table", full_disk)
    r = cli("import", files["csv"], "--out", out, "--force")
    assert r.exit_code == 2 and r.stderr.startswith("error:") and str(out) in r.stderr
    assert "no space left on the device" in r.stderr and "Traceback" not in r.stderr
    assert digest(out) == old
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(TEMP_MARK)]


def test_writer_rules_directly(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    write_text(target, "1")
    with pytest.raises(BadInputError, match="already exists"):
        check_output(target, force=False)
    assert check_output(target, force=True) == target
    with pytest.raises(BadInputError, match="is a folder"):
        check_output(tmp_path, force=True)
    with pytest.raises(BadInputError, match="is a file, not a folder"):
        check_output(target / "y.json", force=True)
    # A stale temp file of a killed write is removed by the next write of the same name.
    stale = tmp_path / f".x.json.abc{TEMP_MARK}"
    stale.write_text("half")
    with atomic_write(target) as fh:
        fh.write("2")
    assert target.read_text() == "2" and not stale.exists()
    mode = os.stat(target).st_mode & 0o777
    assert mode == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_readers_skip_temp_files(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "run.parquet.parts"
    folder.mkdir()
    (folder / f".part-000000.parquet.x1{TEMP_MARK}").write_bytes(b"half a part")
    r = cli("info", folder)
    assert r.exit_code == 2
    assert "holds no .parquet files (only 1 temp file(s) of an unfinished write)" in r.stderr
    (folder / "part-000000.parquet").write_bytes((SAMPLES / "a100-7b.parquet").read_bytes())
    assert cli("info", folder).exit_code == 0


# ---- the knob channel ------------------------------------------------------------------------


def test_knob_channel_has_one_writer(tmp_path: Path) -> None:
    from powerkit.actuation.knobs import KnobChannel, Knobs

    path = tmp_path / "knobs.json"
    with KnobChannel(path) as first:
        assert first.write({"concurrency": 4}) == 1
        with pytest.raises(BadInputError, match=f"pid {os.getpid()}.*one writer at a time"):
            KnobChannel(path)
        reader = Knobs(path)
        assert reader.poll() and reader.get("concurrency") == 4
    with KnobChannel(path) as second:  # the first released its lock: the counter continues
        assert second.write({"concurrency": 8}) == 2
    assert reader.poll() and reader.get("concurrency") == 8
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~_umask()


def test_knobs_poll_keeps_the_last_good_value(tmp_path: Path) -> None:
    from powerkit.actuation.knobs import KnobChannel, Knobs

    path = tmp_path / "knobs.json"
    with KnobChannel(path) as channel:
        channel.write({"group_size": 8})
    reader = Knobs(path)
    assert reader.poll() and reader.error is None
    for broken in ("{not json", '{"version": "x", "knobs": {}}', "[1, 2]", ""):
        path.write_text(broken)
        assert reader.poll() is False
        assert reader.get("group_size") == 8 and reader.error is not None
    path.unlink()
    assert reader.poll() is False and reader.get("group_size") == 8
