"""The economics of oversubscription: provisioned power, capex avoided, energy and its cost.

All powers are per GPU nameplate (TDP) times counts; the facility's provisioned power counts
its overhead (IT x PUE); capex is per kW of critical IT capacity.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.jsonable import OMIT_NONE
from powerkit.core.tables import Column
from powerkit.econ.assumptions import Assumption

if TYPE_CHECKING:
    from powerkit.analysis.fleet import FleetReport
    from powerkit.cap.document import CapReport
    from powerkit.control.judge import EvalReport

__all__ = [
    "ASSUMPTION_COLUMNS",
    "CAP_VALUE_COLUMNS",
    "CapValue",
    "EconInputs",
    "EconReport",
    "assumption_rows",
    "cap_values",
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


@dataclass(frozen=True)
class EconReport(Document):
    """What ``powerkit econ`` reports (every figure per year where it says so)."""

    COMMAND: ClassVar[str] = "econ"

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
    cap: list[CapValue] | None = field(default=None, metadata=OMIT_NONE)  # --cap: its runs


@dataclass(frozen=True)
class CapValue:
    """One run of a ``cap`` document priced for the fleet of ``econ``'s --gpus x --gpu-tdp: a
    feed of nameplate ÷ ratio, its capex avoided, what capping at it loses, and the GPUs the
    same feed carries (every figure per year, the replayed horizon taken as typical)."""

    policy: str
    ratio: float  # nameplate ÷ the limit
    lost_share: float | None  # None: the run's jobs had no cap curves
    over_limit_share: float  # the time it was over its feed all the same (none: uncapped)
    feed_kw: float  # the IT feed: GPUs x TDP ÷ ratio
    avoided_capex_usd_per_year: float
    lost_gpu_hours_per_year: float | None
    lost_usd_per_year: float | None
    net_usd_per_year: float | None  # capex avoided - throughput lost
    gpus_same_feed: int  # on a feed built for the fleet's nameplate, at this ratio
    effective_gain: float | None  # ratio x (1 - lost) - 1: more work from the same feed


def economics(inputs: EconInputs) -> EconReport:
    """Return the economics of provisioning ``gpus`` at the fleet's peak fraction."""
    a = {k: v.value for k, v in inputs.assumptions.items()}
    for name in ("price", "pue", "capex_per_kw", "amortize"):
        if not (math.isfinite(a[name]) and a[name] > 0):
            raise BadInputError(f"{name} must be a positive number (got {a[name]})")
    if a["pue"] < 1:
        raise BadInputError(f"pue {a['pue']} is below 1: a facility cannot use less than its IT")
    if inputs.gpus < 1 or inputs.gpu_tdp_w <= 0:
        raise BadInputError(f"{option('gpus')} and {option('gpu-tdp')} must be positive")
    if not 0 < inputs.peak_fraction <= 1.5:
        raise BadInputError(f"peak fraction {inputs.peak_fraction} is not a share of nameplate")
    need = inputs.peak_fraction * (1 + inputs.margin)  # share of nameplate to provision
    it_nameplate = inputs.gpus * inputs.gpu_tdp_w / 1000
    it_oversub = it_nameplate * min(need, 1.0)
    energy_mwh = it_nameplate * inputs.mean_fraction * a["pue"] * HOURS_PER_YEAR / 1000
    avoided = _avoided_capex(it_nameplate, need, a["capex_per_kw"])
    return EconReport(
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
        gpus_deployable_same_feed=_gpus_on_feed(inputs.gpus, need),
        avoided_capex_usd=avoided,
        avoided_capex_usd_per_year=avoided / a["amortize"],
        mean_fraction=inputs.mean_fraction,
        annual_energy_mwh=energy_mwh,
        annual_energy_cost_usd=energy_mwh * 1000 * a["price"],
        assumptions={k: asdict(v) for k, v in inputs.assumptions.items()},
        control=None
        if inputs.tokens_per_mwh_change is None
        else _control(
            energy_mwh,
            a["price"],
            inputs.tokens_per_mwh_change,
            inputs.tokens_per_mwh_change_vs_static,
        ),
    )


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


def _avoided_capex(it_kw_nameplate: float, share: float, capex_per_kw: float) -> float:
    """The capex of the IT capacity not built when a feed of ``share`` of the nameplate is."""
    return (it_kw_nameplate - it_kw_nameplate * min(share, 1.0)) * capex_per_kw


def _gpus_on_feed(gpus: int, share: float) -> int:
    """The GPUs a feed built for ``gpus`` at nameplate carries at ``share`` of it each."""
    return math.floor(gpus / min(share, 1.0) + 1e-9)


def cap_values(
    cap: CapReport, gpus: int, gpu_tdp_w: float, assumptions: dict[str, Assumption]
) -> list[CapValue]:
    """Price every run of ``cap`` for ``gpus`` GPUs of ``gpu_tdp_w`` (CapValue)."""
    a = {k: v.value for k, v in assumptions.items()}
    if not (math.isfinite(a["gpu_hour"]) and a["gpu_hour"] >= 0):
        raise BadInputError(f"gpu_hour must be a number not below 0 (got {a['gpu_hour']})")
    it_kw = gpus * gpu_tdp_w / 1000
    out = []
    for run in cap.runs:
        ratio = cap.fleet_nameplate_w / run.limit_w
        if ratio < 1:
            continue  # (a feed above the nameplate avoids nothing)
        avoided = _avoided_capex(it_kw, 1 / ratio, a["capex_per_kw"]) / a["amortize"]
        lost = run.lost_share
        hours = None if lost is None else lost * gpus * HOURS_PER_YEAR
        cost = None if hours is None else hours * a["gpu_hour"]
        out.append(
            CapValue(
                policy=run.policy,
                ratio=ratio,
                lost_share=lost,
                over_limit_share=run.over_limit_share,
                feed_kw=it_kw / ratio,
                avoided_capex_usd_per_year=avoided,
                lost_gpu_hours_per_year=hours,
                lost_usd_per_year=cost,
                net_usd_per_year=None if cost is None else avoided - cost,
                gpus_same_feed=_gpus_on_feed(gpus, 1 / ratio),
                effective_gain=None if lost is None else ratio * (1 - lost) - 1,
            )
        )
    return out


#: the ``econ --cap`` table, a row per cap run
CAP_VALUE_COLUMNS = (
    Column("policy", "policy", key=True),
    Column("ratio", "ratio", ".2f"),
    Column("IT feed kW", "feed_kw", ",.0f"),
    Column("IT capex avoided $/y", "avoided_capex_usd_per_year", ",.0f"),
    Column("over", "over_limit_share", ".2%"),
    # a priced ratio whose capped fleet still draws more than its feed part of the time
    Column("feed held", lambda r: "no" if (r.over_limit_share or 0) > 0 else "yes", text=True),
    Column("lost", "lost_share", ".2%"),
    Column("lost GPU-h/y", "lost_gpu_hours_per_year", ",.0f"),
    Column("lost $/y", "lost_usd_per_year", ",.0f"),
    Column("net $/y", "net_usd_per_year", ",.0f"),
    Column("GPUs same feed", "gpus_same_feed", ","),
    Column("more work", "effective_gain", "+.1%"),
)


def fleet_figures(fleet: FleetReport, window_s: float) -> tuple[str, float, float, float | None]:
    """Return (window, peak fraction, margin, mean fraction) of an ``oversub`` result."""
    w = fleet.at(window_s)
    assert w.peak_fraction is not None  # (at() refuses a window without a peak)
    return w.window, w.peak_fraction, fleet.margin, fleet.mean_fraction


def control_figures(evaluation: EvalReport) -> tuple[float, float | None]:
    """Return the controller's change in tokens/MWh vs uncontrolled and vs static safe."""
    ppo = evaluation.arm("ppo")
    change = ppo.vs_uncontrolled.get("tokens_per_mwh")
    if change is None:
        raise BadInputError("the evaluation has no tokens/MWh change against uncontrolled")
    return float(change), ppo.vs_static_safe.get("tokens_per_mwh")


def econ_rows(report: EconReport) -> list[tuple[str, str]]:
    """The figures of an ``econ`` result as labelled lines, for the terminal and the report."""
    r = report
    rows: list[tuple[str, str]] = [
        ("window judged", r.window),
        (
            "fleet peak (of nameplate)",
            f"{100 * r.peak_fraction:.1f} % + margin {100 * r.margin:.0f} %",
        ),
        ("GPUs x TDP", f"{r.gpus:,} x {r.gpu_tdp_w:.0f} W"),
        ("provisioned today (facility)", f"{r.provisioned_kw_nameplate:,.0f} kW"),
        ("provisioned with oversubscription (facility)", f"{r.provisioned_kw_oversub:,.0f} kW"),
        ("GPUs within the same feed", f"{r.gpus_deployable_same_feed:,}"),
        (
            "capex avoided",
            f"${r.avoided_capex_usd:,.0f} (${r.avoided_capex_usd_per_year:,.0f}/year)",
        ),
        ("energy per year", f"{r.annual_energy_mwh:,.0f} MWh (${r.annual_energy_cost_usd:,.0f})"),
    ]
    c = r.control
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
                f"{c['energy_saved_mwh_per_year'] or 0:,.0f} MWh "
                f"(${c['energy_cost_saved_usd_per_year'] or 0:,.0f}) at the same tokens",
            )
        )
        vs_static = c.get("tokens_per_mwh_change_vs_static_safe")
        if vs_static is not None:
            saved = c.get("energy_saved_vs_static_safe_mwh_per_year") or 0
            text = f"{100 * vs_static:+.1f} % tokens/MWh, {saved:,.0f} MWh/year saved"
            rows.append(("controller vs static safe", text))
    return rows


#: the assumptions table of ``powerkit econ``: rows of :func:`assumption_rows`
ASSUMPTION_COLUMNS = (
    Column("assumption", lambda r: r[0], key=True),
    Column("value", lambda r: r[1], text=True),
    Column("source", lambda r: r[2], text=True),
)


def assumption_rows(report: EconReport) -> list[tuple[str, str, str]]:
    """Every assumption of an ``econ`` result: name, value with its unit, source."""
    return [
        (name, f"{a['value']:g} {a['unit']}", str(a["source"]))
        for name, a in report.assumptions.items()
    ]
