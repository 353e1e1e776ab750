"""``powerkit utility``: a fleet's power swings as the utility sees them, a spec, and remedies
(``powerkit grid``, its name until this release, is kept as a deprecated alias)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.cli.progress import progress
from powerkit.core.choices import Compose
from powerkit.core.units import PER_KWH, format_span, format_value, parse_amount, parse_power
from powerkit.report.utility_section import utility_section
from powerkit.trace.arguments import parse_member
from powerkit.trace.options import ImportOptions
from powerkit.utility.document import UtilityDocument, site_unit, utility_tables
from powerkit.utility.job import UtilityOptions, run_utility, utility_steps

__all__ = ["grid", "utility"]


def render(doc: UtilityDocument) -> None:
    """Print the fleet and site, then each table (powerkit.utility.document.utility_tables)."""
    out = cli.out_console()
    f = format_value
    k, unit = site_unit(doc)
    m = doc.fleet

    def site(value: float | None, spec: str) -> str:
        return f(None if value is None else value * k, spec)

    plate = doc.site_nameplate_w
    out.print(
        f"fleet: {doc.gpus} GPUs, {doc.compose}, sampled every {m.dt_s:g} s "
        f"for {format_span(m.duration_s)}, mean {m.mean_w / 1e3:,.1f} kW; site: "
        f"{doc.replicas} replica(s), "
        + (f"{site(plate / 1e6, ',.1f')} {unit} nameplate" if plate else "nameplate unknown")
        + f", mean {site(doc.site_mean_w / 1e6, ',.2f')} {unit}; power {doc.power_semantics}"
    )
    d = m.dominant
    if d:
        amplitude = site(d.site_amplitude_mw, ",.2f")
        out.print(
            f"dominant: {f(d.frequency_hz, '.4f')} Hz, amplitude "
            f"{f(d.amplitude_w, ',.0f')} W ({amplitude} {unit} at site)"
        )
    for columns, rows in utility_tables(doc):
        if columns[0].header == "rule":
            out.print(f"spec: {doc.spec_name}")
        cli.print_table(columns, rows, out)
    if doc.mitigations:
        if doc.cheapest:
            out.print(f"cheapest that passes: {doc.cheapest}")
        elif doc.spec:
            out.print("no remedy tried passes the spec")


@cli.handle_errors
@reading.reader_options("gpu_name")
def utility(
    members: Annotated[list[str], typer.Argument(help="Traces as path or path:count.")],
    fleet: Annotated[
        list[str] | None, typer.Option(help="More members, path:count (repeatable).")
    ] = None,
    compose: opt.Composition = Compose.aligned,
    site_mw: Annotated[float | None, typer.Option(help="Scale the fleet to this many MW.")] = None,
    spec: Annotated[Path | None, typer.Option(help="The utility's limits (TOML).")] = None,
    mitigate: Annotated[
        str | None, typer.Option(help="What-ifs: floor:60%,ramp:2%/s,storage:auto,fill:80%.")
    ] = None,
    price: Annotated[
        str | None, typer.Option(help="Energy price, USD/kWh (default: econ's).")
    ] = None,
    grid_step: Annotated[
        str | None, typer.Option("--grid", help="Cell length (default: the traces' interval).")
    ] = None,
    nameplate: Annotated[
        str | None, typer.Option(help="Per-GPU nameplate, wins over metadata.")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of random offsets.")] = 0,
    html: opt.Html = None,
    plotly_js: opt.PlotlyJs = "inline",
    force: opt.Force = False,
    fill: opt.Fill = "none",
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Ramp rates, dynamic range and spectrum of a fleet's power at site scale, against a
    utility's spec, with the cost of each remedy."""
    from powerkit.econ.assumptions import DEFAULTS
    from powerkit.utility.mitigate import parse_mitigations
    from powerkit.utility.spec import read_spec

    opts = UtilityOptions(
        compose,
        site_mw,
        read_spec(spec) if spec is not None else None,
        parse_mitigations(mitigate) if mitigate else [],
        DEFAULTS["price"].value if price is None else parse_amount(price, "--price", PER_KWH),
        opt.grid_option(grid_step or None),
        seed,
        opt.fill_option(fill),
    )
    plate = parse_power(nameplate).resolve(None) if nameplate else None
    parsed = [parse_member(m) for m in [*members, *(fleet or [])]]
    page = cli.Page(html, plotly_js, force, [p for p, _, _ in parsed] + [spec])
    traces = cli.load_members(parsed, reader, plate)
    with progress("utility", utility_steps(opts), quiet=json_out) as advance:
        doc = run_utility(traces, opts, on_progress=lambda note: advance(1, note))
    page.write("powerkit utility", lambda: [utility_section(doc)])
    cli.finish(doc, json_out, render, warnings=doc.warnings, written=[html])


@functools.wraps(utility)
def grid(*args: Any, **kwargs: Any) -> None:
    """Deprecated name of ``powerkit utility`` (kept for one release)."""
    cli.warn("`powerkit grid` is now `powerkit utility`; the old name goes in the next release")
    utility(*args, **kwargs)
