"""An operator pilot of power oversubscription: scope, metering, go/no-go, rollback and cost.

The plan is built from a fleet's measured peak (``powerkit oversub``) and the site's feed; its
go/no-go criteria are this toolkit's own metrics, so the pilot is judged by re-running the same
commands on the pilot's recordings.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import check_site_mw
from powerkit.econ.assumptions import Assumption

__all__ = ["PILOT_COSTS", "PilotInputs", "PilotPlan", "pilot_markdown", "pilot_plan"]

# Planning placeholders, not sourced figures: the plan prints them as such, to be replaced
# with the operator's own quotes.
PILOT_COSTS: dict[str, Assumption] = {
    "meter_per_rack": Assumption(
        1_500.0,
        "USD per rack",
        "placeholder: branch-circuit power meter with sub-second logging, installed; "
        "replace with your quote (--meter-per-rack)",
    ),
    "engineer_weeks": Assumption(
        6.0,
        "weeks",
        "placeholder: set-up, daily review and the closing analysis; set --engineer-weeks",
    ),
    "engineer_week_usd": Assumption(
        4_000.0,
        "USD per week",
        "placeholder: loaded cost of one engineer-week; set --engineer-week-usd",
    ),
}


@dataclass
class PilotInputs:
    """What the plan needs: the fleet's measured peak, the site and the pilot's choices."""

    window: str
    peak_fraction: float
    margin: float
    site_mw: float
    pue: Assumption
    gpu_tdp_w: float
    target: float = 0.70  # provisioned share of nameplate the pilot tries to hold
    days: int = 45
    racks: int = 8
    gpus_per_rack: int = 32
    max_violation_30s: float = 0.001
    max_slowdown: float = 0.02
    costs: dict[str, Assumption] = field(default_factory=lambda: dict(PILOT_COSTS))


@dataclass(frozen=True)
class PilotPlan(Document):
    """The figures of the plan (``pilot --json``); the Markdown is rendered from them."""

    COMMAND: ClassVar[str] = "pilot"

    inputs: dict[str, Any]
    site_it_kw: float
    site_gpus_at_nameplate: int
    pilot_gpus: int
    pilot_nameplate_kw: float
    pilot_provisioned_kw: float
    budget_per_gpu_w: float
    extra_gpus_same_feed: int
    needed_fraction: float
    desk_verdict: str
    cost_usd: float
    cost_items: dict[str, float]
    out: str | None = None  # where the Markdown plan was written (None: stdout)


def pilot_plan(inputs: PilotInputs) -> PilotPlan:
    """Size the pilot; check the desk estimate (peak x (1 + margin)) against the target."""
    if not 0 < inputs.target <= 1:
        raise BadInputError(
            f"{option('target')} {inputs.target:g}: a share of nameplate in (0, 100 %]"
        )
    check_site_mw(inputs.site_mw)
    for name, value in (
        (option("gpu-tdp"), inputs.gpu_tdp_w),
        (option("days"), inputs.days),
        (option("racks"), inputs.racks),
        (option("gpus-per-rack"), inputs.gpus_per_rack),
    ):
        if not (math.isfinite(value) and value > 0):
            raise BadInputError(f"{name} must be positive (got {value:g})")
    if not (math.isfinite(inputs.pue.value) and inputs.pue.value >= 1):
        raise BadInputError(f"pue {inputs.pue.value:g} must be a finite number of at least 1")
    for key, cost in inputs.costs.items():
        if not (math.isfinite(cost.value) and cost.value >= 0):
            name = key.replace("_", "-")
            raise BadInputError(
                f"--{name} {cost.value:g}: must not be negative, and must be finite"
            )
    site_it_kw = inputs.site_mw * 1000 / inputs.pue.value
    site_gpus = math.floor(site_it_kw * 1000 / inputs.gpu_tdp_w)
    pilot_gpus = inputs.racks * inputs.gpus_per_rack
    if pilot_gpus > site_gpus:
        raise BadInputError(
            f"{pilot_gpus} pilot GPUs exceed the {site_gpus} the site's feed carries at nameplate"
        )
    nameplate_kw = pilot_gpus * inputs.gpu_tdp_w / 1000
    needed = inputs.peak_fraction * (1 + inputs.margin)
    verdict = (
        "the measured fleet fits the target"
        if needed <= inputs.target
        else "the measured fleet needs more than the target; pilot at the needed share or "
        "change the mix first"
    )
    c = {k: v.value for k, v in inputs.costs.items()}
    items = {
        "metering": inputs.racks * c["meter_per_rack"],
        "engineering": c["engineer_weeks"] * c["engineer_week_usd"],
    }
    return PilotPlan(
        inputs=asdict(inputs),
        site_it_kw=site_it_kw,
        site_gpus_at_nameplate=site_gpus,
        pilot_gpus=pilot_gpus,
        pilot_nameplate_kw=nameplate_kw,
        pilot_provisioned_kw=nameplate_kw * inputs.target,
        budget_per_gpu_w=inputs.gpu_tdp_w * inputs.target,
        extra_gpus_same_feed=math.floor(pilot_gpus / inputs.target + 1e-9) - pilot_gpus,
        needed_fraction=needed,
        desk_verdict=verdict,
        cost_usd=sum(items.values()),
        cost_items=items,
    )


def pilot_markdown(plan: PilotPlan) -> str:
    """The plan as Markdown an operator can act on."""
    i = plan.inputs
    budget = f"{plan.budget_per_gpu_w:.0f}W"
    pct = f"{100 * i['target']:.0f} %"
    limit = f"{100 * i['target']:.0f}%"  # (in a command: one word)
    cost_rows = "\n".join(
        f"| {name} | {a['value']:,g} {a['unit']} | {a['source']} |"
        for name, a in i["costs"].items()
    )
    return f"""# Power oversubscription pilot

## Scope
- Site feed {i["site_mw"]:g} MW at PUE {i["pue"]["value"]:g} ({i["pue"]["source"]}):
  {plan.site_it_kw:,.0f} kW of IT, {plan.site_gpus_at_nameplate:,} GPUs of {i["gpu_tdp_w"]:g} W
  at nameplate.
- Pilot: {i["racks"]} racks x {i["gpus_per_rack"]} GPUs = {plan.pilot_gpus} GPUs,
  {plan.pilot_nameplate_kw:,.1f} kW at nameplate, provisioned at {pct} of nameplate:
  {plan.pilot_provisioned_kw:,.1f} kW ({budget} per GPU). The same feed then carries
  {plan.extra_gpus_same_feed} more GPUs.
- Desk estimate from the fleet measurement: peak {100 * i["peak_fraction"]:.1f} % of nameplate at
  {i["window"]} + margin {100 * i["margin"]:.0f} % = {100 * plan.needed_fraction:.1f} %
  against the {pct} target: {plan.desk_verdict}.

## Duration
{i["days"]} days, starting with one week at nameplate provisioning as the baseline.

## Metering
- Per GPU: `powerkit record --backend nvml --interval 0.5s --out rackN.parquet` on every pilot
  host, all days.
- Per rack: the branch-circuit meter at the provisioned feed, logged at 1 s or faster,
  clocks synchronized with the hosts.
- Judged at 0.5 s, 30 s and 5 min windows:
  `powerkit windows rackN.parquet --budget {budget} --windows 0.5s,30s,5m` per rack and
  `powerkit oversub rack*.parquet --windows 0.5s,30s,5m --margin {100 * i["margin"]:.0f}%` for
  the pilot fleet.
- What holding the feed costs, before the first day at {pct}: the baseline week replayed at
  the provisioned feed, `powerkit cap rack*.parquet --limit {limit} --policy uniform,pfi
  --jobs curves.csv --latency L` (`L` from `powerkit cap latency capstep.parquet --steps
  capstep.json`, a recording of one cap step and its plan):
  how often the racks would be capped, what would get over the feed before the caps act,
  and the throughput each job would lose (docs/cap.md).

## Go / no-go (all must hold at the end)
1. The pilot fleet's measured peak at {i["window"]} plus margin stays at or below {pct} of
   nameplate (`oversub`, `peak_fraction` x (1 + margin)).
2. Violations of the {budget} per-GPU budget: 30 s windows at most
   {100 * i["max_violation_30s"]:g} % of positions; 5 min windows none (`windows`).
3. No breaker trip and no PDU over-current alarm on a pilot rack.
4. Throughput of the jobs on pilot racks within {100 * i["max_slowdown"]:g} % of the baseline
   week's tokens/s.

## Rollback
Return the pilot racks to nameplate provisioning the same day (remove the added load or set
power caps back to nameplate) when any 5 min window exceeds {budget} per GPU, a breaker or PDU
alarm fires, or a day's 30 s violation rate exceeds {100 * i["max_violation_30s"]:g} %. Keep
recording; resume only after the cause is understood.

## Cost estimate: ${plan.cost_usd:,.0f}
- Metering: {i["racks"]} racks: ${plan.cost_items["metering"]:,.0f}
- Engineering: ${plan.cost_items["engineering"]:,.0f}

| assumption | value | source |
| --- | --- | --- |
{cost_rows}
"""
