"""The reader options every command that reads a trace takes (``--tz``, ``--map``, ``--from``
...), declared once and parsed once into the ImportOptions every source is read with."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from powerkit.cli.options import (
    From,
    GpuName,
    GpusPerFrame,
    Host,
    Hosts,
    Map,
    MaxPower,
    Nameplate,
    PowerField,
    PowerSemantics,
    PowerUnit,
    SkipBadRows,
    Start,
    TimeUnit,
    To,
    Tz,
    Where,
)
from powerkit.trace.arguments import import_options
from powerkit.trace.options import ImportOptions

R = TypeVar("R")

#: The options every command that reads a trace takes, as (parameter, annotation, default).
_READER_PARAMS: tuple[tuple[str, Any, Any], ...] = (
    ("tz", Tz, None),
    ("skip_bad_rows", SkipBadRows, False),
    ("mapping", Map, None),
    ("where", Where, None),
    ("time_unit", TimeUnit, None),
    ("start", Start, None),
    ("power_unit", PowerUnit, "W"),
    ("max_power", MaxPower, None),
    ("time_from", From, None),
    ("time_to", To, None),
    ("hosts", Hosts, None),
    ("power_field", PowerField, None),
    ("power_semantics", PowerSemantics, None),
)


#: what a log may lack and the reader takes from the command line instead, by parameter
_SOURCE_PARAMS: dict[str, tuple[Any, Any]] = {
    "host": (Host, None),
    "gpus_per_frame": (GpusPerFrame, None),
    "nameplate": (Nameplate, None),
    "gpu_name": (GpuName, None),
}


#: all of them (a command whose own ``--nameplate`` means something else takes ``gpu_name``)
SOURCE = tuple(_SOURCE_PARAMS)


ReaderArgs = dict[str, Any]


#: the default a command's ``reader`` parameter declares; :func:`reader_options` fills it in
READER = ImportOptions()


def reader_options(
    *extra: str, parsed: bool = True
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Give a command the reader options (``--tz``, ``--map``, ``--from`` ...) and the
    ``extra`` source options of :data:`SOURCE` (``--host``, ``--nameplate`` ...).

    The command declares a ``reader`` parameter instead of a dozen options; it receives them
    parsed once, as the :class:`powerkit.trace.ImportOptions` every source is read with
    (``parsed=False``: the raw values, as keyword arguments for :func:`import_options`).
    """
    params = [*_READER_PARAMS, *((n, *_SOURCE_PARAMS[n]) for n in extra)]

    def decorate(fn: Callable[..., R]) -> Callable[..., R]:
        signature = inspect.signature(fn, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "reader"]
        added = [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint
            )
            for name, hint, default in params
        ]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> R:
            values = {name: kwargs.pop(name) for name, _, _ in params}
            kwargs["reader"] = import_options(**values) if parsed else values
            return fn(*args, **kwargs)

        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[
                p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is not p.empty
                else p
                for p in own
            ]
            + added
        )
        annotations = {k: v for k, v in fn.__annotations__.items() if k != "reader"}
        wrapper.__annotations__ = {**annotations, **{n: h for n, h, _ in params}}
        return wrapper

    return decorate
