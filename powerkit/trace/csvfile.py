"""Read canonical CSV: the canonical column names as a header, ts as ISO 8601 or epoch s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from powerkit.errors import BadInputError
from powerkit.trace.model import Trace
from powerkit.trace.nameplate import lookup_nameplate_w
from powerkit.trace.schema import (
    ANNOTATION_COLUMNS,
    OPTIONAL_FLOAT_COLUMNS,
    GpuMeta,
    TraceMeta,
    to_canonical,
)
from powerkit.trace.smi import ImportOptions
from powerkit.trace.textlog import resolve_bad_rows
from powerkit.trace.timeparse import localize_to_utc, parse_timestamps

__all__ = ["looks_like_canonical_csv", "read_canonical_csv"]


def looks_like_canonical_csv(first_line: str) -> bool:
    """Return True for a header naming at least ts and power_w."""
    names = {c.strip().strip('"') for c in first_line.split(",")}
    return {"ts", "power_w"} <= names


def read_canonical_csv(path: Path, opts: ImportOptions, warnings: list[str]) -> Trace:
    """Return a Trace from a canonical CSV; host defaults to ``--host`` or the file stem."""
    try:
        df = pl.read_csv(path, infer_schema=False, truncate_ragged_lines=True)
    except pl.exceptions.PolarsError as exc:
        raise BadInputError(f"{path}: cannot parse as CSV ({exc})") from None
    if df.height == 0:
        raise BadInputError(f"{path}: no samples (empty trace)")
    ts, zoned = parse_timestamps(df["ts"], what=str(path))
    power = df["power_w"].str.strip_chars().cast(pl.Float64, strict=False)
    bad = ts.is_null() | power.is_null()
    keep = ~bad
    rows = []
    for i in np.flatnonzero(bad.to_numpy()).tolist():
        column = "ts" if ts[i] is None else "power_w"
        rows.append((i + 2, f"unparsable {column} {df[column][i]!r}"))
    resolve_bad_rows(
        path, rows, last_line=_cut_short_line(df, 2), skip=opts.skip_bad_rows, warnings=warnings
    )
    frame = pl.DataFrame({"ts": ts, "power_w": power})
    frame = frame.with_columns(
        (
            df["host"] if "host" in df.columns else pl.Series([opts.host or path.stem] * df.height)
        ).alias("host"),
        (
            df["gpu"].cast(pl.Int16, strict=False)
            if "gpu" in df.columns
            else pl.Series([0] * df.height, dtype=pl.Int16)
        ).alias("gpu"),
    )
    if opts.host:
        frame = frame.with_columns(pl.lit(opts.host).alias("host"))
    numeric = [
        "energy_j",
        *OPTIONAL_FLOAT_COLUMNS,
        *(c for c in ANNOTATION_COLUMNS if c != "phase"),
    ]
    for name in numeric:
        if name in df.columns:
            frame = frame.with_columns(df[name].cast(pl.Float64, strict=False).alias(name))
    if "phase" in df.columns:
        frame = frame.with_columns(df["phase"].alias("phase"))
    frame = frame.filter(keep)
    if frame["gpu"].null_count():
        raise BadInputError(f"{path}: column gpu holds a value that is not an integer")
    if not zoned:
        frame = frame.with_columns(localize_to_utc(frame["ts"], opts.tz, what=str(path)))
    series = frame.select("host", "gpu").unique().sort("host", "gpu").rows()
    nameplate = opts.nameplate_w or lookup_nameplate_w(opts.gpu_name)
    meta = TraceMeta(
        source="csv",
        interval_s=opts.interval_s,
        tz="UTC" if zoned else opts.tz,
        gpus=[GpuMeta(host=h, gpu=g, name=opts.gpu_name, nameplate_w=nameplate) for h, g in series],
        extra={"imported_from": str(path)},
    )
    return Trace(
        meta=meta, table_=to_canonical(frame, what=str(path)), origin=str(path), warnings=warnings
    )


def _cut_short_line(df: pl.DataFrame, first_data_line: int) -> int:
    """Return the line number of the last row if it has fewer fields than the header, else 0."""
    last = df.height - 1
    return last + first_data_line if df.row(last)[-1] is None else 0
