"""What the command line says of a trace, applied once after it is read, whatever its source
(CSV, text logs, Parquet files and datasets, Prometheus): ``--gpu-name``, ``--nameplate``,
``--power-semantics`` and ``--power-field``.

The rules (docs/import.md, "How powerkit reads a file"):

* ``--gpu-name`` names every GPU of the trace (over what the log says); a GPU without a
  nameplate then takes the bundled table's for that name, and power of NVML's usage field
  (``nvml_usage``) or of unknown meaning (a foreign CSV or Parquet column) takes the semantics of
  NVML's usage on that model, where it is known. A name the table does not know is said.
* ``--nameplate`` sets every GPU's nameplate, over the metadata and the table.
* ``--power-semantics`` states what ``power_w`` means, over what the source or the GPU model
  implies (a pynvml logger of the instant field has no other way to say so).
* ``--power-field`` chooses which logged power field is ``power_w`` (nvidia-smi's ``power.draw``,
  ``.instant`` or ``.average``; in a canonical trace, the ``power_instant_w`` or ``power_avg_w``
  column); the reader of a text log applies it while reading, this module for every other
  source.

A trace whose metadata lists no GPU (a Parquet file written by another tool) gets one entry per
series it holds, so that the options reach every GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

from powerkit.core.errors import BadInputError, option
from powerkit.trace.model import Trace
from powerkit.trace.nameplate import lookup_nameplate_w
from powerkit.trace.options import ImportOptions
from powerkit.trace.schema import GpuMeta, TraceMeta
from powerkit.trace.semantics import SEMANTICS, usage_semantics

__all__ = [
    "POWER_FIELDS",
    "apply_overrides",
    "check_power_semantics",
    "override_meta",
    "power_field_key",
    "series_of",
]

#: ``--power-field`` choices: key -> (nvidia-smi field, canonical column, semantics)
POWER_FIELDS: dict[str, tuple[str, str, str | None]] = {
    "draw": ("power.draw", "power_w", None),  # (semantics: by the GPU model)
    "instant": ("power.draw.instant", "power_instant_w", "instant"),
    "average": ("power.draw.average", "power_avg_w", "average_1s"),
}


def power_field_key(text: str) -> str:
    """The ``--power-field`` key of ``text``: ``draw``, ``instant`` or ``average``, given as
    that, as the nvidia-smi field or as the canonical column."""
    wanted = text.strip().lower()
    for key, (field, column, _) in POWER_FIELDS.items():
        if wanted in (key, field, column):
            return key
    names = ", ".join(f"{k} ({f})" for k, (f, _, _) in POWER_FIELDS.items())
    raise BadInputError(f"{option('power-field')} {text!r}: one of {names}")


def series_of(trace: Trace) -> list[tuple[str, int]]:
    """The (host, gpu) series the trace holds, in order: from its index, else by a scan."""
    runs = trace.series_runs()
    if runs is not None:
        return list(dict.fromkeys((h, g) for h, g, _ in runs))
    import duckdb

    con = duckdb.connect()
    try:
        trace.register(con)
        rows = con.execute("SELECT DISTINCT host, gpu FROM trace ORDER BY host, gpu").fetchall()
    finally:
        con.close()
    return [(str(h), int(g)) for h, g in rows]


def apply_overrides(trace: Trace, opts: ImportOptions, *, field_read: bool = False) -> None:
    """Apply the options above to ``trace`` (``field_read``: the reader chose ``power_w`` by
    ``--power-field`` itself); the warnings go into ``trace.warnings``."""
    if opts.power_field is not None and not field_read:
        _choose_power_field(trace, power_field_key(opts.power_field))
    if opts.gpu_name is None and opts.nameplate_w is None and opts.power_semantics is None:
        return
    series = series_of(trace) if opts.gpu_name is not None or opts.nameplate_w else []
    for line in override_meta(trace.meta, opts, series):
        if line not in trace.warnings:
            trace.warnings.append(line)


def override_meta(
    meta: TraceMeta, opts: ImportOptions, series: Sequence[tuple[str, int]] = ()
) -> list[str]:
    """Apply ``--gpu-name``, ``--nameplate`` and ``--power-semantics`` to ``meta``, a GPU entry
    added for each of ``series`` it lacks; return what the user must be told."""
    told = []
    known = {(g.host, g.gpu) for g in meta.gpus}
    meta.gpus = [*meta.gpus, *(GpuMeta(host=h, gpu=g) for h, g in series if (h, g) not in known)]
    if opts.gpu_name is not None:
        plate = lookup_nameplate_w(opts.gpu_name)
        semantics = usage_semantics(opts.gpu_name)
        if plate is None and opts.nameplate_w is None:
            told.append(
                f"{option('gpu-name')} {opts.gpu_name!r} is not in the bundled table: its "
                f"nameplate is unknown (give {option('nameplate')})"
            )
        for gpu in meta.gpus:
            gpu.name = opts.gpu_name
            gpu.nameplate_w = plate if plate is not None else gpu.nameplate_w
        was = meta.power_semantics
        if was in ("nvml_usage", "unknown") and semantics != "nvml_usage":
            meta.power_semantics = semantics  # (NVML's usage field, or a foreign column: by model)
        elif was == "nvml_usage" and opts.power_semantics is None:
            told.append(
                f"{option('gpu-name')} {opts.gpu_name!r}: whether its NVML power usage is "
                f"instantaneous or a 1 s average is unknown (give {option('power-semantics')})"
            )
    if opts.nameplate_w is not None:  # (over the metadata and the table)
        for gpu in meta.gpus:
            gpu.nameplate_w = opts.nameplate_w
    if opts.power_semantics is not None:
        meta.power_semantics = opts.power_semantics
        meta.extra["power_semantics_given"] = True
    return told


def check_power_semantics(text: str | None) -> str | None:
    """``--power-semantics``, checked: one of :data:`powerkit.trace.semantics.SEMANTICS`."""
    if text is not None and text not in SEMANTICS:
        raise BadInputError(f"{option('power-semantics')} {text!r}: one of {', '.join(SEMANTICS)}")
    return text


def _choose_power_field(trace: Trace, key: str) -> None:
    """Make the column of ``key`` the trace's ``power_w`` (a canonical trace's own columns)."""
    _, column, semantics = POWER_FIELDS[key]
    if column == "power_w":
        return
    names = trace.column_names()
    if column not in names:
        have = sorted(n for n in names if n.startswith("power_") and n != "power_limit_w")
        raise BadInputError(
            f"{trace.origin}: {option('power-field')} {key}: the trace has no {column} column "
            f"(its power columns: {', '.join(have)})"
        )
    table = trace.table()  # (a Parquet trace is read into memory for the swap)
    chosen = table.column(column)
    if chosen.null_count:
        raise BadInputError(
            f"{trace.origin}: {option('power-field')} {key}: {column} has {chosen.null_count} "
            "empty cell(s)"
        )
    table = table.drop_columns([column])
    at = table.schema.get_field_index("power_w")
    kind = table.schema.field("power_w").type
    trace.table_ = table.set_column(at, "power_w", chosen.cast(kind))
    trace.files = ()
    trace.meta.power_semantics = semantics or trace.meta.power_semantics
    trace.meta.extra["power_field"] = POWER_FIELDS[key][0]
    trace.warnings.append(
        f"{trace.origin}: power_w is the {column} column ({option('power-field')} {key}); the "
        "former power_w is not kept"
    )
