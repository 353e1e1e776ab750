"""``powerkit utility``: a fleet's power swings as the utility sees them, a spec, and remedies
(``powerkit grid``, its name until this release, is kept as a deprecated alias)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from powerkit.cells.grid import default_grid_s
from powerkit.choices import Compose, only
from powerkit.cli.common import (
    FillOpt,
    ForceOpt,
    GpuNameOpt,
    JsonOpt,
    PlotlyJsOpt,
    ReaderArgs,
    emit_json,
    err,
    fill_option,
    grid_option,
    handle_errors,
    import_options,
    member_traces,
    out_console,
    parse_member,
    reader_options,
    refuse_overwrite,
    warn,
)
from powerkit.cli.progress import progress
from powerkit.errors import BadInputError
from powerkit.outputs import check_plotly_js
from powerkit.units import format_value, parse_power
from powerkit.utility.document import utility_doc

__all__ = ["grid", "utility"]


def render(doc: dict[str, Any]) -> None:
    out = out_console()
    f = format_value
    # site figures in MW, kW under 1 MW, W under 10 kW (a small fleet's swings are not 0.00)
    plate = doc["site_nameplate_w"] or doc["site_mean_w"]  # (the mean: nameplate unknown)
    k, unit = (1.0, "MW") if plate >= 1e6 else (1e3, "kW") if plate >= 1e4 else (1e6, "W")

    def site(value: float | None, spec: str) -> str:
        return f(None if value is None else value * k, spec)

    out.print(
        f"[bold]fleet[/]: {doc['gpus']} GPUs, {doc['compose']}, sampled every {doc['dt_s']:g} s "
        f"for {doc['duration_s'] / 3600:.2f} h, mean {doc['mean_w'] / 1e3:,.1f} kW; site: "
        f"{doc['replicas']} replica(s), "
        + (
            f"{site(doc['site_nameplate_w'] / 1e6, ',.1f')} {unit} nameplate"
            if doc["site_nameplate_w"]
            else "nameplate unknown"
        )
        + f", mean {site(doc['site_mean_w'] / 1e6, ',.2f')} {unit}; power "
        f"{doc['power_semantics']}"
    )
    d = doc["dominant"]
    if d:
        amplitude = site(d["site_amplitude_mw"], ",.2f")
        out.print(f"dominant: {f(d['frequency_hz'], '.4f')} Hz, amplitude "
                  f"{f(d['amplitude_w'], ',.0f')} W ({amplitude} {unit} at site)")  # fmt: skip
    table = Table("ramp over", "max W", "% of mean", f"site {unit}/s", box=box.SIMPLE_HEAD)
    for r in doc["ramps"]:
        table.add_row(f"{r['interval_s']:g} s", f(r["max_w"], ",.0f"),
                      f(r["max_pct_of_mean"], ".1f"), site(r["site_mw_per_s"], ",.2f"))  # fmt: skip
    out.print(table)
    table = Table("range within", "max W", "% of mean", f"site {unit}", "periods", "",
                  box=box.SIMPLE_HEAD)  # fmt: skip
    for r in doc["dynamic_range"]:
        extra = r["note"] or (f"from {r['resolution_s']:g} s cells" if r["resolution_s"] > 1
                              else "")  # fmt: skip
        table.add_row(f"{r['period_s']:g} s", f(r["max_w"], ",.0f"),
                      f(r["max_pct_of_mean"], ".1f"), site(r["site_mw"], ",.2f"),
                      f"{r['periods']} (+{r['partial_periods']} partial)", extra)  # fmt: skip
    out.print(table)
    table = Table("band Hz", "variance", "peak W", f"site {unit}", "", box=box.SIMPLE_HEAD)
    for b in doc["bands"]:
        flag = ("not resolved" if not b["resolved"] else
                f"to {b['clipped_to_hz']:g} Hz" if b["clipped_to_hz"] else
                "averaged" if b["attenuated"] else "")  # fmt: skip
        share = None if b["variance_share"] is None else 100 * b["variance_share"]
        table.add_row(f"{b['low_hz']:g}-{b['high_hz']:g}", f(share, ".1f") + "%",
                      f(b["peak_amplitude_w"], ",.0f"), site(b["site_peak_amplitude_mw"], ",.3f"),
                      flag)  # fmt: skip
    out.print(table)
    if doc["spec"]:
        out.print(f"spec: {doc['spec_name']}")
        table = Table("rule", "limit", "value", "margin", "", box=box.SIMPLE_HEAD)
        for r in doc["spec"]:
            verdict = "pass" if r["pass"] else "FAIL " + r["note"]
            table.add_row(r["rule"], f"{r['limit']:g} {r['unit']}", f(r["value"], ",.3f"),
                          f(r["margin"], ",.3f"), verdict)  # fmt: skip
        out.print(table)
    if doc["mitigations"]:
        table = Table("what-if", "extra MWh/yr", "USD/yr", "slowdown", "storage kWh", "kW",
                      "spec", box=box.SIMPLE_HEAD)  # fmt: skip
        for m in doc["mitigations"]:
            verdict = "-" if m["pass"] is None else ("pass" if m["pass"] else "fail")
            cost = (f(m["extra_mwh_per_year"], ",.1f"), f(m["extra_usd_per_year"], ",.0f"))
            store = (f(m["storage_kwh"], ",.1f"), f(m["storage_kw"], ",.0f"))
            table.add_row(m["name"], *cost, f(m["slowdown_pct"], ".2f") + "%", *store, verdict)
        out.print(table)
        if doc["cheapest"]:
            out.print(f"cheapest that passes: [bold]{doc['cheapest']}[/]")
        elif doc["spec"]:
            out.print("no remedy tried passes the spec")


@handle_errors
@reader_options
def utility(
    members: Annotated[list[str], typer.Argument(help="Traces as path or path:count.")],
    fleet: Annotated[
        list[str] | None, typer.Option("--fleet", help="More members, path:count (repeatable).")
    ] = None,
    compose: Annotated[
        Compose, typer.Option("--compose", help="aligned (one synchronous job) or random.")
    ] = Compose.aligned,
    site_mw: Annotated[
        float | None, typer.Option("--site-mw", help="Scale the fleet to this many MW.")
    ] = None,
    spec: Annotated[
        Path | None, typer.Option("--spec", help="The utility's limits (TOML).")
    ] = None,
    mitigate: Annotated[
        str | None,
        typer.Option("--mitigate", help="What-ifs: floor:60%,ramp:2%/s,storage:auto,fill:80%."),
    ] = None,
    price: Annotated[
        str | None, typer.Option("--price", help="Energy price, USD/kWh (default: econ's).")
    ] = None,
    grid_step: Annotated[
        str | None, typer.Option("--grid", help="Cell length (default: the traces' interval).")
    ] = None,
    nameplate: Annotated[
        str | None, typer.Option("--nameplate", help="Per-GPU nameplate, wins over metadata.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of random offsets.")] = 0,
    html: Annotated[Path | None, typer.Option("--html", help="Write a Plotly page here.")] = None,
    plotly_js: PlotlyJsOpt = "inline",
    force: ForceOpt = False,
    fill: FillOpt = "none",
    json_out: JsonOpt = False,
    gpu_name: GpuNameOpt = None,
    reader: ReaderArgs | None = None,
) -> None:
    """Ramp rates, dynamic range and spectrum of a fleet's power at site scale, against a
    utility's spec, with the cost of each remedy."""
    only(compose, (Compose.aligned, Compose.random), "--compose", "utility")
    from powerkit.econ.assumptions import DEFAULTS
    from powerkit.utility.analysis import utility_report
    from powerkit.utility.mitigate import parse_mitigations
    from powerkit.utility.spec import read_spec

    refuse_overwrite(html, force, [Path(m) for m in members], "--html")
    check_plotly_js(plotly_js, force=force, out=html, inputs=[Path(m) for m in members])
    if site_mw is not None and not site_mw > 0:
        raise BadInputError("--site-mw must be positive")
    chosen_spec = read_spec(spec) if spec is not None else None
    remedies = parse_mitigations(mitigate) if mitigate else None
    usd = DEFAULTS["price"].value
    if price is not None:
        try:
            usd = float(price.lower().removesuffix("/kwh"))
        except ValueError:
            raise BadInputError(f"--price {price!r}: USD per kWh, e.g. 0.08") from None
    plate = parse_power(nameplate).resolve(None) if nameplate else None
    opts = import_options(gpu_name=gpu_name, **(reader or {}))
    parsed = [parse_member(m) for m in [*members, *(fleet or [])]]
    traces = member_traces(parsed, opts, plate)
    # the traces' own interval (the coarsest, rounded up): a fast recording keeps its spectrum
    grid_s = grid_option(grid_step or None) or default_grid_s(*(t for t, _ in traces),
                                                              floor_s=0.0)  # fmt: skip
    steps = 2 + (len(remedies) * (len(remedies) + 1) // 2 if remedies else 0)
    with progress("utility", steps, quiet=json_out) as advance:
        report = utility_report(
            traces, grid_s=grid_s, compose=compose.value, seed=seed, site_mw=site_mw,
            spec=chosen_spec, mitigations=remedies, fill=fill_option(fill),
            price_usd_per_kwh=usd, on_step=lambda note: advance(1, note),
        )  # fmt: skip
    for line in report.warnings:
        warn(line)
    doc = utility_doc(report)
    if html is not None:
        from powerkit.report.page import write_page
        from powerkit.report.utility_section import utility_section

        write_page(html, "powerkit utility", [utility_section(doc)], plotly_js)
        if not json_out:
            err.print(f"wrote {html}")
    if json_out:
        emit_json(doc, "utility")
    else:
        render(doc)


@functools.wraps(utility)
def grid(*args: Any, **kwargs: Any) -> None:
    """Deprecated name of ``powerkit utility`` (kept for one release)."""
    warn("`powerkit grid` is now `powerkit utility`; the old name goes in the next release")
    utility(*args, **kwargs)
