"""The library's own small exception tree; the CLI maps every one of them to exit code 2.

A message names what was given wrong by :func:`option`: the parameter (``draws``) when the
library is called from Python, the flag (``--draws``) inside a command (the CLI's boundary
runs each command :func:`on_the_command_line`)."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable, Iterator
from typing import NoReturn

__all__ = [
    "BadInputError",
    "DeviceError",
    "NotPermittedError",
    "PowerkitError",
    "Terminated",
    "UnitError",
    "collect_less",
    "leave",
    "on_the_command_line",
    "option",
    "os_error",
    "stop_on_sigterm",
]

#: flags whose parameter is not the flag's name with underscores (a quantity's parameter
#: carries its unit: ``--grid 1s`` is ``grid_s=1.0``)
_PARAMETERS = {
    "from": "time_from",
    "to": "time_to",
    "map": "mapping",
    "json": "json_out",
    "format": "fmt",
    "windows": "windows_s",
    "grid": "grid_s",
    "interval": "interval_s",
    "period": "period_s",
    "latency": "latency_s",
    "duration": "duration_s",
    "horizon": "horizon_s",
    "nameplate": "nameplate_w",
    "max-power": "max_power_w",
}
# (process-wide, not a context variable: a command's worker threads name options as it does)
_FLAGS = [False]


def option(flag: str) -> str:
    """How a message names the option ``flag`` (its name without dashes, ``max-power``):
    ``--max-power`` inside a command, the parameter ``max_power`` from Python."""
    if _FLAGS[0]:
        return f"--{flag}"
    return _PARAMETERS.get(flag, flag.replace("-", "_"))


@contextlib.contextmanager
def on_the_command_line() -> Iterator[None]:
    """Within the block, messages name options as flags (``--draws``)."""
    before, _FLAGS[0] = _FLAGS[0], True
    try:
        yield
    finally:
        _FLAGS[0] = before


# OS errors that say the user named a path that cannot be used (exit 2), rather than a fault of
# the machine (exit 1).
_PATH_ERRNOS = {
    errno.ENOENT,
    errno.EACCES,
    errno.EPERM,
    errno.EISDIR,
    errno.ENOTDIR,
    errno.ENAMETOOLONG,
    errno.EROFS,
    errno.EEXIST,
    errno.ELOOP,
    errno.EINVAL,
    errno.EXDEV,
}


def os_error(exc: OSError) -> tuple[str, int]:
    """An OS error as (one line naming its path, exit code): 2 for a path the user named that
    cannot be used, 1 for a fault of the machine."""
    where = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    text = f"{where}: {reason}" if where != "" else reason
    return text, 2 if exc.errno in _PATH_ERRNOS else 1


class PowerkitError(Exception):
    """Base of every error powerkit raises on purpose; the message is one line for the user."""


class BadInputError(PowerkitError):
    """A file, row or option that powerkit cannot use (missing, unknown format, bad value)."""


class UnitError(BadInputError):
    """A duration or power string that does not parse (``"5 mins"``, ``"300"``, ``"-1W"``)."""


class DeviceError(PowerkitError):
    """The GPU management library is missing, failed, or the device is gone."""


class NotPermittedError(DeviceError):
    """The GPU refused an operation for lack of privileges (e.g. setting a power limit)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is (:func:`stop_on_sigterm`): a terminated command
    unwinds as an interrupted one does, its temp files and parts folders removed."""


def stop_on_sigterm() -> None:
    """Make SIGTERM raise :class:`Terminated` in the main thread (the command line's entry
    point calls it; a library caller's own handling of signals is left alone)."""
    import signal

    def terminated(signum: int, frame: object) -> None:
        raise Terminated()

    signal.signal(signal.SIGTERM, terminated)


def leave(run: Callable[[], object]) -> NoReturn:
    """Run the command line and end the process with its exit code, without the interpreter's
    teardown (design note 160).

    A finished command has written and closed everything it makes; what the interpreter
    would still do is free every module and object one by one, 0.05-0.1 s after an analysis
    of a large trace for nothing the user sees. The exit functions registered with
    :mod:`atexit` (a Monitor's close, Ray's shutdown, temp folders' finalizers) still run, and
    both streams are flushed (a reader that closed the pipe early is no error). A process
    started with stdout or stderr closed (Python leaves it None) writes there to the null
    device, as to a reader that has left, and ends with the command's own exit code."""
    import atexit
    import os
    import sys

    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (the process's own, to its end)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    try:
        run()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def collect_less() -> None:
    """Run the cyclic garbage collector less often in a command-line process (design note
    165): its first generation every 100,000 allocations instead of 700. A command allocates
    hundreds of thousands of objects while it loads its modules and parses its options, none
    of them garbage; each collection of them is work for nothing (0.01-0.02 s of an `import`
    or `windows` run, measured). Cycles are still collected, later."""
    import gc

    gc.set_threshold(100_000, 50, 100)


#: glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory() -> None:
    """Let a command-line process reuse the memory it frees instead of handing it back to the
    system at once (design note 171). glibc maps every allocation over its threshold (128 KiB
    to start) afresh and returns the top of its heap over another; a series' arrays (800 KB for
    100,000 samples) are then touched page by page again for every series, which costs more
    than the arithmetic on them (0.8 ms against 0.04 ms to copy two of them, measured). Here
    allocations under 4 MiB come from the heap, and up to 32 MiB of freed heap is kept (larger
    settings made no command faster and an import 40 MB larger). The
    peak a command holds is unchanged: what is kept is reused, not added. Nothing outside glibc
    (macOS has no mallopt) is touched; a library user's process is never changed."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # (the C library the interpreter runs on)
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 4 << 20)
    mallopt(_M_TRIM_THRESHOLD, 32 << 20)
