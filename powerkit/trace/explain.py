"""How a trace was read (``import --explain``, ``info --explain``): per canonical column, the
file's column or field it came from and why, with the range of its values; what was left out;
what ``power_w`` means and where that came from; the zone of its times.

Everything here comes from the trace's metadata (what the reader recorded) and one scan of its
columns' ranges: nothing is read again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from powerkit.core.errors import option
from powerkit.core.tables import Column
from powerkit.trace.model import Trace
from powerkit.trace.semantics import SEMANTICS

__all__ = ["EXPLAIN_COLUMNS", "Explained", "ReadColumn", "explain"]


@dataclass(frozen=True)
class ReadColumn:
    """One canonical column: where it came from, why, and its range."""

    column: str
    source: str
    why: str
    low: str
    high: str


@dataclass
class Explained:
    """How a trace was read."""

    origin: str
    format: str
    columns: list[ReadColumn] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    power_semantics: str = "unknown"
    semantics_from: str = ""
    zone: str = ""

    def lines(self) -> list[str]:
        """The explanation's lines besides the column table."""
        out = [f"{self.origin}: read as {self.format}"]
        if self.left_out:
            out.append(f"left out (no canonical column): {', '.join(self.left_out)}")
        meaning = SEMANTICS.get(self.power_semantics, self.power_semantics)
        out.append(f"power_w is {self.power_semantics} ({meaning}): {self.semantics_from}")
        out.append(f"times: {self.zone}")
        return out


def _why_by_reader(trace: Trace) -> dict[str, tuple[str, str]]:
    """canonical column -> (file column or field, why), from what the reader recorded."""
    extra = trace.meta.extra
    if "inferred_columns" in extra:
        return {c: (str(v[0]), str(v[1])) for c, v in extra["inferred_columns"].items()}
    if "column_map" in extra:
        return {c: (name, f"{option('map')}") for c, name in extra["column_map"].items()}
    if "fields_read" in extra:  # nvidia-smi: the --query-gpu fields
        return {c: (f, "the nvidia-smi field") for c, f in extra["fields_read"].items()}
    return {}


def _semantics_from(trace: Trace) -> str:
    extra = trace.meta.extra
    if extra.get("power_semantics_given"):
        return f"given ({option('power-semantics')})"
    if "power_field" in extra:
        return f"the field {extra['power_field']}"
    names = sorted(set(trace.meta.gpu_names()))
    if names:
        return f"the source ({trace.meta.source}) and the GPU model ({', '.join(names)})"
    return f"the source ({trace.meta.source}); the GPU model is unknown"


def explain(trace: Trace) -> Explained:
    """How ``trace`` was read."""
    import duckdb

    why = _why_by_reader(trace)
    con = duckdb.connect()
    try:
        trace.register(con)
        names = [r[0] for r in con.execute("DESCRIBE trace").fetchall()]
        quoted = [f'"{n}"' for n in names]
        bounds = ", ".join(f"min({q}), max({q})" for q in quoted)
        row = con.execute(f"SELECT {bounds} FROM trace").fetchone()  # (one scan, every column)
        values = row if row else (None,) * (2 * len(names))
        ranges = {n: (values[2 * k], values[2 * k + 1]) for k, n in enumerate(names)}
    finally:
        con.close()
    rows = []
    for name in names:
        low, high = ranges[name]
        if low is None and high is None:
            continue  # (an optional column the file did not have)
        source, reason = why.get(name, (name, "its canonical name"))
        if source.startswith("("):  # (not a column of the file: how it was found)
            source, reason = "-", source.strip("()")
        if name == "host" and name not in why and trace.meta.source not in ("parquet", "nvml"):
            source, reason = "-", f"the file's name, or {option('host')}"
        rows.append(ReadColumn(name, source, reason, _shown(low), _shown(high)))
    return Explained(
        origin=trace.origin,
        format=_format(trace),
        columns=rows,
        left_out=[str(n) for n in trace.meta.extra.get("left_out", [])],
        power_semantics=trace.meta.power_semantics,
        semantics_from=_semantics_from(trace),
        zone=(
            f"{trace.meta.tz}, assumed (give {option('tz')})"
            if trace.meta.extra.get("tz_assumed")
            else str(trace.meta.tz)
        ),
    )


def _format(trace: Trace) -> str:
    extra = trace.meta.extra
    if "inferred_columns" in extra:
        return f"{trace.meta.source}, its columns inferred from their names"
    if "column_map" in extra:
        return f"{trace.meta.source}, its columns named by {option('map')}"
    return trace.meta.source


def _shown(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


#: the column table of an explanation
EXPLAIN_COLUMNS = (
    Column("column", "column", key=True),
    Column("from", "source", text=True),
    Column("why", "why", text=True),
    Column("lowest", "low", text=True),
    Column("highest", "high", text=True),
)
