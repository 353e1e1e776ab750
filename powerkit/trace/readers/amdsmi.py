"""Read ``amd-smi monitor --csv`` and ``amd-smi metric --csv`` logs of AMD Instinct GPUs.

Written as amd-smi 24.x (ROCm 6.2-6.3) writes them with ``--watch`` (``-w SECONDS``): one row
per GPU per interval, ``timestamp`` in whole unix seconds first, ``gpu`` the device index, then
the command's fields flattened to one level; ``N/A`` where a reading failed. Redirecting the
standard output of a watch repeats the header before every interval; those lines are skipped.

* ``monitor`` (``-p``): ``power_usage`` in W — the socket's current power where the GPU reports
  it (MI300 and later), else the firmware's average (``average_socket_power``); ``gfx_clock``,
  ``mem_clock`` (MHz), ``gfx``, ``mem`` (% busy) and ``hotspot_temperature`` (°C) come along.
* ``metric`` (``-p``, ``-E``): ``socket_power`` in W (the same reading), and
  ``total_energy_consumption`` in J (the energy accumulator times its resolution), the counter
  energy is integrated from.

Neither log names the GPU model: give ``--gpu-name`` (e.g. ``"AMD Instinct MI300X"``) for the
nameplate, or ``--nameplate``.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

from powerkit.core.errors import BadInputError
from powerkit.trace.model import Trace
from powerkit.trace.options import ImportOptions
from powerkit.trace.readers.csvfile import read_canonical_csv
from powerkit.trace.readers.widecsv import header_names

__all__ = ["looks_like_amdsmi", "read_amdsmi"]

#: amd-smi's power fields, in the order they are preferred
_POWER_FIELDS = ("power_usage", "socket_power")
#: amd-smi field -> canonical column, for the fields that have one
_FIELDS = {
    "timestamp": "ts",
    "gpu": "gpu",
    "total_energy_consumption": "energy_j",
    "gfx_clock": "sm_clock_mhz",
    "mem_clock": "mem_clock_mhz",
    "gfx": "gpu_util",
    "mem": "mem_util",
    "hotspot_temperature": "temp_c",
}


def _names(line: str) -> list[str]:
    try:
        return header_names(line)
    except csv.Error:
        return []


def looks_like_amdsmi(first_line: str) -> bool:
    """Return True for the header of an amd-smi ``monitor``/``metric`` CSV with a power field."""
    names = _names(first_line)
    return "gpu" in names and any(p in names for p in _POWER_FIELDS)


def read_amdsmi(path: Path, opts: ImportOptions, warnings: list[str]) -> Trace:
    """Return the Trace of an amd-smi CSV log (read through the CSV reader with amd-smi's
    column names mapped)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        names = _names(fh.readline())
    if "timestamp" not in names:
        raise BadInputError(
            f"{path}: an amd-smi log without timestamps (a single reading); record it with "
            "--watch, e.g. amd-smi monitor -p --csv -w 1 --file log.csv"
        )
    power = next(p for p in _POWER_FIELDS if p in names)
    mapping = {"power_w": power}
    mapping |= {column: name for name, column in _FIELDS.items() if name in names}
    if opts.mapping:  # the user's own --map wins, column by column
        mapping |= opts.mapping
    read = dataclasses.replace(opts, mapping=mapping)  # (numeric times: seconds by default)
    trace = read_canonical_csv(path, read, warnings)
    trace.meta.source = "amd-smi"
    trace.meta.power_semantics = "amd_socket"
    trace.meta.extra["amd_smi_power_field"] = power
    trace.meta.extra.pop("column_map", None)
    if opts.mapping:
        trace.meta.extra["column_map"] = dict(opts.mapping)
    return trace
