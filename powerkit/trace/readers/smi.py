"""Read ``nvidia-smi --query-gpu ... --format=csv`` logs (with or without header and units)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.trace.model import Trace
from powerkit.trace.nameplate import lookup_nameplate_w
from powerkit.trace.options import ImportOptions
from powerkit.trace.readers.outliers import time_problems
from powerkit.trace.readers.smi_gpus import IDENTITY_FIELDS, INDEX_COLUMN, gpu_index, gpu_uuids
from powerkit.trace.readers.smi_layout import (
    FIELD_MAP,
    LIMIT_RANK,
    Layout,
    fields_read,
    layout_of,
    wanted,
)
from powerkit.trace.readers.textlog import (
    BadRow,
    all_watts,
    bit_field_expr,
    cell_units,
    comma_count,
    field_count_problems,
    fields_all_whole,
    finite,
    implausible_rows,
    line_shapes,
    power_cells_of,
    resolve_bad_rows,
    short_last_line,
)
from powerkit.trace.schema import (
    GpuMeta,
    TraceMeta,
    invalid_power,
    median_interval,
    power_ceiling_w,
    power_problem,
    to_canonical,
)
from powerkit.trace.semantics import usage_semantics
from powerkit.trace.timeparse import assume_zone, localize_to_utc, timestamp_expr

if TYPE_CHECKING:
    pass

__all__ = ["read_smi"]

_NA_TEXT = ("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[GPU is lost]", "")
_UNIT_CHARS = " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ%"


def _numeric_expr(c: pl.Expr) -> pl.Expr:
    """Return an expression for a cell's number, its unit stripped (``72.45 W`` -> 72.45)."""
    return c.str.strip_chars_end(_UNIT_CHARS).str.strip_chars_start().cast(pl.Float64, strict=False)


def _not_na(text: pl.Series, values: pl.Series) -> pl.Series:
    """Return the mask of cells that hold neither a number nor an N/A marker."""
    missing = values.is_null()
    if not missing.any():
        return missing
    raw = text.str.strip_chars()
    na = raw.is_null() | raw.is_in(_NA_TEXT) | raw.str.starts_with("[")
    return missing & ~na


@dataclass(frozen=True)
class _Parser:
    """How a block of rows is parsed (decided once, from the first block)."""

    exprs: dict[str, pl.Expr]
    zoned: bool
    declared: str | None  # the power unit the header declares (``[W]``)
    #: what is done to columns once ``exprs`` computed them (power: :func:`finite`)
    post: dict[str, pl.Expr]

    def parse(self, frame: pl.LazyFrame, **also: pl.Expr) -> pl.LazyFrame:
        """The parsed columns of ``frame`` (and ``also``, computed alongside)."""
        return frame.select(**self.exprs, **also).with_columns(**self.post)


@dataclass
class _Block:
    """One block of rows parsed: every row's values, the rows kept, the bad rows found."""

    parsed: pl.DataFrame
    keep: pl.Series
    rows: list[BadRow]
    na_power: int
    col: dict[str, pl.Series]


def _parser(
    path: Path, lay: Layout, df: pl.DataFrame, opts: ImportOptions, warnings: list[str]
) -> _Parser:
    """The expressions that parse a block, from the first block's cells and the header."""
    names, power_field = lay.names, lay.power_field
    col = {names[i]: df.get_column(f"c{i}") for i in lay.keep_idx if f"c{i}" in df.columns}
    # One select parses every column: Polars spreads the expressions over the cores.
    ts_name = f"c{names.index('timestamp')}"
    exprs: dict[str, pl.Expr] = {}
    post: dict[str, pl.Expr] = {}
    exprs["ts"], zoned = timestamp_expr(col["timestamp"], pl.col(ts_name), what=str(path))
    targets: dict[str, str] = {power_field: "power_w"}
    # Of several limit fields, the enforced one (what the driver holds after every limiter)
    # wins, then the requested one, whatever their order in the header.
    by_preference = sorted(enumerate(names), key=lambda item: LIMIT_RANK.get(item[1], 0))
    for i, field_name in by_preference:
        target = FIELD_MAP.get(field_name)
        # (a kept column is named by its place in the header: fields skipped before it, such
        # as memory.used, must not shift the ones after)
        if field_name in targets:  # (the power field read as power_w)
            continue
        if target and target not in targets.values() and f"c{i}" in df.columns:
            targets[field_name] = target
        elif target == "power_w" and lay.has_header:  # power.draw, another field chosen
            warnings.append(
                f"{path}: power_w is {power_field} ({option('power-field')}); power.draw is not "
                "stored"
            )
    if lay.has_header:
        read = wanted(power_field)
        unread = [n for n in names if n not in read and not n.startswith("_col")]
        if unread:
            warnings.append(
                f"{path}: field(s) not stored (no canonical column): "
                f"{', '.join(dict.fromkeys(unread))}"
            )
    if "index" in names:  # the GPU index, parsed once (a bad row where it is not a number)
        exprs[INDEX_COLUMN] = (
            pl.col(f"c{names.index('index')}").str.strip_chars().cast(pl.Int16, strict=False)
        )
    for field_name, target in targets.items():
        cells = pl.col(f"c{names.index(field_name)}")
        # Power cells carry their unit (W, kW, mW): read it; every other field's is fixed.
        if target.startswith("power"):
            exprs[target] = power_cells_of(col[field_name], cells, opts.power_unit)
            post[target] = finite(pl.col(target))
        elif target == "clock_event_reasons":
            exprs[target] = bit_field_expr(cells)
        else:
            exprs[target] = _numeric_expr(cells)
    declared = None
    if lay.has_header:  # the unit the header gives the power cells (``[W]``)
        found = re.search(
            r"\[\s*(mW|W|kW)\s*\]", lay.first_line.split(",")[names.index(power_field)]
        )
        declared = found.group(1) if found else None
    return _Parser(exprs, zoned, declared, post)


def _parse(
    path: Path,
    lay: Layout,
    parser: _Parser,
    df: pl.DataFrame,
    ragged: np.ndarray,
    line0: int,
    opts: ImportOptions,
) -> _Block:
    """Parse one block of rows whose first is on line ``line0``; ``ragged``: its rows to drop
    for their field count (textlog.field_count_problems)."""
    names, power_field = lay.names, lay.power_field
    col = {names[i]: df.get_column(f"c{i}") for i in lay.keep_idx if f"c{i}" in df.columns}
    parsed = parser.parse(df.lazy()).collect()
    ts = parsed["ts"]
    power = parsed["power_w"]
    power_bad = _not_na(col[power_field], power)
    rows: list[BadRow] = []
    bad = (ts.is_null() | power_bad) & ~pl.Series(ragged)
    na_power = power.is_null() & ~bad & ~pl.Series(ragged)
    for i in np.flatnonzero(bad.to_numpy()).tolist():
        what = "timestamp" if ts[i] is None else power_field
        rows.append((i + line0, f"unparsable {what} {(col[what][i] or '').strip()!r}"))
    keep = ~bad & ~pl.Series(ragged)
    if "index" in col:  # a GPU index that is not one is a bad row, never another GPU
        unreadable = parsed[INDEX_COLUMN].is_null() & keep
        for i in np.flatnonzero(unreadable.to_numpy()).tolist():
            rows.append((i + line0, f"unparsable GPU index {(col['index'][i] or '').strip()!r}"))
        keep = keep & ~unreadable
    wrong = pl.select(invalid_power(pl.lit(power))).to_series() & power.is_not_null() & keep
    for i in np.flatnonzero(wrong.to_numpy()).tolist():
        rows.append((i + line0, power_problem(power[i])))
    keep = keep & ~wrong
    declared = parser.declared
    if declared is not None and not (declared == "W" and all_watts(col[power_field])):
        # a cell whose unit contradicts its header's (``100 kW`` under ``[W]``)
        units = df.select(cell_units(pl.col(f"c{names.index(power_field)}"))).to_series()
        clash = (units.is_not_null() & (units != declared)).to_numpy() & keep.to_numpy()
        for i in np.flatnonzero(clash).tolist():
            rows.append(
                (
                    i + line0,
                    f"power cell {col[power_field][i].strip()!r} "
                    f"contradicts the header's unit [{declared}]",
                )
            )
        keep = keep & ~pl.Series(clash)
    plate = opts.nameplate_w or lookup_nameplate_w(opts.gpu_name)
    ceiling = power_ceiling_w(opts.max_power_w, plate)
    over, implausible = implausible_rows(power, ceiling, lambda i: i + line0, keep.to_numpy())
    rows += implausible
    keep = keep & ~pl.Series(over)
    if na_power.any():
        keep = keep & ~na_power
    return _Block(parsed, keep, rows, int(na_power.sum()), col)


def read_smi(path: Path, opts: ImportOptions, warnings: list[str]) -> Trace:
    """Return a Trace from an nvidia-smi CSV log; ``warnings`` collects repairs made."""
    lay = layout_of(path, opts)
    names, has_header, first_data_line = lay.names, lay.has_header, lay.first_data_line
    width = len(names)
    # (the header's last field is read too: where it is never missing and the commas add up,
    # every line has the header's field count and none need be counted one by one)
    read = sorted({*lay.keep_idx, width - 1})
    fused = _read_clean(path, lay, read, opts, warnings)
    if fused is not None:
        parser, block, height = fused
        rows, last_line = list[BadRow](), 0
    else:
        df = _read_columns(path, has_header, read)
        if df.height == 0:
            raise BadInputError(f"{path}: no samples (empty trace)")
        parser = _parser(path, lay, df, opts, warnings)
        commas = comma_count(path) - (lay.first_line.count(",") if has_header else 0)
        if fields_all_whole(commas, df.height, width, df[f"c{width - 1}"]):
            ragged, rows, last_line = np.zeros(df.height, dtype=bool), list[BadRow](), 0
        else:
            lines = line_shapes(path, width)
            ragged, rows = field_count_problems(lines, width, first=first_data_line - 1)
            if ragged.size != df.height:
                raise BadInputError(f"{path}: cannot split the log into lines consistently")
            last_line = short_last_line(lines, width)
        block = _parse(path, lay, parser, df, ragged, first_data_line, opts)
        height = df.height
    zoned = parser.zoned
    parsed, keep, col = block.parsed, block.keep, block.col
    rows += block.rows
    if block.na_power:
        warnings.append(_na_note(path, block.na_power))
    at = np.flatnonzero(keep.to_numpy())
    frame = parsed if keep.all() else parsed.filter(keep)
    if frame.height == 0:
        resolve_bad_rows(path, rows, last_line=0, skip=opts.skip_bad_rows, warnings=warnings)
        raise BadInputError(f"{path}: no samples with a power reading")

    gpu_names = col.get("name")
    gpu, gpu_ids = gpu_index(frame, col, keep, opts, path, warnings)
    t_us = frame["ts"].dt.epoch("us").to_numpy()
    rows += time_problems(t_us, gpu.astype(np.int64), at + first_data_line)
    dropped = resolve_bad_rows(
        path, rows, last_line=last_line, skip=opts.skip_bad_rows, warnings=warnings
    )
    frame = frame.with_columns(pl.Series("gpu", gpu, dtype=pl.Int16))
    if len(gpu_ids) > 1 and not any(f in lay.names for f in IDENTITY_FIELDS):
        warnings += _position_notes(path, dropped, last_line)
    if dropped:
        gone = np.isin(at + first_data_line, [n for n, _ in dropped])
        frame = frame.filter(pl.Series(~gone))
        at = at[~gone]
        keep = pl.Series(np.isin(np.arange(height), at))
    host = opts.host or path.stem
    frame = frame.with_columns(pl.lit(host).alias("host"))
    zone = "UTC" if zoned else assume_zone(opts.tz, path, warnings)
    if not zoned:
        frame = frame.with_columns(localize_to_utc(frame["ts"], zone, what=str(path)))
        if frame["ts"].null_count():
            i = int(frame["ts"].is_null().arg_max() or 0)
            line = int(np.flatnonzero(keep.to_numpy())[i]) + first_data_line
            raise BadInputError(f"{path}: line {line}: time does not exist in zone {zone}")
    name: str | None = opts.gpu_name
    if name is None and gpu_names is not None:
        first = gpu_names.drop_nulls()
        name = first[0].strip() if first.len() else None
    uuids = gpu_uuids(col, keep, gpu)
    table = to_canonical(frame, what=str(path))
    meta = _meta(
        path,
        lay,
        opts,
        name,
        zoned,
        zone,
        host,
        gpu_ids,
        uuids,
        opts.interval_s or median_interval(table),
    )
    return Trace(meta=meta, table_=table, origin=str(path), warnings=warnings, bad_rows=dropped)


#: the rows the one-pass read decides how to parse a log from (:func:`_read_clean`)
_HEAD_ROWS = 1000


def _read_clean(
    path: Path, lay: Layout, read: list[int], opts: ImportOptions, warnings: list[str]
) -> tuple[_Parser, _Block, int] | None:
    """A log with no bad row, read and parsed in one pass that never holds a cell's text:
    (parser, parsed block, rows), what the reading that looks at each cell returns for such a
    log (tests/trace/test_smi_clean.py). The parsing is decided from the first rows, as a
    streamed log's is; any row it does not read cleanly (a cell unparsed, a field missing or
    extra, a power cell whose unit is not the one assumed, an implausible power) makes it
    None: the caller then reads the log cell by cell, naming each bad row."""
    try:
        head = _read_columns(path, lay.has_header, read, rows=_HEAD_ROWS)
        stamps = head[f"c{lay.names.index('timestamp')}"].drop_nulls().len()
        if head.height == _HEAD_ROWS and stamps < 50:  # (the parse is decided from 50)
            return None
        notes: list[str] = []
        parser = _parser(path, lay, head, opts, notes)
    except BadInputError:
        return None
    width = len(lay.names)
    cells = pl.col(f"c{lay.names.index(lay.power_field)}")
    # (what a row needs of its text, computed as it is read; then of its values, once parsed:
    # an expression over a parsed value repeated in the same select would parse it twice)
    whole = pl.col(f"c{width - 1}").is_not_null()  # no field missing
    if all_watts(head[f"c{lay.names.index(lay.power_field)}"]):
        if parser.declared not in (None, "W"):
            return None
        whole = whole & cells.str.strip_chars_end().str.ends_with(" W")
    elif parser.declared is not None:
        units = cell_units(cells)
        whole = whole & (units.is_null() | (units == parser.declared))
    clean = pl.col("_whole") & pl.col("ts").is_not_null() & ~invalid_power(pl.col("power_w"))
    if INDEX_COLUMN in parser.exprs:
        clean = clean & pl.col(INDEX_COLUMN).is_not_null()
    strings = [n for n in ("name", *IDENTITY_FIELDS) if n in lay.names and n != "index"]
    found_fields: list[int] = []

    def names(found: list[str]) -> list[str]:
        found_fields.append(len(found))
        return [f"c{i}" for i in range(len(found))]

    # (a line with a field over the header's fails the read: no comma need be counted)
    scan = pl.scan_csv(
        path,
        glob=False,
        with_column_names=names,
        **{**_split(lay.has_header), "truncate_ragged_lines": False},
    )
    try:
        also = {f"c{lay.names.index(n)}": pl.col(f"c{lay.names.index(n)}") for n in strings}
        parsed = (
            parser.parse(scan, **also, _whole=whole)
            .with_columns(_clean=clean.fill_null(False))  # (a null is no clean row)
            .collect()
        )
    except (pl.exceptions.PolarsError, IndexError):
        return None
    if parsed.height == 0 or found_fields != [width] or not parsed["_clean"].all():
        return None  # (the first line's fields set the read's: another count is not clean)
    col = {n: parsed.get_column(f"c{lay.names.index(n)}") for n in strings}
    parsed = parsed.select(list(parser.exprs))
    keep = pl.Series(np.ones(parsed.height, dtype=bool))
    plate = opts.nameplate_w or lookup_nameplate_w(opts.gpu_name)
    ceiling = power_ceiling_w(opts.max_power_w, plate)
    _, rows = implausible_rows(
        parsed["power_w"], ceiling, lambda i: i + lay.first_data_line, keep.to_numpy()
    )
    if rows:
        return None
    warnings += notes
    return parser, _Block(parsed, keep, [], 0, col), parsed.height


def _split(has_header: bool) -> dict[str, Any]:
    """How a log is split into cells, the same for the whole-file read and the one pass:
    every cell text, no quoting, the header line skipped (rows with fields over the header's
    are counted apart, by their commas)."""
    return {
        "has_header": False,
        "skip_rows": 1 if has_header else 0,
        "infer_schema": False,
        "truncate_ragged_lines": True,
        "quote_char": None,
    }


def _read_columns(
    path: Path, has_header: bool, keep_idx: list[int], rows: int | None = None
) -> pl.DataFrame:
    """Return the chosen columns as strings, named ``c<index>``; strict UTF-8 first."""
    for encoding in ("utf8", "utf8-lossy"):
        try:
            df = pl.read_csv(
                path,
                columns=keep_idx,
                encoding=encoding,
                glob=False,
                n_rows=rows,
                **_split(has_header),
            )
        except pl.exceptions.ComputeError as exc:
            if "utf-8" in str(exc).lower() and encoding == "utf8":
                continue  # a stray byte: read again, replacing it
            raise BadInputError(f"{path}: cannot parse as CSV ({exc})") from None
        except (pl.exceptions.PolarsError, IndexError) as exc:
            raise BadInputError(f"{path}: cannot parse as CSV ({exc})") from None
        return df.rename(dict(zip(df.columns, [f"c{i}" for i in keep_idx], strict=True)))
    raise AssertionError("unreachable")


def _na_note(path: Path, rows: int) -> str:
    return f"{path}: {rows} row(s) with [N/A] power dropped"


def _position_notes(path: Path, dropped: list[BadRow], last_line: int) -> list[str]:
    """The warning a log without a device column owes for bad rows inside it (a cut last
    line is not one): rows after it may sit at another GPU's position."""
    inside = [n for n, _ in dropped if n != last_line]
    if not inside:
        return []
    return [
        f"{path}: {len(inside)} bad row(s) in a log without a GPU index column, first at "
        f"line {inside[0]}: GPUs are told apart by row position, so rows after it may be "
        "assigned to the wrong GPU"
    ]


def _meta(
    path: Path,
    lay: Layout,
    opts: ImportOptions,
    name: str | None,
    zoned: bool,
    zone: str,
    host: str,
    gpu_ids: list[int],
    uuids: dict[int, str],
    interval_s: float | None,
) -> TraceMeta:
    """The metadata of an nvidia-smi log's trace (read whole or a block at a time)."""
    nameplate = opts.nameplate_w or lookup_nameplate_w(name)
    field = lay.power_field
    return TraceMeta(
        source="nvidia-smi",
        power_semantics=usage_semantics(name)
        if field == "power.draw"
        else ("instant" if field.endswith("instant") else "average_1s"),
        interval_s=interval_s,
        tz=zone,
        gpus=[
            GpuMeta(host=host, gpu=g, name=name, nameplate_w=nameplate, uuid=uuids.get(g))
            for g in gpu_ids
        ],
        extra={
            "imported_from": str(path),
            "power_field": field,
            "fields_read": fields_read(lay),
            **({"tz_assumed": True} if not zoned and not opts.tz else {}),
        },
    )
