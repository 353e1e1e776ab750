"""What an nvidia-smi CSV's first line says: its fields (``--query-gpu``), whether it is a
header, which field is the power read as ``power_w``, and which columns are read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from powerkit.core.errors import BadInputError, option
from powerkit.trace.options import ImportOptions
from powerkit.trace.overrides import POWER_FIELDS, power_field_key
from powerkit.trace.readers.smi_gpus import IDENTITY_FIELDS

__all__ = [
    "FIELD_MAP",
    "LIMIT_RANK",
    "Layout",
    "field_name",
    "fields_read",
    "layout_of",
    "looks_like_smi",
    "wanted",
]

# nvidia-smi query field -> canonical column; the unit in the header is informational only.
FIELD_MAP: dict[str, str] = {
    "power.draw": "power_w",
    "power.draw.average": "power_avg_w",
    "power.draw.instant": "power_instant_w",
    "power.limit": "power_limit_w",
    "enforced.power.limit": "power_limit_w",
    "power.management.limit": "power_limit_w",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "clocks.current.memory": "mem_clock_mhz",
    "utilization.gpu": "gpu_util",
    "utilization.memory": "mem_util",
    "temperature.gpu": "temp_c",
    # the clocks-event (throttle) reasons bit field, in hex (``0x0000000000000004``)
    "clocks_event_reasons.active": "clock_event_reasons",
    "clocks_throttle_reasons.active": "clock_event_reasons",
}
LIMIT_RANK = {"enforced.power.limit": 0, "power.limit": 1, "power.management.limit": 2}


def field_name(header: str) -> str:
    """A header's field name, its unit cut (``power.draw [W]`` -> ``power.draw``): from the
    first ``[`` of a header that ends in ``]`` (a scan, not a pattern that backtracks over a
    line of brackets)."""
    name = header.strip()
    if name.endswith("]") and "[" in name:
        name = name[: name.index("[")]
    return name.strip().lower()


def looks_like_smi(first_line: str) -> bool:
    """Return True for an nvidia-smi CSV header, or a headerless row that starts with a time."""
    names = [field_name(h) for h in first_line.split(",")]
    if "timestamp" in names and any(n.startswith("power.draw") for n in names):
        return True
    return bool(re.match(r"^\s*\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}", first_line))


def _header_names(path: Path, first_line: str, opts: ImportOptions) -> tuple[list[str], bool]:
    if opts.columns:
        return [field_name(c) for c in opts.columns], "timestamp" in first_line.lower()
    if "timestamp" in first_line.lower() or "power.draw" in first_line.lower():
        return [field_name(h) for h in first_line.split(",")], True
    cells = [c.strip() for c in first_line.split(",")]
    powered = [i for i, c in enumerate(cells) if re.fullmatch(r"[-+0-9.]+ W", c)]
    if len(powered) == 1:
        names = ["timestamp" if i == 0 else f"_col{i}" for i in range(len(cells))]
        names[powered[0]] = "power.draw"
        return names, False
    if len(cells) == 2:
        return ["timestamp", "power.draw"], False
    raise BadInputError(
        f"{path}: headerless nvidia-smi CSV without units; give --columns "
        "(the --query-gpu list, e.g. timestamp,index,power.draw)"
    )


@dataclass(frozen=True)
class Layout:
    """What the header says: the fields, where the data starts, which columns are read."""

    names: list[str]
    has_header: bool
    first_line: str
    power_field: str
    keep_idx: list[int]

    @property
    def first_data_line(self) -> int:
        return 2 if self.has_header else 1


def layout_of(path: Path, opts: ImportOptions) -> Layout:
    with open(path, encoding="utf-8", errors="replace") as fh:
        first_line = fh.readline().rstrip("\r\n")
    names, has_header = _header_names(path, first_line, opts)
    if "timestamp" not in names:
        raise BadInputError(f"{path}: nvidia-smi CSV has no timestamp column")
    fields = [field for field, _, _ in POWER_FIELDS.values()]
    logged = [n for n in fields if n in names]
    if not logged:
        raise BadInputError(f"{path}: nvidia-smi CSV has no power.draw column")
    power_field = logged[0]
    if opts.power_field is not None:
        power_field = POWER_FIELDS[power_field_key(opts.power_field)][0]
        if power_field not in names:
            raise BadInputError(
                f"{path}: {option('power-field')} {opts.power_field}: the log has no "
                f"{power_field} (it has {', '.join(logged)})"
            )
    # Read only the columns powerkit uses (memory.used and the like are skipped).
    keep_idx = [i for i, n in enumerate(names) if n in wanted(power_field)]
    return Layout(names, has_header, first_line, power_field, keep_idx)


def fields_read(lay: Layout) -> dict[str, str]:
    """canonical column -> the field it was read from (as the parser chooses them)."""
    read = {"ts": "timestamp", "power_w": lay.power_field}
    read["gpu"] = "index" if "index" in lay.names else "(its place in each sampling frame)"
    for name in sorted(lay.names, key=lambda n: LIMIT_RANK.get(n, 0)):
        target = FIELD_MAP.get(name)
        if target and target not in read and name != lay.power_field:
            read[target] = name
    return read


def wanted(power_field: str) -> set[str]:
    """The fields powerkit reads from a log whose power is in ``power_field``."""
    return {"timestamp", "name", power_field, *FIELD_MAP, *IDENTITY_FIELDS}
