"""Nothing a user has is lost or read wrong: datasets as transactions, the path rules.

The kill tests run powerkit in a real child process that SIGKILLs itself at a chosen point of
its write (the n-th call of a write step), so every stage of a transaction is hit, not only
the ones a timer happens to land on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from powerkit.trace.dataset import MANIFEST
from tests.conftest import Cli

_DIE_AT = """
import os, signal, sys
import importlib
module, name, when = sys.argv[1], sys.argv[2], int(sys.argv[3])
target = importlib.import_module(module)
*owners, name = name.split(".")
for owner in owners:
    target = getattr(target, owner)
real = getattr(target, name)
calls = [0]
def dying(*args, **kwargs):
    calls[0] += 1
    if calls[0] == when:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
setattr(target, name, dying)
from powerkit.cli import app
app(sys.argv[4:], prog_name="powerkit")
"""


def killed(module: str, name: str, when: int, *args: str | Path) -> int:
    """Run ``powerkit ARGS`` in a child that SIGKILLs itself at the ``when``-th call of
    ``module.name``; return its exit code (-9 when the kill came)."""
    proc = subprocess.run(
        [sys.executable, "-c", _DIE_AT, module, name, str(when), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode


def samples(cli: Cli, path: Path) -> int:
    return int(cli.json("info", path)["samples"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two simulated recordings: 3 days (old) and 4 days (new), 10 s apart."""
    folder = tmp_path_factory.mktemp("runs")
    cli = Cli()
    for name, days in (("old", "3d"), ("new", "4d")):
        r = cli(
            "record",
            "--backend",
            "sim",
            "--duration",
            days,
            "--interval",
            "10s",
            "--out",
            folder / f"{name}.parquet",
            "-q",
        )
        assert r.exit_code == 0, r.stderr
    return folder / "old.parquet", folder / "new.parquet"


@pytest.mark.parametrize(
    ("module", "name", "when"),
    [
        ("powerkit.trace.dataset", "write_sorted", 1),  # before the first new partition
        ("powerkit.trace.dataset", "write_sorted", 3),  # with two new partitions written
        ("powerkit.trace.dataset", "_remove", 2),  # committed, the old files not yet removed
    ],
)
def test_a_killed_dataset_write_shows_old_or_new(
    cli: Cli, tmp_path: Path, runs: tuple[Path, Path], module: str, name: str, when: int
) -> None:
    old, new = runs
    ds = tmp_path / "ds"
    assert cli("import", old, "--out", f"{ds}/").exit_code == 0
    before, after = samples(cli, old), samples(cli, new)
    assert samples(cli, ds) == before
    code = killed(module, name, when, "import", new, "--out", f"{ds}/", "--force")
    assert code == -9
    r = cli("info", ds, "--json")
    assert r.exit_code == 0, r.stderr
    seen = json.loads(r.stdout)["samples"]
    assert seen == (after if name == "_remove" else before)
    # the next write removes what the killed one left, and nothing else
    assert cli("import", new, "--out", f"{ds}/", "--force").exit_code == 0
    assert samples(cli, ds) == after
    listed = json.loads((ds / MANIFEST).read_text())
    on_disk = sorted(p.relative_to(ds).as_posix() for p in ds.rglob("*.parquet"))
    assert on_disk == sorted(listed["files"]) and not listed["pending"]


def test_force_never_removes_a_file_powerkit_did_not_write(
    cli: Cli, tmp_path: Path, runs: tuple[Path, Path]
) -> None:
    old, new = runs
    ds = tmp_path / "ds"
    keep = ds / "archive" / "2025" / "important_run.parquet"
    keep.parent.mkdir(parents=True)
    keep.write_bytes(old.read_bytes())
    assert cli("import", new, "--out", f"{ds}/").exit_code == 2  # holds a dataset: --force
    assert cli("import", new, "--out", f"{ds}/", "--force").exit_code == 0
    assert keep.read_bytes() == old.read_bytes()
    r = cli("info", ds, "--json")
    assert json.loads(r.stdout)["samples"] == samples(cli, new)
    assert "1 Parquet file(s) not read" in r.stderr and "important_run" in r.stderr
    assert cli("import", old, "--out", f"{ds}/", "--force").exit_code == 0
    assert keep.exists() and samples(cli, ds) == samples(cli, old)


def test_a_recording_killed_while_it_is_split_is_recovered(cli: Cli, tmp_path: Path) -> None:
    ds = tmp_path / "rec"
    args = ("record", "--backend", "sim", "--duration", "3d", "--interval", "10s", "-q")
    # call 1 merges the parts into the staged recording; 2.. write the partitions
    assert killed("powerkit.trace.dataset", "write_sorted", 3, *args, "--out", f"{ds}/") == -9
    r = cli("info", ds)
    assert r.exit_code == 2  # the staged recording is hidden: no half dataset is read
    r = cli(*args, "--out", f"{ds}/")
    assert r.exit_code == 2 and "--recover" in r.stderr
    r = cli("record", "--out", f"{ds}/", "--recover")
    assert r.exit_code == 0, r.stderr
    assert "recovered 25,920 samples" in r.stderr
    assert samples(cli, ds) == 3 * 86_400 // 10
    assert not list(ds.glob(".powerkit-recording*"))


def test_a_parts_folder_with_no_whole_part_is_discarded(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run.parquet"
    parts = tmp_path / "run.parquet.parts"
    parts.mkdir()
    (parts / ".part-000000.parquet.abc.powerkit-tmp").write_bytes(b"PAR1 cut short")
    args = ("record", "--backend", "sim", "--duration", "1m", "--out", out, "-q")
    r = cli(*args)
    assert r.exit_code == 2 and f"powerkit record --out {out} --recover" in r.stderr
    r = cli("record", "--out", out, "--recover")
    assert r.exit_code == 0 and "held no whole part" in r.stderr
    assert not parts.exists()
    assert cli(*args).exit_code == 0
    r = cli("record", "--out", out, "--recover")
    assert r.exit_code == 2 and "no unfinished recording" in r.stderr


def test_a_killed_recording_is_recovered_into_its_file(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run.parquet"
    args = (
        "record",
        "--backend",
        "sim",
        "--duration",
        "13h",
        "--interval",
        "0.1s",
        "--out",
        out,
        "-q",
    )
    # the 3rd part file written, then killed: two whole parts remain
    assert killed("powerkit.trace.writing", "write_trace", 3, *args) == -9
    r = cli("record", "--out", out, "--recover")
    assert r.exit_code == 0 and "from 2 part(s)" in r.stderr
    assert samples(cli, out) > 0


def test_folder_names_never_become_columns(cli: Cli, tmp_path: Path) -> None:
    src = tmp_path / "run.parquet"
    assert cli("record", "--backend", "sim", "--duration", "10m", "--out", src, "-q").exit_code == 0
    truth = cli.json("info", src)
    for folder in ("power_w=5", "gpu=3", "ts=5", "host=x/date=2020-01-01"):
        f = tmp_path / "some" / folder / "run.parquet"
        f.parent.mkdir(parents=True)
        f.write_bytes(src.read_bytes())
        doc = cli.json("info", f)
        assert doc["mean_power_w"] == truth["mean_power_w"], folder
        assert doc["gpus"] == truth["gpus"] and doc["samples"] == truth["samples"]


def test_named_files_are_never_patterns(cli: Cli, tmp_path: Path) -> None:
    a = tmp_path / "ba.parquet"
    assert cli("record", "--backend", "sim", "--duration", "10m", "--out", a, "-q").exit_code == 0
    r = cli("info", tmp_path / "b[ab].parquet")
    assert r.exit_code == 2 and "no such file" in r.stderr
    odd = tmp_path / "b[ab].parquet"
    r = cli("record", "--backend", "sim", "--duration", "20m", "--out", odd, "-q")
    assert r.exit_code == 0, r.stderr
    assert cli.json("info", odd)["samples"] == 2 * cli.json("info", a)["samples"]
    assert cli.json("windows", odd, "--budget", "300W")["windows"]


def test_linked_folders_are_not_followed(cli: Cli, tmp_path: Path, runs: tuple[Path, Path]) -> None:
    old, new = runs
    ds = tmp_path / "ds"
    assert cli("import", old, "--out", f"{ds}/").exit_code == 0
    outside = tmp_path / "outside"
    (outside / "date=2030-01-01").mkdir(parents=True)
    (outside / "date=2030-01-01" / "part-0.parquet").write_bytes(new.read_bytes())
    (ds / "host=evil").symlink_to(outside, target_is_directory=True)
    (ds / MANIFEST).unlink()  # read as a hand-made folder: a walk
    r = cli("info", ds, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["samples"] == samples(cli, old)
    assert "linked folder(s) not followed" in r.stderr
    # and a write never goes through a linked partition folder
    host = next(ds.glob("host=*"))
    real = tmp_path / "real-host"
    host.rename(real)
    host.symlink_to(real, target_is_directory=True)
    r = cli("import", old, "--out", f"{ds}/", "--force")
    assert r.exit_code == 2 and "linked folder inside the dataset" in r.stderr


def test_a_manifest_cannot_lead_out_of_the_dataset(cli: Cli, tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    ds.mkdir()
    for entry in ("../x.parquet", "/etc/passwd", ""):
        (ds / MANIFEST).write_text(json.dumps({"kind": "powerkit dataset", "files": [entry]}))
        r = cli("info", ds)
        assert r.exit_code == 2 and "not a path inside the dataset" in r.stderr, entry
    (ds / MANIFEST).write_text("{not json")
    r = cli("info", ds)
    assert r.exit_code == 2 and "manifest is not JSON" in r.stderr


def test_negative_gpu_indices_are_refused_at_import(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "smi.csv"
    log.write_text(
        "timestamp, index, power.draw [W]\n"
        "2026/01/05 10:00:00.000, -1, 100.00 W\n2026/01/05 10:00:00.500, -1, 110.00 W\n"
    )
    r = cli("import", log, "--tz", "UTC", "--out", tmp_path / "x.parquet")
    assert r.exit_code == 2 and "GPU index -1" in r.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_plotly_js_never_replaces_an_input_or_a_stranger(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "t.parquet"
    assert (
        cli("record", "--backend", "sim", "--duration", "5m", "--out", trace, "-q").exit_code == 0
    )
    kept = trace.read_bytes()
    out = tmp_path / "x.html"
    r = cli("report", "--trace", trace, "--plotly-js", trace, "--out", out)
    assert r.exit_code == 2 and "is one of the command's inputs" in r.stderr
    r = cli("report", "--trace", trace, "--plotly-js", trace, "--out", out, "--force")
    assert r.exit_code == 2 and trace.read_bytes() == kept and not out.exists()
    notes = tmp_path / "notes.js"
    notes.write_text("my own script\n")
    r = cli("report", "--trace", trace, "--plotly-js", notes, "--out", out)
    assert r.exit_code == 2 and "is not Plotly's JavaScript" in r.stderr
    assert notes.read_text() == "my own script\n"
    shared = tmp_path / "plotly.js"
    assert cli("report", "--trace", trace, "--plotly-js", shared, "--out", out).exit_code == 0
    r = cli("report", "--trace", trace, "--plotly-js", shared, "--out", tmp_path / "y.html")
    assert r.exit_code == 0, r.stderr  # a Plotly bundle is shared freely
    r = cli("report", "--trace", trace, "--plotly-js", out, "--out", out, "--force")
    assert r.exit_code == 2


def test_a_killed_sweep_with_force_keeps_the_earlier_result(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "s.parquet"
    args = (
        "sweep",
        "--preset",
        "a100-7b",
        "--group-size",
        "4,8",
        "--point",
        "2m",
        "--warmup",
        "10s",
    )
    assert cli(*args, "--out", out).exit_code == 0
    earlier = out.read_bytes()
    code = killed(
        "powerkit.sweep.backends",
        "SimBackend.run",
        2,
        *args,
        "--seed",
        "5",
        "--out",
        out,
        "--force",
    )
    assert code == -9
    assert out.read_bytes() == earlier
    r = cli("sweep", "show", tmp_path / "s.unfinished.parquet")
    assert r.exit_code == 0 and "an unfinished sweep (1 run(s) stored)" in r.stderr


def test_an_unwritable_output_is_refused_before_the_work(cli: Cli, tmp_path: Path) -> None:
    for args in (
        ("sweep", "--preset", "a100-7b", "--group-size", "4,8", "--point", "60m"),
        ("record", "--backend", "sim", "--duration", "1h"),
        ("pfi", "sweep", "--preset", "h200-dense-pretrain", "--caps", "300W,700W"),
    ):
        r = cli(*args, "--out", "/proc/x.parquet")
        assert r.exit_code == 2, r.stderr
        assert "--out /proc/x.parquet: cannot write there" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 2 MB tmpfs (root, where mounts are allowed); else None (a file size limit is used)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    ok = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True
        ).returncode
        == 0
    )
    yield mount if ok else None
    if ok:
        subprocess.run(["umount", str(mount)], capture_output=True)


_FSIZE = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))
from powerkit.cli import app
app(sys.argv[1:], prog_name="powerkit")
"""


def test_a_full_disk_is_one_line_naming_the_file(
    cli: Cli, tmp_path: Path, small_disk: Path | None
) -> None:
    big = tmp_path / "big.parquet"  # 5 MB: more than the 2 MB disk holds
    rec = ("record", "--backend", "sim", "--duration", "6h", "--interval", "0.1s")
    assert cli(*rec, "--out", big, "-q").exit_code == 0
    for args in (("import", big), rec):
        if small_disk is not None:
            out = small_disk / "x.parquet"
            keep = small_disk / "kept.txt"
            keep.write_text("written before\n")
            proc = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _FSIZE.replace("2_000_000", "10**12"),
                    *map(str, args),
                    "--out",
                    str(out),
                ],
                capture_output=True,
                text=True,
            )
            assert keep.read_text() == "written before\n"
        else:
            out = tmp_path / "x.parquet"
            proc = subprocess.run(
                [sys.executable, "-c", _FSIZE, *map(str, args), "--out", str(out)],
                capture_output=True,
                text=True,
            )
        assert proc.returncode == 2, proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        assert "no space left on the device" in line and str(out) in line, proc.stderr
        assert "internal error" not in proc.stderr
        assert not out.exists()
