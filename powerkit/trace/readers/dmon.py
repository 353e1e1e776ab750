"""Read ``nvidia-smi dmon`` logs (default columns, ``-s p...``, with or without ``-o DT``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.trace.model import Trace
from powerkit.trace.nameplate import lookup_nameplate_w
from powerkit.trace.options import ImportOptions
from powerkit.trace.readers.textlog import nonblank_lines, resolve_bad_rows
from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical
from powerkit.trace.semantics import usage_semantics
from powerkit.trace.timeparse import assume_zone, localize_to_utc, parse_start

__all__ = ["looks_like_dmon", "read_dmon"]

_COLUMN_MAP = {
    "pwr": "power_w",
    "gtemp": "temp_c",
    "sm": "gpu_util",
    "mem": "mem_util",
    "mclk": "mem_clock_mhz",
    "pclk": "sm_clock_mhz",
}

_Row = tuple[int, str, str, int, float, dict[str, float | None]]


def looks_like_dmon(first_line: str) -> bool:
    """Return True for dmon's first header line (``# gpu pwr gtemp ...``)."""
    words = first_line.lstrip("#").lower().split()
    return first_line.startswith("#") and "gpu" in words


def read_dmon(path: Path, opts: ImportOptions, warnings: list[str]) -> Trace:
    """Return a Trace from a dmon log; without time columns, ``--start``/``--interval`` apply."""
    header: list[str] | None = None
    rows: list[_Row] = []
    bad: list[tuple[int, str]] = []
    lines, line_count = nonblank_lines(path)
    for lineno, stripped in lines:
        if stripped.startswith("#"):
            words = stripped.lstrip("#").split()
            if words and words[0].lower() in ("gpu", "date", "time"):
                header = [w.lower() for w in words]
            continue
        if header is None:
            raise BadInputError(f"{path}: line {lineno}: data before the dmon header line")
        if "pwr" not in header:
            raise BadInputError(f"{path}: dmon log has no pwr column (record with -s p)")
        cells = stripped.split()
        if len(cells) != len(header):
            bad.append((lineno, "wrong number of fields"))
            continue
        record = dict(zip(header, cells, strict=True))
        try:
            gpu = int(record["gpu"])
            power = float(record["pwr"])
        except ValueError:
            bad.append((lineno, f"unparsable gpu/pwr {record['gpu']!r}/{record['pwr']!r}"))
            continue
        if power < 0:
            raise BadInputError(f"{path}: line {lineno}: negative power {power} W")
        extras = {
            target: _number(record[src])
            for src, target in _COLUMN_MAP.items()
            if src in record and target != "power_w"
        }
        rows.append((lineno, record.get("date", ""), record.get("time", ""), gpu, power, extras))
    resolve_bad_rows(path, bad, last_line=line_count, skip=opts.skip_bad_rows, warnings=warnings)
    if not rows:
        raise BadInputError(f"{path}: no samples (empty trace)")
    ts = _times(rows, opts, path, warnings)
    frame = pl.DataFrame(
        {
            "ts": ts,
            "gpu": [r[3] for r in rows],
            "power_w": [r[4] for r in rows],
            **{k: [r[5][k] for r in rows] for k in rows[0][5]},
        }
    )
    host = opts.host or path.stem
    frame = frame.with_columns(pl.lit(host).alias("host"))
    gpus = sorted(set(frame["gpu"].to_list()))
    nameplate = opts.nameplate_w or lookup_nameplate_w(opts.gpu_name)
    meta = TraceMeta(
        source="dmon",
        power_semantics=usage_semantics(opts.gpu_name),
        interval_s=opts.interval_s or 1.0,
        tz=opts.tz or "UTC",
        gpus=[GpuMeta(host=host, gpu=g, name=opts.gpu_name, nameplate_w=nameplate) for g in gpus],
        extra={
            "imported_from": str(path),
            **({"tz_assumed": True} if rows[0][2] and not opts.tz else {}),
        },
    )
    return Trace(
        meta=meta, table_=to_canonical(frame, what=str(path)), origin=str(path), warnings=warnings
    )


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # dmon prints "-" for fields the GPU does not report


def _times(rows: list[_Row], opts: ImportOptions, path: Path, warnings: list[str]) -> pl.Series:
    if rows[0][2]:
        dates = [r[1] for r in rows]
        if not dates[0]:
            start_date = (opts.start or "1970-01-01")[:10].replace("-", "")
            dates = [start_date] * len(rows)
            warnings.append(f"{path}: dmon log has times but no dates; dated {start_date}")
        text = pl.Series([f"{d} {r[2]}" for d, r in zip(dates, rows, strict=True)])
        naive = text.str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False)
        if naive.null_count():
            i = int(naive.is_null().arg_max() or 0)
            raise BadInputError(f"{path}: line {rows[i][0]}: unparsable date/time {text[i]!r}")
        return localize_to_utc(naive, assume_zone(opts.tz, path, warnings), what=str(path))
    # No time columns: frames advance by one interval each time a GPU index repeats.
    interval = opts.interval_s or 1.0
    start = parse_start(opts.start)
    warnings.append(
        f"{path}: dmon log has no time columns (-o DT); times assumed from "
        f"{start.isoformat()} every {interval:g} s (set {option('start')}, {option('interval')})"
    )
    frame_no, seen, out = 0, set[int](), []
    for r in rows:
        if r[3] in seen:
            frame_no, seen = frame_no + 1, set()
        seen.add(r[3])
        out.append(start + timedelta(seconds=frame_no * interval))
    return pl.Series(out, dtype=pl.Datetime("us", "UTC"))
