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
from powerkit.core.units import (
    PER_KWH,
    format_energy,
    format_span,
    format_value,
    parse_amount,
    parse_duration,
    parse_power,
)
from powerkit.report.utility_section import utility_section
from powerkit.trace.arguments import parse_member
from powerkit.trace.options import ImportOptions
from powerkit.utility.document import UtilityDocument, site_unit, utility_tables
from powerkit.utility.job import UtilityOptions, run_utility, utility_steps

__all__ = ["event", "grid", "utility"]


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


@cli.handle_errors
@reading.reader_options("gpu_name")
def event(
    members: Annotated[list[str], typer.Argument(help="Traces as path or path:count.")],
    at: Annotated[
        str, typer.Option(help="The event's start: ISO, epoch s, +DUR after the traces'.")
    ],
    duration: Annotated[str, typer.Option(help="How long the event lasted, e.g. 3h.")],
    commit: Annotated[
        str, typer.Option(help="The reduction promised: 25% (of the baseline), 2MW.")
    ],
    respond_within: Annotated[str, typer.Option(help="The time allowed to reach it.")] = "30s",
    interval: Annotated[str, typer.Option(help="The metering interval, each judged.")] = "1m",
    baseline: Annotated[str, typer.Option(help="before:DUR, days:N, high:AofB or csv:FILE.")] = (
        "before:30m"
    ),
    notice: Annotated[str, typer.Option(help="before: ends this long before the start.")] = "0s",
    rebound: Annotated[str, typer.Option(help="How long after the end to look.")] = "15m",
    grid_step: Annotated[str | None, typer.Option("--grid", help="Cell (default: 1s).")] = None,
    site_mw: Annotated[float | None, typer.Option(help="Scale the fleet to this many MW.")] = None,
    nameplate: Annotated[str | None, typer.Option(help="Per-GPU nameplate (for --site-mw).")] = (
        None
    ),
    html: opt.Html = None,
    plotly_js: opt.PlotlyJs = "inline",
    force: opt.Force = False,
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Did the fleet deliver a curtailment: reduction per metering interval against a
    baseline, response time, shortfall, performance factor, rebound; a certificate."""
    from powerkit.report.event_section import event_section
    from powerkit.trace.timeparse import parse_time_bound
    from powerkit.utility.event import EventOptions, event_report, parse_baseline

    method, arg = parse_baseline(baseline)  # (a bad one fails before any reading)
    parsed = [parse_member(m) for m in members]
    files = [p for p, _, _ in parsed] + ([Path(arg)] if method == "csv" else [])
    page = cli.Page(html, plotly_js, force, files)
    traces = cli.load_members(
        parsed, reader, parse_power(nameplate).resolve(None) if nameplate else None
    )
    first_us, last_us = traces[0][0].span_us()
    opts = EventOptions(
        parse_time_bound(at, first_us, last_us, "--at") / 1e6,
        parse_duration(duration),
        parse_power(commit),
        parse_duration(respond_within, allow_zero=True),
        parse_duration(interval),
        baseline,
        parse_duration(notice, allow_zero=True),
        parse_duration(rebound, allow_zero=True),
        opt.grid_option(grid_step) or 1.0,
        site_mw,
    )
    doc = event_report(traces, [str(p) for p, _, _ in parsed], opts)
    page.write("powerkit utility event", lambda: [event_section(doc)])
    cli.finish(doc, json_out, _render_event, warnings=doc.notes, written=[html])


def _render_event(doc: Any) -> None:
    from powerkit.utility.certificate import event_columns, power_3g

    out = cli.out_console()
    cli.print_table(event_columns(doc), doc.intervals, out)
    for c in doc.criteria:
        out.print(f"{'pass' if c.passed else 'FAIL'}  {c.name}: {c.detail}")
    out.print(
        f"baseline {power_3g(doc.baseline_w)}, committed {power_3g(doc.committed_w)}; "
        f"performance factor {format_value(doc.performance_factor, '.3f')}, shortfall "
        f"{format_energy(doc.shortfall_j)}, rebound {format_value(doc.rebound_w, ',.0f')} W: "
        + ("PASSED" if doc.passed else "NOT PASSED")
    )
