"""A command line's words for reading traces, parsed: the reader options (``--tz``, ``--map``,
``--from`` ...) as :class:`ImportOptions`, host lists, and fleet members (``path:count@700W``),
each refused in one line naming the option."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from powerkit.core.errors import BadInputError, option
from powerkit.core.units import list_items, parse_duration, parse_watts
from powerkit.trace.model import Trace
from powerkit.trace.options import POWER_UNITS, ImportOptions, parse_map, parse_where
from powerkit.trace.reader import read_trace
from powerkit.trace.timeparse import TIME_UNITS, check_zone

__all__ = ["MAX_MEMBER_COUNT", "import_options", "parse_hosts", "parse_member", "read_members"]

#: the most copies of one trace a fleet may count (a fleet composed of them takes time in
#: proportion: about 40 s for a million copies of an 8-GPU trace of 20 minutes)
MAX_MEMBER_COUNT = 1_000_000


def import_options(
    *,
    tz: str | None = None,
    host: str | None = None,
    gpus_per_frame: int | None = None,
    skip_bad_rows: bool = False,
    gpu_name: str | None = None,
    nameplate: str | None = None,
    columns: str | None = None,
    interval: str | None = None,
    start: str | None = None,
    fmt: str | None = None,
    mapping: str | None = None,
    time_unit: str | None = None,
    power_unit: str = "W",
    max_power: str | None = None,
    time_from: str | None = None,
    time_to: str | None = None,
    hosts: str | None = None,
    where: list[str] | None = None,
    power_field: str | None = None,
    power_semantics: str | None = None,
) -> ImportOptions:
    """Return reader options from command-line strings (units parsed strictly)."""
    if gpus_per_frame is not None and gpus_per_frame < 1:
        raise BadInputError(f"{option('gpus-per-frame')} {gpus_per_frame}: must be at least 1")
    if tz is not None:
        check_zone(tz)
    nameplate_w = parse_watts(nameplate, option("nameplate"))
    if power_unit not in POWER_UNITS:  # refused whatever the format (never ignored)
        raise BadInputError(
            f"{option('power-unit')} {power_unit!r}: one of {', '.join(POWER_UNITS)}"
        )
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise BadInputError(f"{option('time-unit')} {time_unit!r}: one of {', '.join(TIME_UNITS)}")
    from powerkit.trace.overrides import check_power_semantics, power_field_key

    return ImportOptions(
        power_field=None if power_field is None else power_field_key(power_field),
        power_semantics=check_power_semantics(power_semantics),
        max_power_w=parse_watts(max_power, option("max-power")),
        tz=tz,
        host=host,
        gpus_per_frame=gpus_per_frame,
        columns=[c.strip() for c in columns.split(",")] if columns else None,
        skip_bad_rows=skip_bad_rows,
        gpu_name=gpu_name,
        nameplate_w=nameplate_w,
        interval_s=parse_duration(interval) if interval else None,
        start=start,
        format=fmt,
        mapping=parse_map(mapping),
        time_unit=time_unit,
        power_unit=power_unit,
        time_from=time_from,
        time_to=time_to,
        hosts=None if hosts is None else parse_hosts(hosts),
        where=parse_where(where),
    )


def parse_member(text: str) -> tuple[Path, int, float | None]:
    """A fleet member ``path[:count][@NAMEPLATE]`` as (path, count, per-GPU nameplate in W or
    None): ``72b.parquet:2@700W`` is that trace's GPUs twice over, each of a 700 W nameplate.
    A file named like that (``run@2x.parquet``) is a path, not a nameplate."""
    if not Path(text).exists():
        head, at, tail = text.rpartition("@")
        if at and head:
            try:
                plate = parse_watts(tail, f"{text!r}: the nameplate after '@'")
            except BadInputError as exc:
                raise BadInputError(f"{exc} (a member is PATH[:COUNT][@NAMEPLATE])") from None
            member, times, _ = parse_member(head)
            return member, times, plate
    path, sep, count = text.rpartition(":")
    if sep and count.isdigit() and path:
        if not 1 <= int(count) <= MAX_MEMBER_COUNT:
            raise BadInputError(f"{text!r}: a member count must be from 1 to {MAX_MEMBER_COUNT:,}")
        return Path(path), int(count), None
    if sep and count and not count.isdigit() and path and not Path(text).exists():
        raise BadInputError(f"{text!r}: the count after ':' must be a whole number")
    return Path(text), 1, None


def read_members(
    members: list[tuple[Path, int, float | None]], opts: ImportOptions, nameplate_w: float | None
) -> list[tuple[Trace, int]]:
    """The members' traces (with their counts), each read with its own nameplate where it
    names one, else ``nameplate_w`` (``--nameplate``), else its metadata's."""
    return [
        (
            read_trace(path, replace(opts, nameplate_w=plate or nameplate_w or opts.nameplate_w)),
            count,
        )
        for path, count, plate in members
    ]


def parse_hosts(text: str) -> tuple[str, ...]:
    """``--hosts node-1,node-2`` as a tuple of host names."""
    names = tuple(list_items(text, option("hosts")))
    if not names:
        raise BadInputError(f"{option('hosts')} {text!r}: give host names, e.g. node-1,node-2")
    return names
