"""Parse text timestamps in bulk (Polars expressions, vectorized) and localize them to UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.core.units import is_number, parse_duration

__all__ = [
    "TIME_RANGE_S",
    "TIME_UNITS",
    "assume_zone",
    "check_zone",
    "iso_utc",
    "localize_to_utc",
    "parse_start",
    "parse_time_bound",
    "parse_timestamps",
    "timestamp_expr",
]

#: microseconds per unit of a numeric time column (``--time-unit``)
TIME_UNITS = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}

# Formats seen in GPU logs, tried in order on the first values; the first that parses wins.
_FORMATS = (
    "%Y/%m/%d %H:%M:%S%.f",  # nvidia-smi --query-gpu
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y/%m/%d %H:%M:%S",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y%m%d %H:%M:%S",  # nvidia-smi dmon -o DT
)
_ZONED_FORMATS = ("%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f%z")


def timestamp_expr(sample: pl.Series, c: pl.Expr, *, what: str) -> tuple[pl.Expr, bool]:
    """Return (expression over column ``c``: µs datetimes, zoned) from a sample of its values.

    Accepts nvidia-smi's ``YYYY/MM/DD HH:MM:SS.mmm``, ISO 8601 with or without offset (``Z``
    included), and unix epoch seconds. Unparsable values become null. ``zoned`` is True when
    the text carries its own UTC offset (the result is then UTC and ``--tz`` does not apply).
    Whole-column string work is costly on large logs, so it is done only where the sample
    shows it is needed.
    """
    import polars as pl

    sample = sample.drop_nulls().head(50)
    if sample.len() == 0:
        raise BadInputError(f"{what}: no timestamps")
    if (sample != sample.str.strip_chars()).any():
        c, sample = c.str.strip_chars(), sample.str.strip_chars()
    if sample.str.ends_with("Z").any():
        c, sample = c.str.replace(r"Z$", "+00:00"), sample.str.replace(r"Z$", "+00:00")
    if sample.cast(pl.Float64, strict=False).null_count() == 0:
        micros = (c.cast(pl.Float64, strict=False) * 1e6).round(0).cast(pl.Int64, strict=False)
        return micros.cast(pl.Datetime("us", "UTC")), True
    for fmt in _ZONED_FORMATS:
        if _parses(sample, fmt):
            return c.str.strptime(pl.Datetime("us", "UTC"), fmt, strict=False), True
    for fmt in _FORMATS:
        if _parses(sample, fmt):
            return c.str.strptime(pl.Datetime("us"), fmt, strict=False), False
    raise BadInputError(f"{what}: unrecognized timestamp format {sample[0]!r}")


def _parses(sample: pl.Series, fmt: str) -> bool:
    import polars as pl

    parsed = sample.str.strptime(pl.Datetime("us"), fmt, strict=False)
    return parsed.null_count() <= sample.len() // 2


def parse_timestamps(text: pl.Series, *, what: str) -> tuple[pl.Series, bool]:
    """Return (datetimes in µs, zoned) parsed from strings; see :func:`timestamp_expr`."""
    import polars as pl

    expr, zoned = timestamp_expr(text, pl.col("x"), what=what)
    return pl.DataFrame({"x": text}).select(expr.alias(text.name))[text.name], zoned


def localize_to_utc(ts: pl.Series, tz: str, *, what: str) -> pl.Series:
    """Return naive local datetimes interpreted in zone ``tz`` and converted to UTC.

    Ambiguous wall times (the repeated hour when DST ends) take the earlier instant;
    non-existent ones (the skipped hour) become null and are reported as bad rows.
    """

    if tz in ("UTC", "Etc/UTC"):
        return ts.dt.replace_time_zone("UTC")  # metadata only: no per-row work
    try:
        local = ts.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
    except Exception as exc:  # polars raises ComputeError for unknown zones
        raise BadInputError(f"{what}: unknown time zone {tz!r} ({exc})") from None
    return local.dt.convert_time_zone("UTC")


#: the times a trace may hold: from the unix epoch to the start of 2200 (epoch seconds)
TIME_RANGE_S = (0.0, 7_258_118_400.0)


def iso_utc(epoch_s: float) -> str:
    """An epoch time as ISO 8601 in UTC with a ``Z`` (``2026-01-01T00:00:00.5Z``)."""
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat().replace("+00:00", "Z")


def parse_start(text: str | None, what: str = "--start", tz: str | None = None) -> datetime:
    """Return ``--start`` (or any time named ``what``): ISO 8601 or unix epoch seconds. An ISO
    time without an offset is in ``tz`` (UTC without it).

    Without one, the unix epoch (1970-01-01T00:00:00Z), chosen to be obviously not a real date.
    A time before 1970 or from 2200 on is refused (see TIME_RANGE_S).
    """
    if not text:
        return datetime(1970, 1, 1, tzinfo=UTC)
    text = text.strip()
    value: datetime | None = None
    if is_number(text):
        seconds = float(text)
        if not TIME_RANGE_S[0] <= seconds < TIME_RANGE_S[1]:
            raise BadInputError(f"{what} {text!r}: a time from 1970 to 2199")
        return datetime.fromtimestamp(seconds, tz=UTC)
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise BadInputError(
            f"{what} {text!r} is neither an ISO 8601 time nor unix epoch seconds"
        ) from None
    value = value if value.tzinfo else value.replace(tzinfo=ZoneInfo(tz) if tz else UTC)
    if not TIME_RANGE_S[0] <= value.timestamp() < TIME_RANGE_S[1]:
        raise BadInputError(f"{what} {text!r}: a time from 1970 to 2199")
    return value


#: numeric times before this epoch second (2001-09-09) are offsets from a start, not dates
EPOCH_FLOOR_S = 1e9


def start_anchor_s(
    first_s: float | None, start: str | None, what: object, warnings: list[str]
) -> float:
    """Seconds to add to a log's numeric times (``first_s``: the least of them): ``--start``
    where given; else 0, said in ``warnings`` where they look like offsets that lack it."""
    if start is not None:
        return parse_start(start).timestamp()
    if first_s is not None and first_s < EPOCH_FLOOR_S:
        warnings.append(
            f"{what}: the times are offsets ({first_s:g} s first), counted from 1970-01-01: "
            f"give {option('start')} (ISO or epoch seconds) for the real times"
        )
    return 0.0


def parse_time_bound(text: str, start_us: int, end_us: int, what: str) -> int:
    """Return ``--from``/``--to`` in epoch µs: ISO 8601 (UTC unless it has an offset), unix
    epoch seconds, ``+DUR`` after the trace's first sample or ``-DUR`` before its last."""
    text = text.strip()
    if text[:1] in "+-" and not is_number(text):
        offset = round(parse_duration(text[1:], allow_zero=True) * 1e6)
        return start_us + offset if text[0] == "+" else end_us - offset
    try:
        return round(parse_start(text).timestamp() * 1e6)
    except BadInputError:
        raise BadInputError(
            f"{what} {text!r}: give an ISO 8601 time, epoch seconds, +DUR (after the start) "
            "or -DUR (before the end), e.g. +10m"
        ) from None


def check_zone(tz: str) -> None:
    """Refuse a zone name the time-zone database does not know (``--tz``)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadInputError(
            f"{option('tz')} {tz!r}: unknown time zone (e.g. UTC, America/Chicago)"
        ) from None


def assume_zone(tz: str | None, path: object, warnings: list[str]) -> str:
    """Return the zone of a log whose times carry none: ``--tz``, else UTC with a warning."""
    if tz:
        return tz
    warnings.append(
        f"{path}: timestamps carry no zone; read as UTC (give {option('tz')}, e.g. "
        f"{option('tz')} America/Chicago)"
    )
    return "UTC"
