"""The economics of oversubscription: provisioned power, capex avoided, energy and its cost.

All powers are per GPU nameplate (TDP) times counts; the facility's provisioned power counts
its overhead (IT x PUE); capex is per kW of critical IT capacity.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from powerkit.econ.assumptions import Assumption
from powerkit.errors import BadInputError

__all__ = [
    "EconInputs",
    "EconReport",
    "control_figures",
    "econ_rows",
    "economics",
    "fleet_figures",
]

HOURS_PER_YEAR = 8760.0


@dataclass
class EconInputs:
    """What the economics needs; each assumption with the source it came from."""

    gpus: int
    gpu_tdp_w: float
    peak_fraction: float
    margin: float
    window: str
    mean_fraction: float
    assumptions: dict[str, Assumption]
    tokens_per_mwh_change: float | None = None  # controller vs uncontrolled, e.g. 0.262
    tokens_per_mwh_change_vs_static: float | None = None


@dataclass
class EconReport:
    """What ``powerkit econ`` reports (every figure per year where it says so)."""

    window: str
    peak_fraction: float
    margin: float
    gpus: int
    gpu_tdp_w: float
    pue: float
    it_kw_nameplate: float
    it_kw_oversub: float
    provisioned_kw_nameplate: float
    provisioned_kw_oversub: float
    gpus_deployable_same_feed: int
    avoided_capex_usd: float
    avoided_capex_usd_per_year: float
    mean_fraction: float
    annual_energy_mwh: float
    annual_energy_cost_usd: float
    control: dict[str, float | None] | None = None
    assumptions: dict[str, dict[str, Any]] = field(default_factory=dict)


def economics(inputs: EconInputs) -> EconReport:
    """Return the economics of provisioning ``gpus`` at the fleet's peak fraction."""
    a = {k: v.value for k, v in inputs.assumptions.items()}
    for name in ("price", "pue", "capex_per_kw", "amortize"):
        if not (math.isfinite(a[name]) and a[name] > 0):
            raise BadInputError(f"{name} must be a positive number (got {a[name]})")
    if a["pue"] < 1:
        raise BadInputError(f"pue {a['pue']} is below 1: a facility cannot use less than its IT")
    if inputs.gpus < 1 or inputs.gpu_tdp_w <= 0:
        raise BadInputError("--gpus and --gpu-tdp must be positive")
    if not 0 < inputs.peak_fraction <= 1.5:
        raise BadInputError(f"peak fraction {inputs.peak_fraction} is not a share of nameplate")
    need = inputs.peak_fraction * (1 + inputs.margin)  # share of nameplate to provision
    it_nameplate = inputs.gpus * inputs.gpu_tdp_w / 1000
    it_oversub = it_nameplate * min(need, 1.0)
    energy_mwh = it_nameplate * inputs.mean_fraction * a["pue"] * HOURS_PER_YEAR / 1000
    avoided = (it_nameplate - it_oversub) * a["capex_per_kw"]
    report = EconReport(
        window=inputs.window,
        peak_fraction=inputs.peak_fraction,
        margin=inputs.margin,
        gpus=inputs.gpus,
        gpu_tdp_w=inputs.gpu_tdp_w,
        pue=a["pue"],
        it_kw_nameplate=it_nameplate,
        it_kw_oversub=it_oversub,
        provisioned_kw_nameplate=it_nameplate * a["pue"],
        provisioned_kw_oversub=it_oversub * a["pue"],
        gpus_deployable_same_feed=math.floor(inputs.gpus / min(need, 1.0) + 1e-9),
        avoided_capex_usd=avoided,
        avoided_capex_usd_per_year=avoided / a["amortize"],
        mean_fraction=inputs.mean_fraction,
        annual_energy_mwh=energy_mwh,
        annual_energy_cost_usd=energy_mwh * 1000 * a["price"],
        assumptions={k: asdict(v) for k, v in inputs.assumptions.items()},
    )
    if inputs.tokens_per_mwh_change is not None:
        report.control = _control(
            energy_mwh,
            a["price"],
            inputs.tokens_per_mwh_change,
            inputs.tokens_per_mwh_change_vs_static,
        )
    return report


def _control(
    energy_mwh: float, price: float, vs_uncontrolled: float, vs_static: float | None
) -> dict[str, float | None]:
    """At the same token output, energy scales as 1 / (1 + change in tokens per MWh)."""
    saved = energy_mwh * (1 - 1 / (1 + vs_uncontrolled))
    out: dict[str, float | None] = {
        "tokens_per_mwh_change": vs_uncontrolled,
        "energy_saved_mwh_per_year": saved,
        "energy_cost_saved_usd_per_year": saved * 1000 * price,
        "tokens_per_mwh_change_vs_static_safe": vs_static,
    }
    if vs_static is not None:
        saved_static = energy_mwh * (1 - 1 / (1 + vs_static))
        out["energy_saved_vs_static_safe_mwh_per_year"] = saved_static
        out["energy_cost_saved_vs_static_safe_usd_per_year"] = saved_static * 1000 * price
    return out


def fleet_figures(fleet: dict[str, Any], window_s: float) -> tuple[str, float, float, float | None]:
    """Return (window, peak fraction, margin, mean fraction) from ``oversub --json`` output."""
    from powerkit.analysis.fleet import check_fleet_doc

    check_fleet_doc(fleet)
    try:
        windows = fleet["windows"]
        match = next((w for w in windows if abs(float(w["window_s"]) - window_s) < 1e-9), None)
    except (KeyError, TypeError, ValueError):
        raise BadInputError("not an `oversub --json` document (no windows)") from None
    if match is None:
        have = ", ".join(str(w.get("window")) for w in windows)
        raise BadInputError(f"window {window_s:g} s is not in the oversub result (it has {have})")
    if match.get("peak_fraction") is None:
        empty = [str(w.get("window")) for w in windows if w.get("peak_fraction") is None]
        full = [str(w.get("window")) for w in windows if w.get("peak_fraction") is not None]
        have = (
            f"windows with a peak: {', '.join(full)} (choose one with --window)"
            if full
            else ("no window has a peak")
        )
        raise BadInputError(
            f"the oversub result has no complete position at {', '.join(empty)}, so no peak "
            f"there; {have}; or rerun oversub with --fill (e.g. hold:10s)"
        )
    return (
        str(match["window"]),
        float(match["peak_fraction"]),
        float(fleet.get("margin", 0.0)),
        None if fleet.get("mean_fraction") is None else float(fleet["mean_fraction"]),
    )


def control_figures(evaluation: dict[str, Any]) -> tuple[float, float | None]:
    """Return the controller's change in tokens/MWh vs uncontrolled and vs static safe."""
    try:
        ppo = next(a for a in evaluation["arms"] if a["arm"] == "ppo")
        change = ppo["vs_uncontrolled"]["tokens_per_mwh"]
    except (KeyError, TypeError, StopIteration):
        raise BadInputError("not a `control eval --json` document with a ppo arm") from None
    if change is None:
        raise BadInputError("the evaluation has no tokens/MWh change against uncontrolled")
    return float(change), ppo.get("vs_static_safe", {}).get("tokens_per_mwh")


def econ_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The figures of an ``econ --json`` document (or ``asdict(EconReport)``) as labelled
    lines, for the terminal table and the report."""
    rows: list[tuple[str, str]] = [
        ("window judged", str(doc["window"])),
        (
            "fleet peak (of nameplate)",
            f"{100 * doc['peak_fraction']:.1f} % + margin {100 * doc['margin']:.0f} %",
        ),
        ("GPUs x TDP", f"{doc['gpus']:,} x {doc['gpu_tdp_w']:.0f} W"),
        ("provisioned today (facility)", f"{doc['provisioned_kw_nameplate']:,.0f} kW"),
        ("provisioned with oversubscription", f"{doc['provisioned_kw_oversub']:,.0f} kW"),
        ("GPUs within the same feed", f"{doc['gpus_deployable_same_feed']:,}"),
        (
            "capex avoided",
            f"${doc['avoided_capex_usd']:,.0f} (${doc['avoided_capex_usd_per_year']:,.0f}/year)",
        ),
        (
            "energy per year",
            f"{doc['annual_energy_mwh']:,.0f} MWh (${doc['annual_energy_cost_usd']:,.0f})",
        ),
    ]
    c = doc.get("control")
    if c:
        rows.append(
            (
                "controller: tokens/MWh",
                f"{100 * (c['tokens_per_mwh_change'] or 0):+.1f} % vs uncontrolled",
            )
        )
        rows.append(
            (
                "controller: energy saved/year",
                f"{c['energy_saved_mwh_per_year']:,.0f} MWh "
                f"(${c['energy_cost_saved_usd_per_year']:,.0f}) at the same tokens",
            )
        )
        if c.get("tokens_per_mwh_change_vs_static_safe") is not None:
            rows.append(
                (
                    "controller vs static safe",
                    f"{100 * (c['tokens_per_mwh_change_vs_static_safe'] or 0):+.1f} % tokens/MWh, "
                    f"{c.get('energy_saved_vs_static_safe_mwh_per_year') or 0:,.0f} MWh/year saved",
                )
            )
    return rows
