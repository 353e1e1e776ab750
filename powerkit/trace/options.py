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
    """Options every text reader understands (``powerkit import`` / analysis commands)."""

    #: zone of timestamps that carry none; None: UTC, with a warning saying so
    tz: str | None = None
    host: str | None = None
    gpus_per_frame: int | None = None
    columns: list[str] | None = None
    skip_bad_rows: bool = False
    gpu_name: str | None = None
    nameplate_w: float | None = None
    interval_s: float | None = None
    start: str | None = None
    #: the reader to use (one of reader.FORMATS); None detects it from the content
    format: str | None = None
    #: any CSV: canonical column -> the file's column (``--map ts=t_s,gpu=gpu_index,...``)
    mapping: dict[str, str] | None = None
    #: unit of numeric times (``--time-unit``); None: seconds
    time_unit: str | None = None
    #: unit of power cells without one (``--power-unit``)
    power_unit: str = "W"
    #: time slice (``--from`` / ``--to``): ISO, epoch s, or +DUR after the start / -DUR before
    #: the end of the trace
    time_from: str | None = None
    time_to: str | None = None
    #: only these hosts (``--hosts``); None: all
    hosts: tuple[str, ...] | None = None
    #: Prometheus credentials files (``import prometheus --token-file/--basic-auth-file``)
    token_file: str | None = None
    basic_auth_file: str | None = None
    #: the largest plausible per-GPU sample in W (``--max-power``); None: 3x the nameplate
    #: where known, else 5 kW (schema.power_ceiling_w)
    max_power_w: float | None = None
    #: Prometheus: the most one request may take, and all requests together (None: no bound)
    timeout_s: float = 60.0
    deadline_s: float | None = 3600.0
    #: only the rows whose column holds the value (``--where COL=VALUE``, repeatable): a
    #: column named twice keeps either value, different columns must all match
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
