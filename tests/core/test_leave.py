"""The command line's end (core.errors.leave): the exit code a command raised, its exit
functions run and its output flushed, without the interpreter's teardown."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _leave(body: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(
        """
        import atexit, sys
        from powerkit.core.errors import leave
        atexit.register(lambda: print("exit function ran"))
        def run():
        {body}
        leave(run)
        print("never reached")
        """
    ).format(body=textwrap.indent(body, "    "))
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("body", "code", "err"),
    [
        ("sys.stdout.write('result')", 0, ""),
        ("sys.exit()", 0, ""),
        ("sys.exit(2)", 2, ""),
        ("sys.exit(130)", 130, ""),
        ("sys.exit('a message')", 1, "a message\n"),
    ],
)
def test_the_exit_code_and_the_exit_functions(body: str, code: int, err: str) -> None:
    done = _leave(body)
    assert done.returncode == code
    assert done.stderr == err
    assert "never reached" not in done.stdout
    assert done.stdout.endswith("exit function ran\n")  # after the command's own output


def test_output_not_yet_flushed_is_written() -> None:
    # a block-buffered stdout (a pipe) holding a large result when the command returns
    done = _leave("sys.stdout.write('x' * 100_000)")
    assert done.returncode == 0
    assert done.stdout.startswith("x" * 100_000)


def test_a_reader_that_closed_the_pipe_is_no_error() -> None:
    script = (
        "from powerkit.core.errors import leave\n"
        "leave(lambda: print('line\\n' * 200_000, end=''))\n"
    )
    done = subprocess.run(
        f'{sys.executable} -c "{script}" | head -c 5',
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout == "line\n"
    assert done.stderr == ""


def test_the_command_line_collects_garbage_less_often() -> None:
    """Both entry points set the collector's thresholds before the command line loads (a
    command's own objects are not walked 700 allocations at a time); the library does not."""
    probe = (
        "import gc, runpy, sys; sys.argv = ['powerkit', '--version'];"
        "import powerkit; print(gc.get_threshold()[0]);"
        "from powerkit._entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    library_threshold, version = done.stdout.split("\n", 1)
    assert int(library_threshold) == 700 and version.startswith("powerkit ")
    script = "import gc, atexit; atexit.register(lambda: print(gc.get_threshold()[0]))\n"
    script += (
        "import sys; sys.argv = ['powerkit', '--version']\nfrom powerkit._entry import main\nmain()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.splitlines()[-1] == "100000", done.stdout
