"""Parse text timestamps in bulk (Polars, vectorized) and localize them to UTC."""

from __future__ import annotations

import polars as pl

from powerkit.errors import BadInputError

__all__ = ["localize_to_utc", "parse_timestamps"]

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


def parse_timestamps(text: pl.Series, *, what: str) -> tuple[pl.Series, bool]:
    """Return (datetimes in µs, zoned) parsed from strings; unparsable values become null.

    Accepts nvidia-smi's ``YYYY/MM/DD HH:MM:SS.mmm``, ISO 8601 with or without offset, and
    unix epoch seconds. ``zoned`` is True when the text carried its own UTC offset (then the
    result is already UTC and ``--tz`` does not apply).
    """
    s = text.str.strip_chars().str.replace(r"Z$", "+00:00")
    sample = s.drop_nulls().head(50)
    if sample.len() == 0:
        raise BadInputError(f"{what}: no timestamps")
    as_number = sample.cast(pl.Float64, strict=False)
    if as_number.null_count() == 0:
        epoch = s.cast(pl.Float64, strict=False)
        micros = (epoch * 1e6).round(0).cast(pl.Int64, strict=False)
        return micros.cast(pl.Datetime("us")).dt.replace_time_zone("UTC"), True
    for fmt in _ZONED_FORMATS:
        parsed = sample.str.strptime(pl.Datetime("us"), fmt, strict=False)
        if parsed.null_count() <= sample.len() // 2:
            out = s.str.strptime(pl.Datetime("us", "UTC"), fmt, strict=False)
            return out, True
    for fmt in _FORMATS:
        parsed = sample.str.strptime(pl.Datetime("us"), fmt, strict=False)
        if parsed.null_count() <= sample.len() // 2:
            return s.str.strptime(pl.Datetime("us"), fmt, strict=False), False
    raise BadInputError(f"{what}: unrecognized timestamp format {sample[0]!r}")


def localize_to_utc(ts: pl.Series, tz: str, *, what: str) -> pl.Series:
    """Return naive local datetimes interpreted in zone ``tz`` and converted to UTC.

    Ambiguous wall times (the repeated hour when DST ends) take the earlier instant;
    non-existent ones (the skipped hour) become null and are reported as bad rows.
    """
    try:
        local = ts.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
    except Exception as exc:  # polars raises ComputeError for unknown zones
        raise BadInputError(f"{what}: unknown time zone {tz!r} ({exc})") from None
    return local.dt.convert_time_zone("UTC")
