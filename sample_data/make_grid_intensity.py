"""Regenerate powerkit/data/grid_intensity.csv: the bundled annual grid intensities.

Rows kept as they are: the world average (Ember, via Statista) and the 2023 figures read from
Our World in Data's carbon-intensity-electricity table (source ``owid``). Every other country
comes from CodeCarbon's bundled table (mlco2/codecarbon, file
codecarbon/data/private_infra/global_energy_mix.json at commit
b05965e43b690cdc53787c7577adbe6e2caf4ed9; its per-country ``carbon_intensity``, g CO2e/kWh, and
``year``, derived from Our World in Data's energy data: Ember and the Energy Institute), source
``codecarbon``. ISO 3166 alpha-2/alpha-3 codes come from pycountry (only needed to regenerate).

    python sample_data/make_grid_intensity.py PATH/TO/global_energy_mix.json
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

import pycountry

TABLE = Path(__file__).resolve().parents[1] / "powerkit" / "data" / "grid_intensity.csv"
HEADER = """\
# Annual average carbon intensity of electricity generation, grams CO2-equivalent per kWh.
# Each row: the figure as published for its year at its source (regenerate with
# sample_data/make_grid_intensity.py).
# owid: Our World in Data, "Carbon intensity of electricity generation" (Ember and Energy
#   Institute), https://ourworldindata.org/grapher/carbon-intensity-electricity?tab=table
# ember-gers: Ember, Global Electricity Review 2024 (world average 2023, stated as g CO2/kWh), as
#   cited by Statista
#   at https://www.statista.com/statistics/943137/global-emissions-intensity-power-sector-by-country
# codecarbon: CodeCarbon's global_energy_mix.json (github.com/mlco2/codecarbon, commit
#   b05965e43b690cdc53787c7577adbe6e2caf4ed9), carbon_intensity and year per country, derived
#   from Our World in Data energy data (Ember, Energy Institute)
"""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def main() -> None:
    mix = json.loads(Path(sys.argv[1]).read_text())
    text = TABLE.read_text()
    old = list(csv.DictReader(ln for ln in text.splitlines() if not ln.startswith("#")))
    rows: dict[str, dict[str, str]] = {}
    for r in old:
        country = pycountry.countries.get(name=r["name"]) or _lookup(r["name"])
        rows[r["region"]] = {**r, "iso2": country.alpha_2 if country else "",
                             "iso3": country.alpha_3 if country else ""}  # fmt: skip
    have = {r["iso3"] for r in rows.values() if r["iso3"]}
    for iso3, entry in sorted(mix.items()):
        if iso3 in have or entry.get("carbon_intensity") is None:
            continue
        country = pycountry.countries.get(alpha_3=iso3)
        name = entry["country_name"]
        rows[slug(name)] = {
            "region": slug(name), "name": name, "g_per_kwh": f"{entry['carbon_intensity']:.0f}",
            "year": str(entry["year"]), "source": "codecarbon",
            "iso2": country.alpha_2 if country else "", "iso3": iso3,
        }  # fmt: skip
    out = io.StringIO()
    fields = ["region", "name", "iso2", "iso3", "g_per_kwh", "year", "source"]
    writer = csv.DictWriter(out, fields, lineterminator="\n")
    writer.writeheader()
    world = rows.pop("world")
    writer.writerow({k: world[k] for k in fields})
    for key in sorted(rows):
        writer.writerow({k: rows[key][k] for k in fields})
    TABLE.write_text(HEADER + out.getvalue())


def _lookup(name: str):  # type: ignore[no-untyped-def]
    try:
        return pycountry.countries.search_fuzzy(name)[0]
    except LookupError:
        return None


if __name__ == "__main__":
    main()
