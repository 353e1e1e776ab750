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


class _FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


def test_the_command_line_keeps_freed_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    from powerkit.core.errors import keep_freed_memory

    libc = _FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    keep_freed_memory()
    assert libc.calls == [(-3, 4 << 20), (-1, 32 << 20)]  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    from powerkit.core.errors import keep_freed_memory

    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())  # (macOS: no mallopt)
    keep_freed_memory()


def test_only_the_console_script_changes_the_allocator() -> None:
    # the library, imported and used, never touches a user's process; the entry point does
    script = textwrap.dedent(
        """
        import ctypes, sys
        calls = []
        class Libc:
            def mallopt(self, p, v):
                calls.append(p)
        ctypes.CDLL = lambda name: Libc()
        import powerkit, powerkit.cli
        print("library", len(calls))
        sys.argv = ["powerkit", "--version"]
        from powerkit._entry import main
        import atexit
        atexit.register(lambda: print("entry", len(calls)))
        main()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert "library 0" in done.stdout
    assert "entry 2" in done.stdout


def test_a_command_started_with_a_stream_closed_ends_with_its_code() -> None:
    """A process started with descriptor 1 or 2 closed (Python leaves the stream None) writes
    there to the null device, as to a reader that has left: the command ends with its own
    exit code, not an internal error about the missing stream."""
    import os

    def run(closed: int, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "powerkit", *args],
            stdout=None if closed == 1 else subprocess.PIPE,
            stderr=None if closed == 2 else subprocess.PIPE,
            preexec_fn=lambda: os.close(closed),  # (a test's own child, no threads)
            timeout=120,
            check=False,
        )

    failed = run(2, "windows", "/no/such/trace", "--budget", "300W")
    assert failed.returncode == 2 and failed.stdout == b""
    done = run(1, "windows", "sample_data/a100-7b.parquet", "--budget", "300W", "--json")
    assert done.returncode == 0 and done.stderr == b""
