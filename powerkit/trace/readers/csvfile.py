"""Read any CSV: canonical column names as a header, or a ``--map`` from canonical columns to
the file's own (``ts=t_s,gpu=gpu_index,power_w=power_w``).

Wide files — a time column and one power column per GPU (``timestamp,GPU0,GPU1``) — are read
when their columns are named like ``GPU0``, ``gpu_1``, ``GPU 2 [W]`` or ``power.draw.0`` (the
GPU index is the number in the name), or with ``--map ts=COL,power_w=COL_A|COL_B|...`` (the GPU
index is the position in that list). Long files — one row per field, as a DCGM API client
writes them — are read one field at a time with ``--where COL=VALUE``; a column that names the
field of each row and holds more than one is refused until ``--where`` picks one.

Times are ISO 8601 text (with or without an offset) or numbers: unix epoch, or, with
``--start``, offsets from that start, in ``--time-unit`` (s by default). Power cells are plain
numbers in ``--power-unit`` (W by default) or carry their unit (``W``, ``mW``, ``kW``). A line
whose field count differs from the header's is a bad row (except a loop's separators and rows
that all lack the header's last names: readers/csvrows.py); so is a sample whose time is out
of order in its series or far outside the run (textlog.time_problems). A GPU column that does
not tell the rows at one time apart is refused (a frame counter: csvrows.check_gpu_varies).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.trace.model import Trace
from powerkit.trace.nameplate import lookup_nameplate_w
from powerkit.trace.options import MAPPABLE, ImportOptions
from powerkit.trace.readers.csvrows import (
    LoopLayout,
    check_gpu_varies,
    gpu_numbers,
    loop_columns,
    loop_rows,
)
from powerkit.trace.readers.outliers import time_problems
from powerkit.trace.readers.textlog import (
    BadRow,
    bit_field_expr,
    field_count_problems,
    implausible_rows,
    power_of_text,
    read_lines,
    resolve_bad_rows,
    short_last_line,
)
from powerkit.trace.readers.widecsv import (
    WideLayout,
    header_names,
    stack_wide,
    wide_layout,
)
from powerkit.trace.schema import (
    OPTIONAL_INT_COLUMNS,
    GpuMeta,
    TraceMeta,
    invalid_power,
    median_interval,
    power_ceiling_w,
    power_problem,
    to_canonical,
)
from powerkit.trace.semantics import usage_semantics
from powerkit.trace.timeparse import (
    TIME_UNITS,
    assume_zone,
    localize_to_utc,
    parse_start,
    start_anchor_s,
    timestamp_expr,
)

__all__ = ["FIELD_COLUMNS", "looks_like_canonical_csv", "read_canonical_csv"]

#: Names of a long file's column that says which field a row holds (compared in lower case).
FIELD_COLUMNS = (
    "field",
    "fieldid",
    "field_id",
    "fieldname",
    "field_name",
    "metric",
    "metric_name",
    "measurement",
)


def looks_like_canonical_csv(first_line: str) -> bool:
    """Return True for a header naming at least ts and power_w."""
    names = {c.strip().strip('"') for c in first_line.split(",")}
    return {"ts", "power_w"} <= names


def _where_rows(
    cells: pl.DataFrame, header: list[str], opts: ImportOptions, path: Path
) -> np.ndarray | None:
    """The mask of rows ``--where`` keeps (None: no ``--where``); one line when none is left."""
    if not opts.where:
        return None
    index = {name: i for i, name in enumerate(header)}
    wanted: dict[str, list[str]] = {}
    for column, value in opts.where:
        if column not in index:
            raise BadInputError(
                f"{path}: {option('where')} {column}={value}: no column {column!r} "
                f"(it has {', '.join(header)})"
            )
        wanted.setdefault(column, []).append(value)
    keep = np.ones(cells.height, dtype=bool)
    for column, values in wanted.items():
        cell = cells[f"c{index[column]}"]
        here = cell.is_in(values).fill_null(False).to_numpy()
        if not (keep & here).any():
            held = cell.filter(pl.Series(keep)).drop_nulls().unique(maintain_order=True)
            shown = ", ".join(held.head(8).to_list()) + (", ..." if held.len() > 8 else "")
            asked = " or ".join(f"{column}={v}" for v in values)
            raise BadInputError(
                f"{path}: no row has {asked}"
                + (f" (column {column!r} holds {shown})" if shown else "")
            )
        keep &= here
    return keep


def _check_one_field(
    cells: pl.DataFrame,
    header: list[str],
    rows: np.ndarray,
    used: set[int],
    opts: ImportOptions,
    path: Path,
) -> None:
    """Refuse a long file (one row per field) read without ``--where`` picking the field."""
    chosen = {column for column, _ in opts.where}
    for i, name in enumerate(header):
        if name.lower() not in FIELD_COLUMNS or i in used or name in chosen:
            continue
        values = cells[f"c{i}"].filter(pl.Series(rows)).drop_nulls().unique(maintain_order=True)
        if values.len() > 1:
            shown = ", ".join(values.head(6).to_list()) + (", ..." if values.len() > 6 else "")
            raise BadInputError(
                f"{path}: column {name!r} holds {values.len()} fields ({shown}): one row per "
                f"field; keep the power rows with {option('where')} {name}=VALUE"
            )


def _header(line: str | None, path: Path) -> list[str]:
    if line is None or not line.strip():
        raise BadInputError(f"{path}: file is empty (empty trace)")
    try:
        return header_names(line)
    except csv.Error as exc:
        raise BadInputError(f"{path}: line 1: not a CSV header ({exc})") from None


def _columns(
    header: list[str], opts: ImportOptions, path: Path, wide: WideLayout | None = None
) -> dict[str, int]:
    """Return {canonical column: index in the file} from --map, else from the header. A wide
    file's power columns are its own (``wide.power``): what else it maps or names canonically
    comes along, its time column found by name where it is not mapped."""
    index = {name: i for i, name in enumerate(header)}
    if opts.mapping is None and wide is None:
        return {c: index[c] for c in MAPPABLE if c in index}
    mapping = {c: col for c, col in (opts.mapping or {}).items() if not (wide and c == "power_w")}
    missing = [col for col in mapping.values() if col not in index]
    if missing:
        raise BadInputError(
            f"{path}: {option('map')} names column(s) {', '.join(missing)} that the header lacks "
            f"(it has {', '.join(header)})"
        )
    mapped = {c: index[col] for c, col in mapping.items()}
    # Columns already named canonically come along unless something else is mapped there.
    taken = set(mapped.values())
    if wide is not None:
        mapped.setdefault("ts", wide.ts)
        taken |= {mapped["ts"], *(i for _, i, _ in wide.power)}
    for c in MAPPABLE:
        if wide is not None and c in ("gpu", "power_w"):
            continue  # a wide file's GPU is its power column's
        if c in index and c not in mapped and index[c] not in taken:
            mapped[c] = index[c]
    return mapped


_Cells = tuple[pl.DataFrame, np.ndarray, list[BadRow], np.ndarray, LoopLayout | None]
# What a logger writes where it could not read a value (amd-smi, nvidia-smi).
_NOT_READ = ["N/A", "[N/A]", "[Not Supported]"]


def _repeated_headers(lines: pl.Series, line_no: np.ndarray) -> np.ndarray:
    """The rows (at ``line_no``) whose line repeats the header line."""
    if lines.len() < 2:
        return np.zeros(line_no.size, dtype=bool)
    text = lines.gather(pl.Series(line_no - 1)).str.strip_chars()
    return (text == str(lines[0]).strip()).fill_null(False).to_numpy()


def _cells(lines: pl.Series, header: list[str], path: Path) -> _Cells:
    """Return (one string column per field, mask of rows to drop, bad rows, line numbers)."""
    data = lines.slice(1)
    if data.str.contains('"', literal=True).any():
        return _quoted_cells(path, len(header))
    drop, bad = field_count_problems(lines, len(header), first=1)
    loop = None
    if bad:
        drop, bad, loop = loop_rows(data, len(header), drop, bad)
    parts = data.str.split(",")
    frame = pl.DataFrame({"p": parts}).select(
        pl.col("p").list.get(i, null_on_oob=True).str.strip_chars().alias(f"c{i}")
        for i in range(len(header))
    )
    return frame, drop, bad, np.arange(frame.height, dtype=np.int64) + 2, loop


def _records(reader: Any, path: Path) -> Any:
    """The reader's records; a line the csv module cannot split (a field over its 128 KB
    limit, a quote left open) is one line naming it, not an internal error."""
    while True:
        try:
            yield next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise BadInputError(f"{path}: line {reader.line_num}: {exc}") from None


def _quoted_cells(path: Path, width: int) -> _Cells:
    """The slow path for files with quoted fields: Python's csv module, line numbers kept."""
    rows: list[list[str | None]] = []
    drop: list[bool] = []
    bad: list[BadRow] = []
    numbers: list[int] = []
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.reader(fh)
        try:
            next(reader, None)
        except csv.Error as exc:
            raise BadInputError(f"{path}: line 1: not a CSV header ({exc})") from None
        line = reader.line_num
        for record in _records(reader, path):
            start, line = line + 1, reader.line_num
            numbers.append(start)
            if not record or all(not c.strip() for c in record):
                rows.append([None] * width)
                drop.append(True)
                continue
            if len(record) != width:
                bad.append((start, f"{len(record)} fields, the header has {width}"))
                rows.append([None] * width)
                drop.append(True)
                continue
            rows.append([c.strip() for c in record])
            drop.append(False)
    frame = pl.DataFrame(rows, schema=[f"c{i}" for i in range(width)], orient="row")
    return frame, np.array(drop, dtype=bool), bad, np.array(numbers, dtype=np.int64), None


def _times(
    text: pl.Series, opts: ImportOptions, path: Path, warnings: list[str]
) -> tuple[pl.Series, bool]:
    """Return (UTC datetimes, zoned) of the time column; relative numbers anchored by --start."""
    sample = text.drop_nulls().head(50)
    numeric = sample.len() > 0 and sample.cast(pl.Float64, strict=False).null_count() == 0
    if not numeric:
        if opts.start is not None:
            raise BadInputError(
                f"{path}: {option('start')} applies to numeric times; the times are text"
            )
        if opts.time_unit is not None:
            raise BadInputError(
                f"{path}: {option('time-unit')} applies to numeric times; the times are text"
            )
        expr, zoned = timestamp_expr(text, pl.col("t"), what=str(path))
        return pl.DataFrame({"t": text}).select(expr.alias("t"))["t"], zoned
    unit = opts.time_unit or "s"
    if unit not in TIME_UNITS:
        raise BadInputError(f"{option('time-unit')} {unit!r}: one of {', '.join(TIME_UNITS)}")
    value = text.cast(pl.Float64, strict=False) * TIME_UNITS[unit]
    least = value.drop_nulls().min()
    first_s = None if least is None else float(least) / 1e6  # type: ignore[arg-type]
    value = value + start_anchor_s(first_s, opts.start, path, warnings) * 1e6
    micros = value.round(0).cast(pl.Int64, strict=False)
    return micros.cast(pl.Datetime("us", "UTC")), True


def _named_semantics(gpu_name: str | None) -> str:
    """What power means in a CSV of a GPU named with ``--gpu-name``: NVML's power usage on an
    NVIDIA model whose semantics are known (a pynvml or nvidia-smi logger's column), else
    unknown."""
    semantics = usage_semantics(gpu_name)
    return semantics if semantics in ("instant", "average_1s") else "unknown"


def _power(text: pl.Series, unit: str) -> pl.Series:
    """Return watts from cells holding a number and, optionally, its unit (mW, W, kW)."""
    stripped = text.str.strip_chars()
    cells = pl.DataFrame({"t": stripped, "l": stripped.str.strip_chars_end("mkW")})
    return cells.select(power_of_text(pl.col("t"), pl.col("l"), unit).alias("p"))["p"]


def read_canonical_csv(path: Path, opts: ImportOptions, warnings: list[str]) -> Trace:
    """Return a Trace from any CSV (canonical header or ``--map``); host defaults to ``--host``
    or the file stem."""
    lines = read_lines(path)
    header = _header(lines[0] if lines.len() else None, path)
    wide = wide_layout(header, opts, path)
    cols = _columns(header, opts, path, wide)
    for need in ("ts", "power_w"):
        if need not in cols and not (wide and need == "power_w"):
            raise BadInputError(
                f"{path}: no {need} column (header: {', '.join(header)}); "
                f"name the file's columns with {option('map')} ts=COL,power_w=COL[,gpu=COL,...]"
            )
    cells, drop, bad, line_no, loop = _cells(lines, header, path)
    if loop is not None:
        cols = loop_columns(loop, header, cols, path, warnings)
    cells = cells.with_columns(pl.all().replace("", None))  # an empty cell holds nothing
    if cells.height == 0 or (drop.all() and not bad):
        raise BadInputError(f"{path}: no samples (empty trace)")
    repeated = _repeated_headers(lines, line_no) & ~drop
    if repeated.any():  # a log concatenated from runs, or a tool's watch loop on stdout
        warnings.append(f"{path}: {int(repeated.sum())} repeated header line(s) skipped")
        drop = drop | repeated
    where = _where_rows(cells, header, opts, path)
    if where is not None:
        drop = drop | ~where
    if drop.all() and bad:  # every data line is malformed: say so, not "no timestamps"
        resolve_bad_rows(
            path,
            bad,
            last_line=short_last_line(lines, len(header)),
            skip=opts.skip_bad_rows,
            warnings=warnings,
        )
        raise BadInputError(f"{path}: no samples left after dropping bad rows")
    used = set(cols.values()) | ({i for _, i, _ in wide.power} if wide else set())
    _check_one_field(cells, header, ~drop, used, opts, path)
    if drop.any():  # rows left out hold nothing (a repeated header is not a time)
        kept = pl.lit(pl.Series(~drop))
        cells = cells.select(pl.when(kept).then(pl.col(c)).alias(c) for c in cells.columns)
    if wide:
        get, power, gpu, drop, line_no = stack_wide(
            cells, cols, wide, drop, line_no, header, path, warnings
        )
        ts, zoned = _times(get["ts"], opts, path, warnings)
    else:
        get = {c: cells[f"c{i}"] for c, i in cols.items()}
        ts, zoned = _times(get["ts"], opts, path, warnings)
        power = _power(get["power_w"], opts.power_unit)
        gpu = gpu_numbers(get["gpu"]) if "gpu" in get else pl.Series([0] * cells.height)
    host = get["host"] if "host" in get and not opts.host else None
    rows = ~drop
    unread = rows & get["power_w"].is_in(_NOT_READ).fill_null(False).to_numpy()
    if unread.any():  # the logger says it could not read the power: no sample, not a bad row
        warnings.append(
            f"{path}: {int(unread.sum())} power reading(s) the logger marked N/A; left out"
        )
        rows &= ~unread
    checks = (
        ("ts", ts, "unparsable time"),
        ("power_w", power, "invalid power"),
        ("gpu", gpu, "unparsable GPU index"),
        ("host", get.get("host", gpu), "host"),
    )
    for name, values, what in checks:
        if name not in get or (wide and name == "gpu"):
            continue
        broken = rows & values.is_null().to_numpy()
        raw = get[name]
        for i in np.flatnonzero(broken):
            cell = raw[int(i)]
            bad.append(
                (int(line_no[i]), f"{what}: empty cell" if cell is None else f"{what} {cell!r}")
            )
        rows &= ~broken
    # bit fields (clock_event_reasons): hex or decimal; a cell that is neither is a bad row
    bits = {
        n: get[n].to_frame("c").select(bit_field_expr(pl.col("c"))).to_series()
        for n in OPTIONAL_INT_COLUMNS
        if n in get
    }
    for name, values in bits.items():
        text = get[name].str.strip_chars()
        blank = text.is_null() | text.is_in(["", "N/A", "[N/A]", "nan", "NaN"])
        broken = rows & (values.is_null() & ~blank).to_numpy()
        for i in np.flatnonzero(broken):
            bad.append((int(line_no[i]), f"unparsable {name} {get[name][int(i)]!r}"))
        rows &= ~broken
    out_of_range = rows & ((gpu < 0) | (gpu > 32767)).fill_null(False).to_numpy()
    for i in np.flatnonzero(out_of_range):
        bad.append((int(line_no[i]), f"GPU index {gpu[int(i)]} out of range"))
    rows &= ~out_of_range
    wrong = rows & pl.select(invalid_power(pl.lit(power))).to_series().fill_null(True).to_numpy()
    for i in np.flatnonzero(wrong):
        bad.append((int(line_no[i]), f"invalid power: {power_problem(power[int(i)])}"))
    rows &= ~wrong
    plate = opts.nameplate_w or lookup_nameplate_w(opts.gpu_name)
    over, implausible = implausible_rows(
        power, power_ceiling_w(opts.max_power_w, plate), lambda i: int(line_no[i]), rows
    )
    bad += implausible
    rows &= ~over
    if "gpu" in get and not wide:
        check_gpu_varies(ts, gpu, rows, header, cols, cells, line_no, path)
    at = np.flatnonzero(rows)
    host_codes = (
        np.zeros(at.size, dtype=np.int64)
        if host is None
        else host.gather(at).cast(pl.Categorical).to_physical().cast(pl.Int64).to_numpy()
    )
    series = host_codes * 65_536 + gpu.gather(at).to_numpy()
    t_us = ts.gather(at).dt.epoch("us").to_numpy()
    bad += time_problems(t_us, series, line_no[at])
    dropped = resolve_bad_rows(
        path,
        bad,
        last_line=short_last_line(lines, len(header)),
        skip=opts.skip_bad_rows,
        warnings=warnings,
    )
    if dropped:
        rows[np.isin(line_no, [n for n, _ in dropped])] = False
    keep = pl.Series(rows)
    frame = pl.DataFrame(
        {
            "ts": ts,
            "power_w": power,
            "gpu": gpu,
            "host": host if host is not None else pl.Series([opts.host or path.stem] * len(ts)),
        }
    )
    for name in cols:
        if name in ("ts", "power_w", "gpu", "host"):
            continue
        if name == "phase":
            frame = frame.with_columns(get[name].alias(name))
        elif name in bits:
            frame = frame.with_columns(bits[name].alias(name))
        else:
            frame = frame.with_columns(get[name].cast(pl.Float64, strict=False).alias(name))
    frame = frame.filter(keep)
    if frame.height == 0:
        raise BadInputError(f"{path}: no samples left after dropping bad rows")
    zone = "UTC" if zoned else assume_zone(opts.tz, path, warnings)
    if not zoned:
        frame = frame.with_columns(localize_to_utc(frame["ts"], zone, what=str(path)))
        if frame["ts"].null_count():
            raise BadInputError(f"{path}: a time does not exist in zone {zone}")
    series_ids = frame.select("host", "gpu").unique().sort("host", "gpu").rows()
    nameplate = opts.nameplate_w or lookup_nameplate_w(opts.gpu_name)
    table = to_canonical(frame, what=str(path))
    extra: dict[str, object] = {"imported_from": str(path)}
    if opts.mapping:
        extra["column_map"] = dict(opts.mapping)
    if wide:
        extra["wide_columns"] = {str(g): header[i] for g, i, _ in wide.power}
    if opts.where:
        extra["where"] = [f"{c}={v}" for c, v in opts.where]
    if opts.start is not None:
        extra["start"] = parse_start(opts.start).isoformat()
    if not zoned and not opts.tz:
        extra["tz_assumed"] = True
    meta = TraceMeta(
        source="csv",
        power_semantics=_named_semantics(opts.gpu_name),
        interval_s=opts.interval_s or median_interval(table),
        tz=zone,
        gpus=[
            GpuMeta(host=h, gpu=g, name=opts.gpu_name, nameplate_w=nameplate) for h, g in series_ids
        ],
        extra=extra,
    )
    return Trace(meta=meta, table_=table, origin=str(path), warnings=warnings, bad_rows=dropped)
