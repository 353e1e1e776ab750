"""The one error boundary of the command line.

Every way a command can end badly ends in one line on stderr:

* bad input (a :class:`PowerkitError`, a bad option, a path that cannot be read or written):
  ``error: ...``, exit code 2;
* an interrupt (Ctrl-C): ``interrupted``, exit 130; SIGTERM: ``terminated``, exit 143;
* anything unexpected (a bug, memory exhausted): ``internal error: ...``, exit code 1, naming
  ``--debug``, which shows the traceback instead.

Text from data (file names, cell values) is never read as Rich markup, and its control
characters are written out (core/shown.py)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, ParamSpec, TypeVar

import typer
from typer._click.exceptions import ClickException
from typer.core import TyperGroup

from powerkit.core.errors import PowerkitError, Terminated, on_the_command_line, os_error
from powerkit.core.stderr import Stderr

__all__ = ["LazyGroup", "PowerkitGroup", "err", "fail", "handle_errors", "set_debug", "warn"]

P = ParamSpec("P")
R = TypeVar("R")


err: Any = Stderr()


class _State:
    debug = False


def set_debug(value: bool) -> None:
    """``--debug``: let unexpected errors show their traceback."""
    _State.debug = value


def fail(message: str, code: int, label: str = "error") -> None:
    """Print one line (never interpreted as markup) and exit with ``code``."""
    text = " ".join(str(message).split()) or type(message).__name__
    err.line(label, text, "bold red")
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print a warning line on stderr (never interpreted as markup)."""
    err.line("warning", message, "yellow")


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a command inside the error boundary (see the module docstring)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            with on_the_command_line():
                return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except PowerkitError as exc:
            fail(str(exc), 2)
        except Terminated:
            fail("stopped by SIGTERM", 143, "terminated")
        except KeyboardInterrupt:
            fail("stopped by the user", 130, "interrupted")
        except OSError as exc:
            if _State.debug:
                raise
            text, code = os_error(exc)
            fail(text, code, "error" if code == 2 else "internal error")
        except MemoryError:
            if _State.debug:
                raise
            fail("out of memory (run with --debug for the traceback)", 1, "internal error")
        except Exception as exc:
            if _State.debug:
                raise
            fail(
                f"{type(exc).__name__}: {exc} (run with --debug for the traceback)",
                1,
                "internal error",
            )
        raise AssertionError("unreachable")

    return wrapper


class PowerkitGroup(TyperGroup):
    """The root command: usage errors (an unknown option, a missing value) as one line too."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as exc:
            where = getattr(getattr(exc, "ctx", None), "command_path", None)
            hint = f" (see `{where} --help`)" if where else ""
            code = exc.exit_code if exc.exit_code else 2
            try:
                fail(exc.format_message() + hint, code)
            except typer.Exit as done:
                rv = done.exit_code
        except typer.Abort:
            err.print("[bold red]interrupted[/]", markup=True)
            rv = 130
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


class LazyGroup(PowerkitGroup):
    """The root group: commands come from a table and load only when they are used.

    Listing them (``powerkit --help``, shell completion of command names) reads the table;
    running one, or asking for its own help, imports its module and builds it with Typer.
    """

    #: name -> (module, attribute, one-line help), set by powerkit.cli
    table: ClassVar[dict[str, tuple[str, str, str]]] = {}
    #: the same for old names that run but are not listed
    hidden_table: ClassVar[dict[str, tuple[str, str, str]]] = {}
    #: a command's subcommands where the command itself takes positional arguments (``cap
    #: latency``): (command, subcommand) -> (module, attribute, one-line help)
    sub_table: ClassVar[dict[tuple[str, str], tuple[str, str, str]]] = {}
    _listing: ClassVar[bool] = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        entry = self.sub_table.get((args[0], args[1])) if len(args) > 1 else None
        if entry is None:
            return super().resolve_command(ctx, args)
        name = f"{args[0]} {args[1]}"
        return name, _load(name, *entry[:2]), args[2:]

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.table)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = self.table.get(cmd_name) or self.hidden_table.get(cmd_name)
        if entry is None:
            return None
        module_name, attribute, short = entry
        if self._listing:
            from typer.core import TyperCommand

            return TyperCommand(cmd_name, help=short, short_help=short)
        return _load(cmd_name, module_name, attribute)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        LazyGroup._listing = True  # the command list needs names and one-liners only
        try:
            super().format_help(ctx, formatter)
        finally:
            LazyGroup._listing = False


@functools.cache
def _load(name: str, module_name: str, attribute: str) -> Any:
    """Import a command's module and build its Click command (cached per process)."""
    import importlib

    import typer.main

    target = getattr(importlib.import_module(module_name), attribute)
    if isinstance(target, typer.Typer):
        group = typer.main.get_group(target)
        group.name = name
        return group
    single = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    single.command(name)(target)
    return typer.main.get_command(single)
