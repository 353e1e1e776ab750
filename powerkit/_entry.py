"""The ``powerkit`` console script: a Ctrl-C while the command line is still loading ends as
quietly as one during a command (exit code 130, one line), never with a traceback."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Load the command line and run it (SIGTERM ends it as Ctrl-C does, cleaning up; the
    process ends without the interpreter's teardown: :func:`~powerkit.core.errors.leave`)."""
    from powerkit.core.errors import collect_less, keep_freed_memory, leave, stop_on_sigterm

    collect_less()
    keep_freed_memory()
    stop_on_sigterm()
    try:
        from powerkit.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    leave(run)
