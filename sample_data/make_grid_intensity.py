"""Regenerate powerkit/data/grid_intensity.csv: the bundled annual grid intensities.

Each option replaces the rows of one source and keeps every other row as it is:

--codecarbon global_energy_mix.json
    Every country not already given by Our World in Data (source ``owid``, kept as they are),
    from CodeCarbon's bundled table (mlco2/codecarbon, file
    codecarbon/data/private_infra/global_energy_mix.json at commit
    b05965e43b690cdc53787c7577adbe6e2caf4ed9; its per-country ``carbon_intensity``, g CO2e/kWh,
    and ``year``, derived from Our World in Data's energy data: Ember and the Energy
    Institute), source ``codecarbon``. ISO 3166 codes come from pycountry (only needed here).
--egrid-rates CO2_total_output_emission_rate_by_eGRID_subregion_2022.csv
--egrid-names egrid_nerc_subregions.csv
    The US eGRID subregions, source ``egrid2022``: EPA's eGRID2022 CO2 total output emission
    rate (lb/MWh) per subregion as published by EPA's data explorer (github.com/USEPA/
    ggcapdthemes, data-raw/CO2_total_output_emission_rate_by_eGRID_subregion_2022.csv at
    commit bc538023a7fcf5184014a59eb293a3dca7c5ecd1), named from EPA's eGRID production model
    (github.com/USEPA/egrid, data/static_tables/egrid_nerc_subregions.csv at commit
    ec8f4ad027010e128f75ede2b87b8cb7c406f0b9). Converted at 453.59237 g/lb.

    python sample_data/make_grid_intensity.py --egrid-rates R.csv --egrid-names N.csv
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "powerkit" / "data" / "grid_intensity.csv"
FIELDS = ["region", "name", "iso2", "iso3", "aliases", "g_per_kwh", "year", "source"]
HEADER = """\
# Annual average carbon intensity of electricity, grams per kWh: CO2-equivalent (lifecycle) for
# countries, CO2 from combustion for the US eGRID subregions (see egrid2022).
# Each row: the figure as published for its year at its source (regenerate with
# sample_data/make_grid_intensity.py). aliases: other names the row answers to, space-separated.
# owid: Our World in Data, "Carbon intensity of electricity generation" (Ember and Energy
#   Institute), https://ourworldindata.org/grapher/carbon-intensity-electricity?tab=table
# ember-gers: Ember, Global Electricity Review 2024 (world average 2023, stated as g CO2/kWh), as
#   cited by Statista
#   at https://www.statista.com/statistics/943137/global-emissions-intensity-power-sector-by-country
# codecarbon: CodeCarbon's global_energy_mix.json (github.com/mlco2/codecarbon, commit
#   b05965e43b690cdc53787c7577adbe6e2caf4ed9), carbon_intensity and year per country, derived
#   from Our World in Data energy data (Ember, Energy Institute)
# egrid2022: US EPA eGRID2022, CO2 total output emission rate (lb/MWh) by eGRID subregion,
#   from github.com/USEPA/ggcapdthemes
#   data-raw/CO2_total_output_emission_rate_by_eGRID_subregion_2022.csv
#   (commit bc538023a7fcf5184014a59eb293a3dca7c5ecd1); names from github.com/USEPA/egrid
#   data/static_tables/egrid_nerc_subregions.csv
#   (commit ec8f4ad027010e128f75ede2b87b8cb7c406f0b9); x 453.59237 g/lb / 1000.
#   CO2 only: eGRID's CO2e rate also counts CH4 and N2O.
"""

# Common names of countries that are neither the table's name nor an ISO code.
COUNTRY_ALIASES = {
    "united-kingdom": "uk great-britain britain",
    "united-states": "america united-states-of-america",
    "netherlands": "holland",
    "czechia": "czech-republic",
    "south-korea": "korea republic-of-korea",
}
# Market names for the eGRID subregion that contains the market (approximate: the subregion is
# drawn by utility service areas, not by the market's footprint).
EGRID_ALIASES = {
    "CAMX": "us-caiso caiso us-california",
    "ERCT": "us-ercot ercot",
    "NEWE": "us-isone isone us-iso-ne iso-ne us-new-england",
    "FRCC": "us-florida",
    "NYUP": "us-nyiso-upstate",
    "NYCW": "us-nyc",
}
LB_TO_G = 453.59237


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def codecarbon_rows(path: Path, kept: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    import pycountry

    mix = json.loads(path.read_text())
    have = {r["iso3"] for r in kept.values() if r["iso3"]}
    rows: dict[str, dict[str, str]] = {}
    for iso3, entry in sorted(mix.items()):
        if iso3 in have or entry.get("carbon_intensity") is None:
            continue
        country = pycountry.countries.get(alpha_3=iso3)
        name = entry["country_name"]
        rows[slug(name)] = {
            "region": slug(name),
            "name": name,
            "g_per_kwh": f"{entry['carbon_intensity']:.0f}",
            "year": str(entry["year"]),
            "source": "codecarbon",
            "iso2": country.alpha_2 if country else "",
            "iso3": iso3,
        }
    return rows


def egrid_rows(rates: Path, names: Path) -> dict[str, dict[str, str]]:
    name_of = {r["SUBRGN"]: r["SRNAME"] for r in csv.DictReader(io.StringIO(names.read_text()))}
    rows: dict[str, dict[str, str]] = {}
    reader = csv.reader(io.StringIO(rates.read_text()))
    header = [h.strip() for h in next(reader)]
    if "lb/MWh" not in header[1]:
        raise SystemExit(f"{rates}: expected lb/MWh in the second column, got {header[1]!r}")
    for code, lb_per_mwh, year in reader:
        code = code.strip()
        if code == "US":
            key, name, aliases = "us-egrid", "United States (eGRID US total)", ""
        else:
            key, name = f"us-{code.lower()}", f"{name_of[code]} (eGRID {code})"
            aliases = " ".join([code.lower(), *EGRID_ALIASES.get(code, "").split()])
        rows[key] = {
            "region": key,
            "name": name,
            "iso2": "",
            "iso3": "",
            "aliases": aliases,
            "g_per_kwh": f"{float(lb_per_mwh) * LB_TO_G / 1000:.1f}",
            "year": year.strip(),
            "source": "egrid2022",
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codecarbon", type=Path)
    parser.add_argument("--egrid-rates", type=Path)
    parser.add_argument("--egrid-names", type=Path)
    args = parser.parse_args()
    if (args.egrid_rates is None) != (args.egrid_names is None):
        parser.error("give --egrid-rates and --egrid-names together")
    text = TABLE.read_text()
    old = list(csv.DictReader(ln for ln in text.splitlines() if not ln.startswith("#")))
    rows = {r["region"]: {k: r.get(k) or "" for k in FIELDS} for r in old}
    if args.codecarbon is not None:
        rows = {k: r for k, r in rows.items() if r["source"] != "codecarbon"}
        rows.update(codecarbon_rows(args.codecarbon, rows))
    if args.egrid_rates is not None:
        rows = {k: r for k, r in rows.items() if r["source"] != "egrid2022"}
        rows.update(egrid_rows(args.egrid_rates, args.egrid_names))
    for key, aliases in COUNTRY_ALIASES.items():
        rows[key]["aliases"] = aliases
    out = io.StringIO()
    writer = csv.DictWriter(out, FIELDS, lineterminator="\n")
    writer.writeheader()
    world = rows.pop("world")
    writer.writerow(world)
    for key in sorted(rows):
        writer.writerow(rows[key])
    TABLE.write_text(HEADER + out.getvalue())


if __name__ == "__main__":
    main()
