"""``powerkit econ``: what oversubscription (and the controller) are worth, assumptions shown."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from powerkit.cli.common import JsonOpt, emit_json, handle_errors, load_json_doc, out_console
from powerkit.econ.assumptions import DEFAULTS
from powerkit.econ.economics import (
    EconInputs,
    EconReport,
    control_figures,
    econ_rows,
    economics,
    fleet_figures,
)
from powerkit.errors import BadInputError
from powerkit.inputs import load_toml
from powerkit.units import parse_duration, parse_percent, parse_power

__all__ = ["econ"]

_OPTIONS = (
    "oversub",
    "control",
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


def _config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    data = load_toml(path, "--config")
    table = data.get("econ", data)
    keys = {k.replace("-", "_"): v for k, v in table.items()}
    unknown = sorted(set(keys) - set(_OPTIONS))
    if unknown:
        raise BadInputError(
            f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(_OPTIONS)})"
        )
    return keys


def _number(text: str | float, what: str, unit_re: str = "") -> float:
    raw = str(text).strip()
    m = re.fullmatch(r"\$?([+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*" + unit_re, raw)
    if m is None:
        raise BadInputError(f"{what} {raw!r} is not a number{' with the unit' if unit_re else ''}")
    value = float(m.group(1))
    if value < 0:
        raise BadInputError(f"{what} {raw!r} must not be negative")
    return value


def _years(text: str | float) -> float:
    raw = str(text).strip()
    m = re.fullmatch(r"(\d+(?:\.\d*)?)\s*(y|yr|years?)?", raw)
    if m is None:
        raise BadInputError(f"--amortize {raw!r}: give years, e.g. 15y")
    return float(m.group(1))


def render(report: EconReport) -> None:
    """Print the figures, then every assumption with its source."""
    out = out_console()
    rows = econ_rows(asdict(report))
    table = Table(box=box.SIMPLE_HEAD, show_header=False, pad_edge=False)
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)
    assumptions = Table("assumption", "value", "source", box=box.SIMPLE_HEAD, pad_edge=False)
    for name, a in report.assumptions.items():
        assumptions.add_row(name, f"{a['value']:g} {a['unit']}", a["source"])
    out.print(assumptions)


@handle_errors
def econ(
    oversub: Annotated[
        Path | None,
        typer.Option("--oversub", help="`oversub --json` output. Required, here or in --config."),
    ] = None,
    control: Annotated[
        Path | None, typer.Option("--control", help="`control eval --json` output.")
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option("--gpus", min=1, help="GPUs to provision. Required, here or in --config."),
    ] = None,
    gpu_tdp: Annotated[
        str | None,
        typer.Option(
            "--gpu-tdp", help="Per-GPU nameplate, e.g. 700W. Required, here or in --config."
        ),
    ] = None,
    pue: Annotated[
        float | None, typer.Option("--pue", help="Facility PUE (default: industry average).")
    ] = None,
    capex_per_kw: Annotated[
        str | None, typer.Option("--capex-per-kw", help="USD per kW of critical IT capacity.")
    ] = None,
    amortize: Annotated[str | None, typer.Option("--amortize", help="Years, e.g. 15y.")] = None,
    price: Annotated[
        str | None, typer.Option("--price", help="Electricity, e.g. 0.08/kWh.")
    ] = None,
    window: Annotated[
        str | None, typer.Option("--window", help="Window whose peak sets provisioning.")
    ] = None,
    margin: Annotated[
        str | None, typer.Option("--margin", help="Headroom (default: the oversub run's).")
    ] = None,
    utilization: Annotated[
        str | None,
        typer.Option(
            "--utilization", help="Mean power share of nameplate, if the oversub result lacks it."
        ),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML file with any of these options.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Turn a fleet's peak into provisioned power, GPUs per feed, capex and energy per year."""
    cfg = _config(config)
    given = {
        "oversub": oversub,
        "control": control,
        "gpus": gpus,
        "gpu_tdp": gpu_tdp,
        "pue": pue,
        "capex_per_kw": capex_per_kw,
        "amortize": amortize,
        "price": price,
        "window": window,
        "margin": margin,
        "utilization": utilization,
    }
    # The command line wins over the file, the file over the defaults.
    v: dict[str, Any] = {k: (given[k] if given[k] is not None else cfg.get(k)) for k in _OPTIONS}
    if v["oversub"] is None:
        raise BadInputError(
            "--oversub is needed (the `powerkit oversub --json` output), here or in --config"
        )
    if v["gpus"] is None or v["gpu_tdp"] is None:
        raise BadInputError("--gpus and --gpu-tdp are needed, here or in --config")
    fleet = load_json_doc(v["oversub"], "powerkit oversub")
    window_s = parse_duration(str(v["window"] or "30s"))
    label, peak, fleet_margin, mean = fleet_figures(fleet, window_s)
    if v["utilization"] is not None:
        mean = parse_percent(str(v["utilization"]), "--utilization", positive=True)
    if mean is None:
        raise BadInputError("the oversub result has no mean_fraction; give --utilization, e.g. 50%")
    assumptions = dict(DEFAULTS)
    parsers: dict[str, Callable[[Any], float]] = {
        "price": lambda t: _number(t, "--price", r"(?:/\s*kWh)?"),
        "pue": lambda t: _number(t, "--pue"),
        "capex_per_kw": lambda t: _number(t, "--capex-per-kw"),
        "amortize": _years,
    }
    for name, parse in parsers.items():
        if v[name] is not None:
            source = "--config " + str(config) if given[name] is None else "command line"
            assumptions[name] = replace(
                DEFAULTS[name], value=parse(v[name]), source=f"given ({source})"
            )
    inputs = EconInputs(
        gpus=int(v["gpus"]),
        gpu_tdp_w=parse_power(str(v["gpu_tdp"])).resolve(None),
        peak_fraction=peak,
        margin=fleet_margin if v["margin"] is None else parse_percent(str(v["margin"]), "--margin"),
        window=label,
        mean_fraction=mean,
        assumptions=assumptions,
    )
    if v["control"] is not None:
        inputs.tokens_per_mwh_change, inputs.tokens_per_mwh_change_vs_static = control_figures(
            load_json_doc(v["control"], "powerkit control eval")
        )
    report = economics(inputs)
    if json_out:
        emit_json(report, "econ")
    else:
        render(report)
