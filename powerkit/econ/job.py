"""``econ`` as a library job: a fleet's peak (an ``oversub --json`` document) and the
assumptions (command line over a TOML file over the defaults, each with its source) into
provisioned power, GPUs per feed, capex and energy per year."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from powerkit.analysis.fleet import FleetReport
from powerkit.cap.document import CapReport
from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import load_toml
from powerkit.core.units import (
    PER_KWH,
    parse_amount,
    parse_duration,
    parse_percent,
    parse_power,
    parse_years,
)
from powerkit.econ.assumptions import CAP_DEFAULTS, DEFAULTS
from powerkit.econ.economics import (
    EconInputs,
    EconReport,
    cap_values,
    control_figures,
    economics,
    fleet_figures,
)
from powerkit.econ.pilot import PILOT_COSTS, PilotInputs, PilotPlan, pilot_plan

__all__ = ["ECON_OPTIONS", "EconOptions", "PilotOptions", "read_config", "run_econ", "run_pilot"]


@dataclass(frozen=True)
class EconOptions:
    """What ``powerkit econ`` is given; None: not given (its ``--config`` file, then the
    defaults, fill it). Quantities stay as written, with their units (``700W``, ``0.08/kWh``,
    ``15y``): a value from the command line and one from the file are parsed alike, and each
    assumption says which it came from.

    Attributes:
        oversub: ``oversub --json`` output (required, here or in the file).
        control: ``control eval --json`` output: tokens per MWh under control.
        cap: ``cap --json`` output: what capping at each ratio costs.
        gpu_hour: what a GPU-hour of work is worth, USD (with ``cap``).
        gpus: GPUs to provision (required, here or in the file).
        gpu_tdp: per-GPU nameplate (required, here or in the file).
        pue: facility PUE. capex_per_kw: USD per kW of critical IT capacity.
        amortize: years. price: electricity, USD per kWh.
        window: the window whose peak sets provisioning. margin: headroom kept.
        utilization: mean power share of nameplate, where the oversub result lacks it.
    """

    oversub: Path | str | None = None
    control: Path | str | None = None
    cap: Path | str | None = None
    gpu_hour: str | None = None
    gpus: int | None = None
    gpu_tdp: str | None = None
    pue: float | str | None = None
    capex_per_kw: str | None = None
    amortize: str | None = None
    price: str | None = None
    window: str | None = None
    margin: str | None = None
    utilization: str | None = None


#: what ``econ`` takes, on its command line or in its ``--config`` file
ECON_OPTIONS = (
    "oversub",
    "control",
    "cap",
    "gpu_hour",
    "gpus",
    "gpu_tdp",
    "pue",
    "capex_per_kw",
    "amortize",
    "price",
    "window",
    "margin",
    "utilization",
)


def read_config(path: Path | None) -> dict[str, Any]:
    """The options a ``--config`` TOML file gives (its ``[econ]`` table, or the whole file)."""
    if path is None:
        return {}
    data = load_toml(path, option("config"))
    table = data.get("econ", data)
    keys = {k.replace("-", "_"): v for k, v in table.items()}
    unknown = sorted(set(keys) - set(ECON_OPTIONS))
    if unknown:
        raise BadInputError(
            f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(ECON_OPTIONS)})"
        )
    for key, value in keys.items():
        _check_config_value(path, key, value)
    return keys


#: the keys of a ``--config`` file that name files (the others are numbers or quantities)
_FILE_KEYS = ("oversub", "cap", "control")


def _check_config_value(path: Path, key: str, value: Any) -> None:
    """Refuse a value of the wrong kind for its key, naming the file and the key (a TOML
    value may be any type: a count given as text, a list, a table)."""
    if key == "gpus":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadInputError(f"{path}: gpus = {value!r}: a whole number of GPUs, at least 1")
    elif key in _FILE_KEYS:
        if not isinstance(value, str) or not value.strip():
            raise BadInputError(f"{path}: {key} = {value!r}: a file name, in quotes")
    elif isinstance(value, bool) or not isinstance(value, str | int | float):
        raise BadInputError(f'{path}: {key} = {value!r}: a number or a quantity like "700W"')


def run_econ(opts: EconOptions, config: Path | None = None) -> EconReport:
    """The economics of the options given (``opts``), the ``config`` file filling what they
    leave out, the defaults the rest; each assumption says where its value came from."""
    given = {name: getattr(opts, name) for name in ECON_OPTIONS}
    cfg = read_config(config)
    # The command line wins over the file, the file over the defaults.
    v: dict[str, Any] = {
        k: (given.get(k) if given.get(k) is not None else cfg.get(k)) for k in ECON_OPTIONS
    }
    if v["oversub"] is None:
        raise BadInputError(
            "--oversub is needed (the `powerkit oversub --json` output), here or in --config"
        )
    if v["gpus"] is None or v["gpu_tdp"] is None:
        raise BadInputError(
            f"{option('gpus')} and {option('gpu-tdp')} are needed, here or in {option('config')}"
        )
    fleet = FleetReport.read(v["oversub"])
    window_s = parse_duration(str(v["window"] or "30s"))
    label, peak, fleet_margin, mean = fleet_figures(fleet, window_s)
    if v["utilization"] is not None:
        mean = parse_percent(str(v["utilization"]), option("utilization"), positive=True)
    if mean is None:
        raise BadInputError(
            f"the oversub result has no mean_fraction; give {option('utilization')}, e.g. 50%"
        )
    defaults = {**DEFAULTS, **(CAP_DEFAULTS if v["cap"] is not None else {})}
    assumptions = dict(defaults)
    parsers: dict[str, Callable[[Any], float]] = {
        "price": lambda t: parse_amount(t, option("price"), PER_KWH),
        "pue": lambda t: parse_amount(t, option("pue")),
        "capex_per_kw": lambda t: parse_amount(t, option("capex-per-kw")),
        "amortize": parse_years,
        "gpu_hour": lambda t: parse_amount(t, option("gpu-hour"), r"(/\s*(GPU-?)?h(ou)?r?)?"),
    }
    if v["gpu_hour"] is not None and v["cap"] is None:
        raise BadInputError(
            f"{option('gpu-hour')} prices what capping loses: give {option('cap')} too"
        )
    for name, parse in parsers.items():
        if v[name] is not None:
            source = (
                f"{option('config')} " + str(config) if given.get(name) is None else "command line"
            )
            assumptions[name] = replace(
                defaults[name], value=parse(v[name]), source=f"given ({source})"
            )
    inputs = EconInputs(
        gpus=int(v["gpus"]),
        gpu_tdp_w=parse_power(str(v["gpu_tdp"])).resolve(None),
        peak_fraction=peak,
        margin=fleet_margin
        if v["margin"] is None
        else parse_percent(str(v["margin"]), option("margin")),
        window=label,
        mean_fraction=mean,
        assumptions=assumptions,
    )
    if v["control"] is not None:
        from powerkit.control.judge import EvalReport  # (the controllers load only here)

        inputs.tokens_per_mwh_change, inputs.tokens_per_mwh_change_vs_static = control_figures(
            EvalReport.read(v["control"])
        )
    report = economics(inputs)
    if v["cap"] is None:
        return report
    cap = CapReport.read(v["cap"])
    return replace(report, cap=cap_values(cap, inputs.gpus, inputs.gpu_tdp_w, assumptions))


@dataclass(frozen=True)
class PilotOptions:
    """What ``powerkit pilot`` is given, its units parsed.

    Attributes:
        oversub: ``oversub --json`` output: the fleet's measured peak.
        site_mw: the site's power feed, MW.
        gpu_tdp_w: per-GPU nameplate, W (default 700).
        pue: facility PUE (None: the industry average, with its source).
        window_s: the window whose peak sets provisioning, s (default 30).
        target: provisioned share of nameplate the pilot tries to hold (default 0.70).
        days, racks, gpus_per_rack: the pilot's length and scope.
        max_violation_30s, max_slowdown: go/no-go: the 30 s violation share and throughput
            loss allowed.
        meter_per_rack, engineer_weeks, engineer_week_usd: costs given (None: the defaults,
            with their sources).
    """

    oversub: Path
    site_mw: float
    gpu_tdp_w: float = 700.0
    pue: float | None = None
    window_s: float = 30.0
    target: float = 0.70
    days: int = 45
    racks: int = 8
    gpus_per_rack: int = 32
    max_violation_30s: float = 0.001
    max_slowdown: float = 0.02
    meter_per_rack: float | None = None
    engineer_weeks: float | None = None
    engineer_week_usd: float | None = None


def run_pilot(opts: PilotOptions) -> PilotPlan:
    """What ``powerkit pilot`` plans from the fleet's peak (its Markdown: ``pilot_markdown``)."""
    label, peak, margin, _ = fleet_figures(FleetReport.read(opts.oversub), opts.window_s)
    costs = dict(PILOT_COSTS)
    for name in ("meter_per_rack", "engineer_weeks", "engineer_week_usd"):
        given = getattr(opts, name)
        if given is not None:  # (pilot_plan checks every cost: finite, not negative)
            costs[name] = replace(costs[name], value=given, source="given (command line)")
    pue = DEFAULTS["pue"]
    if opts.pue is not None:
        pue = replace(pue, value=opts.pue, source="given (command line)")
    return pilot_plan(
        PilotInputs(
            window=label,
            peak_fraction=peak,
            margin=margin,
            site_mw=opts.site_mw,
            pue=pue
            if opts.pue is None
            else replace(pue, value=opts.pue, source="given (command line)"),
            gpu_tdp_w=opts.gpu_tdp_w,
            target=opts.target,
            days=opts.days,
            racks=opts.racks,
            gpus_per_rack=opts.gpus_per_rack,
            max_violation_30s=opts.max_violation_30s,
            max_slowdown=opts.max_slowdown,
            costs=costs,
        )
    )
