"""Grid carbon intensity: its units (``250g/kWh``, ``0.25 kg/kWh``, ...), the bundled annual
averages of countries and US eGRID subregions with their sources (``--region``,
``--list-regions``), and hourly series (``--intensity-csv``): what ``powerkit carbon`` multiplies
energy by."""

from __future__ import annotations

import csv
import difflib
import functools
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import ClassVar

from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import read_text_input
from powerkit.core.tables import Column
from powerkit.core.units import is_number

__all__ = [
    "REGION_COLUMNS",
    "Intensity",
    "RegionList",
    "list_regions",
    "parse_intensity",
    "read_intensity_csv",
    "regional_intensity",
]

# grams of CO2e per kWh for one unit of each spelling
_UNITS = {
    "g/kwh": 1.0,
    "kg/kwh": 1000.0,
    "kg/mwh": 1.0,
    "t/mwh": 1000.0,
    "lb/mwh": 453.59237 / 1000,
}
_INTENSITY_RE = re.compile(r"(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([a-zA-Z]+/[a-zA-Z]+)")


def parse_intensity(text: str) -> float:
    """``250g/kWh``, ``0.25kg/kWh``, ``900lb/MWh`` as grams CO2e per kWh."""
    m = _INTENSITY_RE.fullmatch(text.strip())
    factor = _UNITS.get(m.group(2).lower()) if m else None
    if m is None or factor is None:
        raise BadInputError(
            f"{option('intensity')} {text!r}: give a number with a unit, e.g. 250g/kWh "
            f"(units: {', '.join(_UNITS)})"
        )
    grams = float(m.group(1)) * factor
    if not (math.isfinite(grams) and grams >= 0):
        raise BadInputError(
            f"{option('intensity')} {text!r}: must be a finite number of at least 0"
        )
    return grams


_SOURCES = {
    "owid": "Ember and Energy Institute via Our World in Data, carbon-intensity-electricity",
    "ember-gers": "Ember, Global Electricity Review 2024, via Statista",
    "codecarbon": "CodeCarbon global_energy_mix.json (mlco2/codecarbon b05965e), from Our "
    "World in Data energy data (Ember, Energy Institute)",
    "egrid2022": "US EPA eGRID2022, CO2 total output emission rate by subregion (CO2 only, "
    "combustion; USEPA/ggcapdthemes bc53802)",
}


# Markets that span several eGRID subregions: no single figure, so name the subregions.
_SPLIT_MARKETS = {
    "pjm": "RFCE, RFCW and part of SRVC",
    "miso": "MROW, MROE, RFCM, SRMW and SRMV",
    "spp": "SPNO and SPSO",
    "nyiso": "NYUP, NYCW and NYLI",
}


@dataclass(frozen=True)
class Intensity:
    """A region's annual average intensity with its year and source."""

    region: str
    name: str
    g_per_kwh: float
    year: int
    source: str
    iso2: str = ""
    iso3: str = ""
    aliases: tuple[str, ...] = ()


@functools.cache
def _regions() -> dict[str, Intensity]:
    text = resources.files("powerkit").joinpath("data/grid_intensity.csv").read_text()
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return {
        r["region"]: Intensity(
            r["region"],
            r["name"],
            float(r["g_per_kwh"]),
            int(r["year"]),
            _SOURCES[r["source"]],
            r["iso2"],
            r["iso3"],
            tuple(r["aliases"].split()),
        )
        for r in rows
    }


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.strip().lower()).strip("-")


@functools.cache
def _keys() -> dict[str, str]:
    """Every name a region answers to (its key and name, ISO alpha-2 and alpha-3 codes, the
    table's aliases: common names, eGRID acronyms, market names)."""
    keys: dict[str, str] = {}
    for key, row in _regions().items():
        for name in (key, _slug(row.name), row.iso2.lower(), row.iso3.lower(), *row.aliases):
            if name:
                keys.setdefault(name, key)
    return keys


def list_regions() -> list[Intensity]:
    """Return every bundled region, the world first, then by name."""
    rows = list(_regions().values())
    return rows[:1] + sorted(rows[1:], key=lambda r: r.name)


def regional_intensity(region: str) -> Intensity:
    """The bundled annual average for ``region``: a country by name or ISO code (``germany``,
    ``US``, ``GBR``), or a US eGRID subregion by key, acronym or market (``us-camx``, ``CAMX``,
    ``us-caiso``); lists close names when unknown."""
    table = _regions()
    key = _keys().get(_slug(region))
    market = _slug(region).removeprefix("us-")
    if key is None and market in _SPLIT_MARKETS:
        raise BadInputError(
            f"region {region!r} spans several eGRID subregions ({_SPLIT_MARKETS[market]}): "
            f"give the one the site draws from, e.g. {option('region')} "
            f"{_SPLIT_MARKETS[market][:4]}"
        )
    if key is None:
        close = difflib.get_close_matches(_slug(region), list(_keys()), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise BadInputError(
            f"unknown region {region!r}{hint} (`powerkit carbon --list-regions` lists "
            f"{len(table)}: countries by name or ISO code, US eGRID subregions, and world)"
        )
    return table[key]


def read_intensity_csv(path: Path) -> dict[int, float]:
    """Read ``timestamp,intensity`` rows (g CO2e/kWh, one per hour; naive times are UTC)."""
    text = read_text_input(path, option("intensity-csv"))
    table: dict[int, float] = {}
    for n, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or (n == 1 and not is_number(row[-1])):
            continue  # blank line or header
        if len(row) != 2:
            raise BadInputError(f"{path}:{n}: expected timestamp,intensity")
        try:
            when = datetime.fromisoformat(row[0].strip())
            value = float(row[1])
        except ValueError:
            raise BadInputError(f"{path}:{n}: unreadable row {','.join(row)!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        stamp = when.timestamp()
        if stamp % 3600 or not math.isfinite(value) or value < 0:
            raise BadInputError(
                f"{path}:{n}: expected a whole hour and a non-negative intensity, got "
                f"{','.join(row)!r}"
            )
        table[int(stamp)] = value
    if not table:
        raise BadInputError(f"{path}: no intensity rows")
    return table


#: the table of ``carbon --list-regions``
REGION_COLUMNS = (
    Column("region", "region", key=True),
    Column("name", "name", text=True),
    Column("also", lambda r: " ".join(x for x in (r.iso2, r.iso3, *r.aliases) if x), text=True),
    Column("g/kWh", "g_per_kwh", "g"),
    Column("year", "year"),
    Column("source", "source", text=True),
)


@dataclass(frozen=True)
class RegionList(Document):
    """``powerkit carbon --list-regions``: every bundled region with its source."""

    COMMAND: ClassVar[str] = "carbon --regions"

    regions: list[Intensity]
