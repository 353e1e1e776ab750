"""Return a GPU's nameplate power (TDP) from its marketing name, from a bundled, sourced table."""

from __future__ import annotations

import csv
from functools import cache
from importlib import resources

__all__ = ["lookup_nameplate_w"]


@cache
def _table() -> tuple[tuple[str, float], ...]:
    text = resources.files("powerkit").joinpath("data/gpu_nameplates.csv").read_text()
    rows = csv.DictReader(text.splitlines())
    return tuple((r["pattern"].lower(), float(r["tdp_w"])) for r in rows)


def lookup_nameplate_w(gpu_name: str | None) -> float | None:
    """Return the board TDP in watts for a GPU name such as ``"NVIDIA H100 80GB HBM3"``.

    The table is ordered from specific to general; the first pattern contained in the name
    wins. Returns None when the name is unknown: callers then need ``--nameplate``.
    """
    if not gpu_name:
        return None
    name = gpu_name.lower()
    for pattern, tdp_w in _table():
        if pattern in name:
            return tdp_w
    return None
