"""Progress on long work: a bar on a terminal's stderr, plain lines when piped, nothing with
--json, and never anything on stdout."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

import powerkit.cli.progress as progress_module
from tests.conftest import Cli
from tests.econ.test_carbon import constant_trace


def test_a_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    monkeypatch.setattr(progress_module, "err", terminal)
    with progress_module.progress("composing", 4) as advance:
        for k in range(4):
            advance(1, f"draw {k + 1}")
    drawn = screen.getvalue()
    assert "composing" in drawn and "4/4" in drawn and "\x1b[" in drawn  # a Rich live bar


def test_piped_notes_become_lines_and_quiet_shows_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(progress_module, "err", Console(file=screen, force_terminal=False))
    with progress_module.progress("composing", 2) as advance:
        advance(1, "draw 1")
        advance(1)
    assert screen.getvalue() == "draw 1\n"
    with progress_module.progress("composing", 2, quiet=True) as advance:
        advance(1, "draw 2")
    assert screen.getvalue() == "draw 1\n"


def test_import_of_several_logs_says_each_when_piped(cli: Cli, tmp_path: Path) -> None:
    a = constant_trace(tmp_path / "a.csv", "2026-03-01T10:00:00", 2)
    b = constant_trace(tmp_path / "b.csv", "2026-03-01T11:00:00", 2)
    r = cli("import", a, b, "--host", "n1", "--out", tmp_path / "ab.parquet")
    assert r.exit_code == 0, r.stderr
    assert f"read {a}\nread {b}\n" in r.stderr and r.stdout == ""
    r = cli("import", a, b, "--host", "n1", "--out", tmp_path / "ab.parquet", "--force", "--json")
    assert r.exit_code == 0 and "read " not in r.stderr
    # one log: no line to say it (the closing summary says it all)
    r = cli("import", a, "--out", tmp_path / "a.parquet")
    assert r.exit_code == 0 and r.stderr.startswith("wrote ")


def test_report_over_several_inputs_says_each_when_piped(cli: Cli, tmp_path: Path) -> None:
    a = constant_trace(tmp_path / "a.csv", "2026-03-01T10:00:00", 2)
    b = constant_trace(tmp_path / "b.csv", "2026-03-01T11:00:00", 2)
    r = cli("report", "--trace", a, "--trace", b, "--out", tmp_path / "r.html")
    assert r.exit_code == 0, r.stderr
    assert f"trace {a}\ntrace {b}\n" in r.stderr and r.stdout == ""


def test_a_json_run_that_warns_of_nothing_never_loads_rich() -> None:
    """Rich is loaded when something is shown (a table, a warning, an error): a ``--json`` run
    with nothing to say on stderr does without it (design note 173)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import atexit, sys
        loaded = lambda: any(m.startswith("rich") for m in sys.modules)
        atexit.register(lambda: print("rich loaded", loaded()))
        trace = "sample_data/a100-7b.parquet"
        sys.argv = ["powerkit", "windows", trace, "--budget", "300W", "--json"]
        from powerkit._entry import main
        main()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("rich loaded False")
    # the same run as a table loads it
    table = script.replace(', "--json"]', "]")
    done = subprocess.run(
        [sys.executable, "-c", table], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.rstrip().endswith("rich loaded True")


def test_piped_warnings_and_errors_are_plain_lines_without_rich(tmp_path: Path) -> None:
    """Piped, a warning or an error is the plain line Rich would write, written without
    loading it; control characters from data are written out; ``FORCE_COLOR`` brings Rich
    (and its colour) back."""
    import os
    import subprocess
    import sys
    import textwrap

    log = tmp_path / "bad\x1bname.csv"
    log.write_text("timestamp,gpu,power_w\n2026-03-01 10:00:00,0,100\n2026-03-01 10:00:01,0,110\n")
    script = textwrap.dedent(
        """
        import atexit, sys
        loaded = lambda: any(m.startswith("rich") for m in sys.modules)
        atexit.register(lambda: print("rich loaded", loaded()))
        sys.argv = ["powerkit", *sys.argv[1:]]
        from powerkit._entry import main
        main()
        """
    )

    def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        plain = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
        return subprocess.run(
            [sys.executable, "-c", script, *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**plain, **env},
        )

    warned = run("info", str(log), "--json")
    assert warned.returncode == 0, warned.stderr
    assert warned.stdout.rstrip().endswith("rich loaded False")
    assert "warning: " + str(log).replace("\x1b", "\\x1b") + ": timestamps carry no zone" in (
        warned.stderr
    )
    assert "\x1b" not in warned.stderr
    failed = run("windows", str(tmp_path / "absent\x07.parquet"), "--budget", "300W")
    assert failed.returncode == 2
    assert failed.stdout.rstrip().endswith("rich loaded False")
    assert failed.stderr == f"error: {tmp_path}/absent\\x07.parquet: no such file or folder\n"
    coloured = run("windows", str(tmp_path / "absent.parquet"), "--budget", "300W", FORCE_COLOR="1")
    assert coloured.stdout.rstrip().endswith("rich loaded True")
    assert "\x1b[" in coloured.stderr and "no such file or folder" in coloured.stderr
