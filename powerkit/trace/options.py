"""What a trace argument is, and the options every reader understands.

Kept apart from the readers (and free of Polars) so that a command reading canonical Parquet
loads no text reader: each reader is imported when its format is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from powerkit.core.errors import BadInputError, option
from powerkit.trace.schema import ANNOTATION_COLUMNS, OPTIONAL_FLOAT_COLUMNS, OPTIONAL_INT_COLUMNS

__all__ = [
    "MAPPABLE",
    "POWER_UNITS",
    "ImportOptions",
    "is_prometheus_url",
    "parse_map",
    "parse_where",
    "prometheus_url",
]

#: canonical columns a file's column can be mapped to
MAPPABLE = (
    "ts",
    "host",
    "gpu",
    "power_w",
    "energy_j",
    *OPTIONAL_FLOAT_COLUMNS,
    *OPTIONAL_INT_COLUMNS,
    *ANNOTATION_COLUMNS,
)
#: watts per unit of a power cell (``250 W``, ``250000 mW``, ``0.25 kW``)
POWER_UNITS = {"mW": 1e-3, "W": 1.0, "kW": 1e3}
_SCHEME = re.compile(r"^prometheus\+(https?):/+", re.IGNORECASE)


def is_prometheus_url(text: str | Path) -> bool:
    """True for a trace argument such as ``prometheus+http://prom:9090``."""
    return bool(_SCHEME.match(str(text)))


def prometheus_url(text: str | Path) -> str:
    """The server's base URL of a ``prometheus+http(s)://HOST[:PORT][/PATH]`` argument (a
    ``Path`` may have folded its ``//``)."""
    return _SCHEME.sub(lambda m: f"{m.group(1).lower()}://", str(text)).rstrip("/")


@dataclass
class ImportOptions:
    """How every source is read (files of any format, datasets, Prometheus): what
    ``powerkit import`` and every analysis command's reader options give.

    Attributes:
        tz: the zone of timestamps that carry none (None: UTC, with a warning saying so).
        host: the host name of logs that do not name one.
        gpus_per_frame: GPUs interleaved per sampling frame, in logs without a GPU column.
        columns: the fields of a headerless nvidia-smi CSV, in order.
        skip_bad_rows: skip (and count) malformed rows instead of failing.
        gpu_name: the GPU model, where the log lacks it.
        nameplate_w: the per-GPU nameplate (TDP), W, where the log lacks it.
        interval_s: the sampling interval of logs without times, s.
        start: the start (ISO or epoch s) that relative numeric times count from.
        format: the reader to use (one of ``reader.FORMATS``; None: detected from the content).
        mapping: any CSV: canonical column -> the file's column (``ts=t_s,gpu=gpu_index,...``).
        time_unit: the unit of numeric times, s, ms, us or ns (None: seconds).
        power_unit: the unit of power cells that carry none, ``W`` or ``mW``.
        time_from, time_to: the time slice kept: ISO, epoch s, or +DUR after the start /
            -DUR before the end of the trace (None: all).
        hosts: only these hosts (None: all); prunes datasets.
        token_file, basic_auth_file: Prometheus: files of a bearer token, ``user:password``.
        max_power_w: the largest plausible per-GPU sample, W (None: 3x the nameplate where
            known, else 5 kW: ``schema.power_ceiling_w``); above it, a bad row.
        timeout_s, deadline_s: Prometheus: the most one request may take, and all requests
            together, s (60 s and 1 h; None: no bound).
        power_field: which logged power field is ``power_w``: ``draw``, ``instant`` or
            ``average`` (nvidia-smi's ``power.draw``, ``.instant``, ``.average``; a canonical
            trace's ``power_w``, ``power_instant_w``, ``power_avg_w``; None: the first of them).
        power_semantics: what ``power_w`` means (one of ``semantics.SEMANTICS``), over what
            the source or the GPU model implies (None: theirs).
        where: only the rows whose column holds the value (``COL=VALUE`` pairs): a column named
            twice keeps either value, different columns must all match.
    """

    tz: str | None = None
    host: str | None = None
    gpus_per_frame: int | None = None
    columns: list[str] | None = None
    skip_bad_rows: bool = False
    gpu_name: str | None = None
    nameplate_w: float | None = None
    interval_s: float | None = None
    start: str | None = None
    format: str | None = None
    mapping: dict[str, str] | None = None
    time_unit: str | None = None
    power_unit: str = "W"
    time_from: str | None = None
    time_to: str | None = None
    hosts: tuple[str, ...] | None = None
    token_file: str | None = None
    basic_auth_file: str | None = None
    max_power_w: float | None = None
    timeout_s: float = 60.0
    deadline_s: float | None = 3600.0
    power_field: str | None = None
    power_semantics: str | None = None
    where: tuple[tuple[str, str], ...] = ()


def parse_map(text: str | None) -> dict[str, str] | None:
    """Return ``--map ts=COL,gpu=COL,power_w=COL`` as {canonical: file column}."""
    if text is None:
        return None
    mapping: dict[str, str] = {}
    for part in text.split(","):
        key, sep, column = part.partition("=")
        key, column = key.strip(), column.strip()
        if not sep or not key or not column:
            raise BadInputError(
                f"{option('map')} {text!r}: expected CANONICAL=COLUMN pairs, e.g. ts=t_s"
            )
        if key not in MAPPABLE:
            raise BadInputError(
                f"{option('map')}: unknown canonical column {key!r} (one of {', '.join(MAPPABLE)})"
            )
        if key in mapping:
            raise BadInputError(f"{option('map')}: {key} is mapped twice")
        mapping[key] = column
    for need in ("ts", "power_w"):
        if need not in mapping:
            raise BadInputError(f"{option('map')} {text!r}: map {need}=COLUMN too")
    return mapping


def parse_where(items: list[str] | tuple[str, ...] | None) -> tuple[tuple[str, str], ...]:
    """Return ``--where COL=VALUE`` options as (column, value) pairs."""
    pairs = []
    for item in items or ():
        column, sep, value = item.partition("=")
        if not sep or not column.strip() or not value.strip():
            raise BadInputError(
                f"{option('where')} {item!r}: expected COLUMN=VALUE, e.g. Field=155"
            )
        pairs.append((column.strip(), value.strip()))
    return tuple(pairs)
