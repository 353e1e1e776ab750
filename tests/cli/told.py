"""The commands a generated plan or page tells its reader to run, parsed as the command line
would parse them (options, their values' types, the positional arguments), without running."""

from __future__ import annotations

import re
import shlex
from typing import Any

import typer.main

from powerkit.cli import app

#: a command in backticks (it may wrap over lines in Markdown)
_TOLD = re.compile(r"`(powerkit [^`]+)`")


def told_commands(text: str) -> list[str]:
    """Every ``powerkit ...`` command in backticks in ``text``, its line breaks joined."""
    return [" ".join(found.split()) for found in _TOLD.findall(text)]


def parse_told(line: str, placeholders: dict[str, str] | None = None) -> dict[str, Any]:
    """Parse ``line`` (``powerkit CMD ...``) as the command line would, with each word of
    ``placeholders`` replaced (``L`` -> ``1s``); returns its parameters and, under
    ``"positional"``, its positional arguments. A usage error raises."""
    words = [(placeholders or {}).get(w, w) for w in shlex.split(line)][1:]
    group = typer.main.get_command(app)
    ctx = group.make_context("powerkit", list(words), resilient_parsing=False)
    name, command, rest = group.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
    while hasattr(command, "resolve_command") and rest and not rest[0].startswith("-"):
        sub = command.make_context(name, list(rest), parent=ctx)
        name, command, rest = command.resolve_command(sub, [*sub._protected_args, *sub.args])
        ctx = sub
    parsed = command.make_context(name, list(rest), parent=ctx)
    positional = [
        value
        for param in command.params
        if param.param_type_name == "argument"
        for value in (
            parsed.params[param.name]
            if isinstance(parsed.params[param.name], list | tuple)
            else [parsed.params[param.name]]
        )
        if value is not None
    ]
    return {**parsed.params, "positional": [str(v) for v in positional]}
