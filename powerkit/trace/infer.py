"""What each column of a CSV is, inferred from its name and unit when the file is in no layout
powerkit knows: ``timestamp,gpu,power_w``, ``t_s,gpu_index,power_w``, rocm-smi's
``timestamp,device,power_watts,power_cap_watts``, ``time [ms],card,power [mW]``.

The rules (docs/import.md, "How powerkit reads a file"):

* a column's name is compared in lower case, its unit cut off (``power [W]``, ``power (mW)``,
  ``power_mw``: the unit is read from the brackets or the suffix);
* time: ``timestamp``, ``time``, ``ts``, ``date``, ``datetime``, ``t``, ``elapsed``, ``epoch``
  (with a time unit suffix or not: ``t_s``, ``time_ms``);
* GPU: ``gpu``, ``gpu_index``, ``gpu_id``, ``index``, ``device``, ``device_id``, ``card``,
  ``id``, ``gpu_idx`` (cells such as ``card0`` or ``GPU 1`` give their number);
* power: ``power``, ``power_w``, ``power_draw``, ``power_watts``, ``watts``, ``power.draw``,
  ``power_usage``, ``pwr``, ``board_power``, ``socket_power``; failing those, the one column whose
  name holds ``power`` or ``watt`` and no ``cap``, ``limit``, ``max``, ``min``, ``target`` or
  ``energy``. Two candidates are refused, naming both;
* a power limit: a name with ``power`` and ``cap`` or ``limit`` (``power_cap_watts``);
* energy: ``energy_j``, or ``energy`` in J;
* a column named canonically (``sm_clock_mhz``, ``gpu_util``, ``temp_c``, ...) is that column,
  as is one of its usual other names whose unit cannot differ (``temperature_c``,
  ``throttle_reasons``); a utilization (a share or a percent?) is left out.

Every other column is left out, and said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from powerkit.core.errors import BadInputError, option
from powerkit.trace.options import MAPPABLE

__all__ = ["Inferred", "infer_columns", "map_text", "suggest_map"]

_UNIT = re.compile(r"\s*[\[(]\s*([A-Za-z%]+)\s*[\])]\s*$")
_TIME_UNITS = {"s": "s", "sec": "s", "secs": "s", "ms": "ms", "us": "us", "ns": "ns"}
_POWER_UNITS = {"w": "W", "watt": "W", "watts": "W", "mw": "mW", "kw": "kW"}
_TIME_NAMES = {"timestamp", "time", "ts", "date", "datetime", "t", "elapsed", "epoch", "unix"}
_GPU_NAMES = {
    "gpu",
    "gpu_index",
    "gpu_id",
    "gpu_idx",
    "gpu_num",
    "index",
    "device",
    "device_id",
    "device_index",
    "card",
    "id",
}
_POWER_NAMES = {
    "power",
    "power_draw",
    "power_usage",
    "power.draw",
    "pwr",
    "watts",
    "board_power",
    "socket_power",
    "current_socket_power",
    "average_socket_power",
}
#: other names of canonical columns (loggers' own spellings), where the unit cannot differ
#: (a utilization may be a share or a percent: never inferred)
_ALIASES = {
    "temperature_c": "temp_c",
    "temperature": "temp_c",
    "temperature.gpu": "temp_c",
    "temp": "temp_c",
    "throttle_reasons": "clock_event_reasons",
    "clocks_event_reasons": "clock_event_reasons",
    "sm_clock": "sm_clock_mhz",
    "clocks.sm": "sm_clock_mhz",
    "mem_clock": "mem_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "power_limit": "power_limit_w",
    "power.limit": "power_limit_w",
    "power_instant": "power_instant_w",
    "power.draw.instant": "power_instant_w",
    "power_average": "power_avg_w",
    "power.draw.average": "power_avg_w",
}
_NOT_POWER = re.compile(r"cap|limit|max|min|target|energy|setpoint|enforced|default")


@dataclass
class Inferred:
    """The columns of a file as inferred: canonical column -> (file column, why)."""

    columns: dict[str, tuple[str, str]] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)
    power_unit: str | None = None
    time_unit: str | None = None

    @property
    def mapping(self) -> dict[str, str]:
        """``--map``'s form: canonical column -> file column."""
        return {c: name for c, (name, _) in self.columns.items()}

    def readable(self) -> bool:
        """True when a time and a power column were found."""
        return "ts" in self.columns and "power_w" in self.columns


def _split(name: str) -> tuple[str, str | None]:
    """A column's name in lower case without its unit, and the unit (``power [mW]``)."""
    text = name.strip().strip('"')
    unit = None
    found = _UNIT.search(text)
    if found:
        unit, text = found.group(1), text[: found.start()]
    return text.strip().lower().replace(" ", "_"), unit


def _suffixed(base: str, names: set[str], units: dict[str, str]) -> tuple[bool, str | None]:
    """Whether ``base`` is one of ``names``, bare or with a unit suffix (``t_s``, ``power_mw``),
    and the unit."""
    if base in names:
        return True, None
    stem, _, suffix = base.rpartition("_")
    if stem in names and suffix in units:
        return True, units[suffix]
    return False, None


def infer_columns(header: list[str], origin: str = "") -> Inferred:
    """The columns of a CSV whose header is ``header``, inferred by name and unit; a file with
    two candidate power columns is refused, naming both."""
    found = Inferred()
    power_candidates: list[tuple[str, str | None]] = []
    loose: list[tuple[str, str | None]] = []
    for name in header:
        base, unit = _split(name)
        if not base:
            continue
        is_time, time_unit = _suffixed(base, _TIME_NAMES, _TIME_UNITS)
        is_power, power_unit = _suffixed(base, _POWER_NAMES, _POWER_UNITS)
        if base in MAPPABLE and base not in found.columns:
            found.columns[base] = (name, "its canonical name")
        elif _ALIASES.get(base) and _ALIASES[base] not in found.columns:
            found.columns[_ALIASES[base]] = (name, f"another name of {_ALIASES[base]}")
        elif is_time and "ts" not in found.columns:
            found.time_unit = time_unit or _TIME_UNITS.get((unit or "").lower())
            found.columns["ts"] = (name, "a time column's name" + _in(found.time_unit))
        elif base in _GPU_NAMES and "gpu" not in found.columns:
            found.columns["gpu"] = (name, "a GPU column's name")
        elif is_power:
            power_candidates.append((name, power_unit or _POWER_UNITS.get((unit or "").lower())))
        elif ("power" in base or "watt" in base) and ("cap" in base or "limit" in base):
            found.columns.setdefault("power_limit_w", (name, "a power limit's name"))
        elif base == "energy" and (unit or "J").lower() == "j":
            found.columns.setdefault("energy_j", (name, "an energy column's name, in J"))
        elif ("power" in base or "watt" in base) and not _NOT_POWER.search(base):
            loose.append((name, _POWER_UNITS.get((unit or base.rpartition("_")[2]).lower())))
        else:
            found.left_out.append(name)
    if "power_w" in found.columns:
        found.left_out += [n for n, _ in power_candidates + loose]
        return found
    candidates = power_candidates or loose
    if len(candidates) > 1:
        names = ", ".join(repr(n) for n, _ in candidates)
        raise BadInputError(
            f"{origin}: {len(candidates)} columns could be the power ({names}); choose one with "
            f"{option('map')} power_w=COLUMN"
        )
    if candidates:
        name, unit = candidates[0]
        found.columns["power_w"] = (name, "a power column's name" + _in(unit))
        found.power_unit = unit
    return found


def _in(unit: str | None) -> str:
    return f", in {unit}" if unit else ""


def map_text(mapping: dict[str, str]) -> str:
    """``--map``'s text of ``mapping``: ``ts=t_s,gpu=gpu_index,power_w=power_w``."""
    return ",".join(f"{c}={name}" for c, name in mapping.items())


def suggest_map(header: list[str], rows: list[list[str]]) -> str | None:
    """The ``--map`` that would read a CSV whose columns could not be inferred by name, from
    its values (``rows``: the first data rows): the time column (by name, else the column of
    dates or of increasing numbers) and the power column (by name, else the first column of
    numbers that is neither the time nor a small whole-number index), and such an index as the
    GPU; None when no time and power are found."""
    found = infer_columns(header) if header else Inferred()
    columns = list(zip(*rows, strict=False)) if rows else []

    def numbers(i: int) -> list[float] | None:
        try:
            return [float(v) for v in columns[i] if v.strip()] or None
        except (ValueError, IndexError):
            return None

    named_power = found.columns.get("power_w", (None, ""))[0]
    named_gpu = found.columns.get("gpu", (None, ""))[0]
    ts = found.columns.get("ts", (None, ""))[0]
    if ts is None:
        for i, name in enumerate(header):
            if name in (named_power, named_gpu):  # (their numbers may happen to increase)
                continue
            cells = columns[i] if i < len(columns) else ()
            values = numbers(i)
            dated = cells and all(("-" in c or "/" in c) and ":" in c for c in cells if c.strip())
            rising = values and len(values) > 1 and all(map(float.__lt__, values, values[1:]))
            if dated or rising:
                ts = name
                break
    power = named_power
    if power is None:
        for i, name in enumerate(header):
            values = numbers(i)
            unit = _UNIT.search(name)
            if name == ts or not values or (unit and unit.group(1).lower() not in _POWER_UNITS):
                continue  # (a column whose name gives a unit that is not power's is not power)
            index_like = all(v.is_integer() and 0 <= v < 64 for v in values)
            if not index_like and all(0 <= v <= 5000 for v in values):
                power = name
                break
    if ts is None or power is None:
        return None
    gpu = named_gpu if named_gpu != ts else None
    for i, name in enumerate(header):
        values = numbers(i)
        # (devices by their values: 0, 1, … k−1, as GPUs are numbered)
        seen = sorted(set(values)) if values is not None else []
        devices = bool(seen) and seen == list(range(len(seen)))
        if gpu is None and name not in (ts, power) and devices:
            gpu = name
    return f"ts={ts}" + (f",gpu={gpu}" if gpu else "") + f",power_w={power}"
