"""The canonical trace: column names and Arrow types, its metadata, and the conversion to it.

One row per sample per GPU, sorted by (host, gpu, ts). Metadata lives in the Parquet footer
under the key ``powerkit`` as one JSON document (see :class:`TraceMeta`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import polars as pl

from powerkit import __version__
from powerkit.core.arrowtext import repeated
from powerkit.core.errors import BadInputError, option
from powerkit.trace.timeparse import TIME_RANGE_S

__all__ = [
    "ANNOTATION_COLUMNS",
    "BIT_FIELD_MAX",
    "DEFAULT_MAX_POWER_W",
    "INDEX_KEY",
    "LABEL_PREFIX",
    "METADATA_KEY",
    "OPTIONAL_FLOAT_COLUMNS",
    "OPTIONAL_INT_COLUMNS",
    "REQUIRED_COLUMNS",
    "GpuMeta",
    "TraceMeta",
    "canonical_schema",
    "implausible_power",
    "invalid_power",
    "is_bit_field",
    "median_interval",
    "power_ceiling_w",
    "power_problem",
    "to_canonical",
]

METADATA_KEY = b"powerkit"
# (host, gpu, rows) per run of one series in storage order: lets a scan split series by row
# counts instead of reading the host of every row.
INDEX_KEY = b"powerkit.index"

REQUIRED_COLUMNS: dict[str, pa.DataType] = {
    "ts": pa.timestamp("us", tz="UTC"),
    "host": pa.string(),
    "gpu": pa.int16(),
    "power_w": pa.float32(),
    "energy_j": pa.float64(),
}
# Units are in the names; utilizations are percent 0-100, dram_active a 0-1 ratio.
OPTIONAL_FLOAT_COLUMNS: tuple[str, ...] = (
    "power_instant_w",
    "power_avg_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "gpu_util",
    "mem_util",
    "temp_c",
    "power_limit_w",
    "dram_active",
    "memcpy_util",
)
#: per-GPU integer columns: ``clock_event_reasons`` is NVML's clocks-event (throttle) reasons
#: bit field of the sample (powerkit.analysis.reasons names the bits)
OPTIONAL_INT_COLUMNS: dict[str, pa.DataType] = {"clock_event_reasons": pa.int64()}
#: the largest bit field a cell holds: the whole numbers a float carries exactly
BIT_FIELD_MAX = 2**53
#: string columns of labels a source attached to samples (Prometheus ``pod`` -> ``label_pod``)
LABEL_PREFIX = "label_"
ANNOTATION_COLUMNS: dict[str, pa.DataType] = {
    "step": pa.int64(),
    "phase": pa.string(),
    "tokens": pa.int64(),
    "group_size": pa.int32(),
    "concurrency": pa.int32(),
}


@dataclass
class GpuMeta:
    """What is known about one GPU series of a trace."""

    host: str
    gpu: int
    name: str | None = None
    nameplate_w: float | None = None
    uuid: str | None = None


@dataclass
class TraceMeta:
    """Key-value metadata of a canonical trace (stored as JSON in the Parquet footer)."""

    source: str
    power_semantics: str = "unknown"
    interval_s: float | None = None
    tz: str = "UTC"
    gpus: list[GpuMeta] = field(default_factory=list)
    powerkit_version: str = __version__
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """Return the metadata as one JSON document."""
        return json.dumps(asdict(self), sort_keys=True, default=_json_default)

    @classmethod
    def from_json(cls, text: str | bytes) -> TraceMeta:
        """Return metadata parsed from :meth:`to_json` output (unknown keys go to ``extra``)."""
        raw = json.loads(text)
        gpus = [GpuMeta(**g) for g in raw.pop("gpus", [])]
        known = {k: raw.pop(k) for k in list(raw) if k in cls.__dataclass_fields__}
        meta = cls(gpus=gpus, **known)
        meta.extra.update(raw)
        return meta

    def nameplate_w(self, host: str | None = None, gpu: int | None = None) -> float | None:
        """Return the nameplate of one GPU, or the common nameplate when all agree."""
        values = {
            g.nameplate_w
            for g in self.gpus
            if g.nameplate_w is not None
            and (host is None or g.host == host)
            and (gpu is None or g.gpu == gpu)
        }
        return values.pop() if len(values) == 1 else None

    def zone_label(self) -> str:
        """Return the zone times are shown in: the log's zone, marked when it was assumed."""
        return f"{self.tz}, assumed" if self.extra.get("tz_assumed") else self.tz

    def gpu_names(self) -> list[str]:
        """Return the distinct GPU names, in order of first appearance."""
        return list(dict.fromkeys(g.name for g in self.gpus if g.name))


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def canonical_schema(columns: list[str]) -> pa.Schema:
    """Return the canonical Arrow schema for the given column names, in canonical order."""
    fields = [pa.field(name, dtype) for name, dtype in REQUIRED_COLUMNS.items()]
    fields += [pa.field(c, pa.float32()) for c in OPTIONAL_FLOAT_COLUMNS if c in columns]
    fields += [pa.field(c, t) for c, t in OPTIONAL_INT_COLUMNS.items() if c in columns]
    fields += [pa.field(c, t) for c, t in ANNOTATION_COLUMNS.items() if c in columns]
    fields += [pa.field(c, pa.string()) for c in sorted(columns) if c.startswith(LABEL_PREFIX)]
    return pa.schema(fields)


def to_canonical(data: pl.DataFrame | pa.Table, *, what: str = "trace") -> pa.Table:
    """Return an Arrow table with canonical types and order, sorted by (host, gpu, ts).

    ``data`` needs ts (UTC datetimes), host, gpu and power_w; energy_j is added as nulls when
    absent; unknown columns are dropped. Raises BadInputError for an empty trace or NaN,
    infinite or negative power, naming the first offending sample.
    """
    import polars as pl

    df = data if isinstance(data, pl.DataFrame) else pl.from_arrow(data)
    assert isinstance(df, pl.DataFrame)
    missing = [c for c in ("ts", "host", "gpu", "power_w") if c not in df.columns]
    if missing:
        raise BadInputError(f"{what}: missing column(s) {', '.join(missing)}")
    if df.height == 0:
        raise BadInputError(f"{what}: no samples (empty trace)")
    if "energy_j" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.Float64).alias("energy_j"))
    schema = canonical_schema(df.columns)
    ts = df.get_column("ts")
    if not isinstance(ts.dtype, pl.Datetime):
        raise BadInputError(f"{what}: column ts is {ts.dtype}, expected a timestamp")
    if ts.dtype.time_zone is None:
        df = df.with_columns(pl.col("ts").dt.replace_time_zone("UTC"))
    _check_gpus(df, what)
    df = df.with_columns(
        pl.col("ts").dt.convert_time_zone("UTC").dt.cast_time_unit("us"),
        pl.col("host").cast(pl.String),
        pl.col("gpu").cast(pl.Int16),
        pl.col("power_w").cast(pl.Float64),
    )
    _check_power(df, what)
    _check_bit_fields(df, what)
    _check_times(df, what)
    host = df.get_column("host")
    single_host = host[0] if (host == host[0]).all() else None
    if single_host is None:
        df = _sorted(df.select(schema.names), one_host=False)
        _check_repeats(df, what)
        table = df.to_arrow()
    else:
        # Materializing (and sorting) millions of equal strings through Polars is slow; the
        # column is built from its buffers instead (core.arrowtext).
        df = _sorted(df.select(n for n in schema.names if n != "host"), one_host=True)
        _check_repeats(df.with_columns(pl.lit(single_host).alias("host")), what)
        table = df.with_columns(pl.col("power_w").cast(pl.Float32)).to_arrow()
        table = table.add_column(1, "host", repeated(single_host, df.height))
    return pa.Table.from_arrays(
        [_cast(table.column(f.name), f.type) for f in schema], schema=schema
    )


def _check_repeats(df: pl.DataFrame, what: str) -> None:
    """Refuse rows of one series at a time it already has (df sorted by host, gpu, ts): an
    analysis would average them into one GPU's cell, and they are usually several GPUs read
    as one (the wrong device column)."""
    ts = df.get_column("ts").dt.epoch("us").to_numpy()
    gpu = df.get_column("gpu").to_numpy()
    same = (ts[1:] == ts[:-1]) & (gpu[1:] == gpu[:-1])
    if not same.any():
        return
    host = df.get_column("host")
    same &= (host[1:] == host[:-1]).to_numpy() if host.n_unique() > 1 else True
    if not same.any():
        return
    first = int(np.flatnonzero(same)[0]) + 1
    row = _first_row(df.slice(first, 1))
    raise BadInputError(
        f"{what}: {int(same.sum())} sample(s) repeat a time their GPU already has (first "
        f"host={row['host']} gpu={row['gpu']} ts={row['ts']}): several rows of one GPU at one "
        f"time are never merged; if the device is in another column, name it with {option('map')}"
    )


def _sorted(df: pl.DataFrame, *, one_host: bool) -> pl.DataFrame:
    """Return df sorted by (host, gpu, ts); cheap when it is (nearly) in that order already."""
    if not one_host:
        return df.sort(["host", "gpu", "ts"])
    gpu = df.get_column("gpu").to_numpy()
    ts_steps = np.diff(df.get_column("ts").dt.epoch("us").to_numpy())
    gpu_steps = np.diff(gpu)
    if np.all(gpu_steps >= 0) and np.all(ts_steps[gpu_steps == 0] >= 0):
        return df
    if np.all(ts_steps >= 0):
        # Rows in time order (a log of interleaved GPUs): a stable sort by GPU keeps each
        # GPU's rows in time order, and gathering rows is cheaper than a general sort.
        ids = np.unique(gpu[: min(gpu.size, 100_000)])
        if ids.size <= 64 and np.isin(gpu, ids).all():
            # Few GPUs: one pass per GPU beats a general argsort.
            return _gather(df, np.concatenate([np.flatnonzero(gpu == g) for g in ids]))
        return _gather(df, np.argsort(gpu, kind="stable"))
    return df.sort(["gpu", "ts"])


def _gather(df: pl.DataFrame, order: np.ndarray) -> pl.DataFrame:
    """df's rows in ``order``, given as Polars' own index type (a NumPy int64 index is
    converted first: half again as long)."""
    import polars as pl

    return df[pl.Series(order, dtype=pl.get_index_type())]


def is_bit_field(value: float) -> bool:
    """True for a value a bit-field cell may hold: a whole number from 0 to
    :data:`BIT_FIELD_MAX` (the rule ``to_canonical`` applies to a column)."""
    return 0 <= value <= BIT_FIELD_MAX and value == int(value)


def _check_bit_fields(df: pl.DataFrame, what: str) -> None:
    """A bit-field cell must be a whole number from 0 to 2^53 (a float carries it exactly)."""
    import polars as pl

    for name in OPTIONAL_INT_COLUMNS:
        if name not in df.columns:
            continue
        c = pl.col(name).cast(pl.Float64)
        wrong = df.select(
            (c.is_nan() | (c < 0) | (c > BIT_FIELD_MAX) | (c != c.floor())).fill_null(False)
        ).to_series()
        if wrong.any():
            i = int(wrong.arg_max() or 0)
            row = df.row(i, named=True)
            raise BadInputError(
                f"{what}: sample {i + 1} (host {row['host']}, GPU {row['gpu']}): {name} "
                f"{row[name]!r} is not a bit field (a whole number from 0)"
            )


def _cast(column: pa.ChunkedArray, dtype: pa.DataType) -> pa.ChunkedArray:
    # Polars hands out string_view / large_string; the canonical file says string.
    if column.type == dtype:
        return column
    import pyarrow.compute as pc  # (only here: its import costs every command 35 ms)

    return pc.cast(column, dtype, safe=False)


#: the largest power a canonical (float32) cell can hold; beyond it a value would become inf
POWER_MAX_W = float(np.finfo(np.float32).max)


def invalid_power(c: pl.Expr) -> pl.Expr:
    """Return the mask of power cells no trace may hold: missing, NaN, negative, infinite, or
    beyond float32 (stored, it would turn into infinity)."""
    return c.is_null() | c.is_nan() | (c < 0) | (c > POWER_MAX_W)


#: the most one GPU's board may draw, unless its nameplate says otherwise or --max-power does:
#: no accelerator reaches it, and a milliwatt log read as watts passes it at 5 W
DEFAULT_MAX_POWER_W = 5000.0


#: what a counter may read above the most a GPU draws over a step (J): its own resolution
COUNTER_SLACK_J = 1.0


def counter_rises_possible(rise_j: np.ndarray, dt_s: np.ndarray | float) -> np.ndarray:
    """Where an energy counter's rises over steps of ``dt_s`` are possible: not negative (a
    counter never falls: one that does was reset or wrapped), not beyond
    ``DEFAULT_MAX_POWER_W`` over the step and ``COUNTER_SLACK_J``. A NaN rise (a hole) is."""
    rise = np.asarray(rise_j, dtype=float)
    ok = (rise >= 0) & (rise <= DEFAULT_MAX_POWER_W * np.asarray(dt_s) + COUNTER_SLACK_J)
    return np.isnan(rise) | ok


def power_ceiling_w(max_power_w: float | None, nameplate_w: float | None) -> float:
    """The largest plausible per-GPU sample: ``--max-power``, else 3x the nameplate where it
    is known (no board draws three times its TDP), else DEFAULT_MAX_POWER_W."""
    if max_power_w is not None:
        return max_power_w
    if nameplate_w is not None and math.isfinite(nameplate_w) and nameplate_w > 0:
        return 3.0 * nameplate_w
    return DEFAULT_MAX_POWER_W


def implausible_power(value: float, ceiling_w: float) -> str:
    """What is wrong with a sample above the ceiling, with the likely cause."""
    likely_mw = value >= 1000 and value / 1000 <= ceiling_w
    hint = f"milliwatts? give {option('power-unit')} mW" if likely_mw else "a unit mix-up?"
    return (
        f"power {value:,.6g} W is more than one GPU draws (ceiling {ceiling_w:,.0f} W; "
        f"{hint}, or raise {option('max-power')})"
    )


def power_problem(value: float | None) -> str:
    """Return what is wrong with an invalid power cell (see :func:`invalid_power`)."""
    if value is None or math.isnan(value):
        return "missing power"
    if value < 0:
        return f"negative power {value:g} W"
    return f"power {value:g} W is beyond what a trace stores (float32)"


def _check_power(df: pl.DataFrame, what: str) -> None:
    import polars as pl

    bad = df.filter(invalid_power(pl.col("power_w")))
    if bad.height:
        row = _first_row(bad)
        value = row["power_w"]
        problem = "missing" if value is None or math.isnan(value) else f"{value} W"
        raise BadInputError(
            f"{what}: invalid power ({problem}) at host={row['host']} gpu={row['gpu']} "
            f"ts={row['ts']} ({bad.height} bad sample(s) in all)"
        )


def _first_row(df: pl.DataFrame) -> dict[str, Any]:
    """The first row as a dict for a message, its ``ts`` as text: a time outside what Python's
    datetime holds (year -29719) is shown as epoch seconds instead of failing."""
    import polars as pl

    row = df.head(1).with_columns(pl.col("ts").dt.epoch("us").alias("ts")).row(0, named=True)
    us = row["ts"]
    if us is not None:
        inside = -62_135_596_800 * 10**6 <= us < 253_402_300_800 * 10**6  # years 1-9999
        row["ts"] = (
            str(pl.Series([us]).cast(pl.Datetime("us", "UTC"))[0])
            if inside
            else f"{us / 1e6:g} s after 1970"
        )
    return row


#: the GPU indices a trace may hold (the canonical int16 column, no negative index)
GPU_RANGE = (0, 32767)


def _check_gpus(df: pl.DataFrame, what: str) -> None:
    import polars as pl

    gpu = df.get_column("gpu")
    if not gpu.dtype.is_integer():
        raise BadInputError(f"{what}: column gpu is {gpu.dtype}, expected an integer")
    bad = df.filter(
        pl.col("gpu").is_null() | (pl.col("gpu") < GPU_RANGE[0]) | (pl.col("gpu") > GPU_RANGE[1])
    )
    if bad.height:
        row = _first_row(bad)
        raise BadInputError(
            f"{what}: GPU index {row['gpu']} at host={row['host']} ts={row['ts']} is not a "
            f"device index (0-{GPU_RANGE[1]}; {bad.height} such sample(s))"
        )


#: the times a trace may hold, in epoch µs: 1970 to 2199 (timeparse.TIME_RANGE_S)
TIME_RANGE_US = (round(TIME_RANGE_S[0] * 1e6), round(TIME_RANGE_S[1] * 1e6))


def _check_times(df: pl.DataFrame, what: str) -> None:
    us = df.get_column("ts").dt.epoch("us")
    lo, hi = us.min(), us.max()
    if lo is None or hi is None:
        raise BadInputError(f"{what}: a sample has no time")
    if lo < TIME_RANGE_US[0] or hi >= TIME_RANGE_US[1]:  # type: ignore[operator]
        bad = _first_row(df.filter((us < TIME_RANGE_US[0]) | (us >= TIME_RANGE_US[1])))
        raise BadInputError(
            f"{what}: time {bad['ts']} of host={bad['host']} gpu={bad['gpu']} is outside 1970-2199"
        )


def median_interval(table: pa.Table) -> float | None:
    """Return the median step between samples of one GPU, in s (table sorted by host, gpu, ts).

    This is the file's nominal interval: gaps are judged against it, not against a short
    series' own median (a series of three samples would make its own median huge).
    """
    head = table.slice(0, 1_000_000)  # plenty for a median
    ts = head.column("ts").to_numpy().view(np.int64)  # (µs: the canonical unit)
    gpu = head.column("gpu").to_numpy()
    step = np.diff(ts)
    steps = step[(np.diff(gpu) == 0) & (step > 0)]
    return float(np.median(steps)) / 1e6 if steps.size else None
