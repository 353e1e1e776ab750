"""Default economic assumptions, each with its unit and source (docs/assumptions.md)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CAP_DEFAULTS", "DEFAULTS", "Assumption"]


@dataclass(frozen=True)
class Assumption:
    """One input of the economics: its value, unit, and where the value comes from."""

    value: float
    unit: str
    source: str


DEFAULTS: dict[str, Assumption] = {
    "price": Assumption(
        0.0806,
        "USD/kWh",
        "US EIA, Electric Power Annual (data for 2023): average revenue per kWh, industrial "
        "sector, US total, 8.06 cents",
    ),
    "pue": Assumption(
        1.58,
        "ratio",
        "Uptime Institute Global Data Center Survey 2023: industry average PUE 1.58",
    ),
    "capex_per_kw": Assumption(
        11_000.0,
        "USD/kW of critical IT capacity",
        "industry estimates of USD 10-12 million per MW of critical IT load for a standard "
        "facility (AI-optimized facilities cost more); the middle of that range",
    ),
    "amortize": Assumption(
        15.0,
        "years",
        "assumption: a straight-line life for facility power and cooling plant; set "
        "--amortize to your accounting's",
    ),
}

#: what ``econ --cap`` adds: the value of the throughput that capping loses
CAP_DEFAULTS: dict[str, Assumption] = {
    "gpu_hour": Assumption(
        2.0,
        "USD/GPU-hour",
        "DeepSeek-V3 Technical Report (arXiv 2412.19437), Table 1: training costs assuming "
        "an H800 rental price of $2 per GPU hour; set --gpu-hour to what a GPU-hour of your "
        "fleet's work is worth",
    ),
}
