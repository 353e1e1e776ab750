"""``powerkit energy``: energy per training step or per workload phase, per GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from powerkit.analysis.energy import EnergyReport, interval_energy, trace_steps
from powerkit.cli.common import (
    AddressOpt,
    EngineOpt,
    FillOpt,
    GpusPerFrameOpt,
    HostOpt,
    JsonOpt,
    NameplateOpt,
    ReaderArgs,
    emit_json,
    fill_option,
    handle_errors,
    import_options,
    load_trace,
    make_engine,
    out_console,
    reader_options,
    warn,
)
from powerkit.errors import BadInputError
from powerkit.trace.intervals import read_phases, read_steps
from powerkit.units import format_value, parse_percent, parse_power

__all__ = ["energy"]


def render(report: EnergyReport) -> None:
    """Print one row per interval and the per-GPU totals."""
    out = out_console()
    phases = report.kind == "phases"
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    headers = ["phase" if phases else "step", "start (UTC)", "s", "trace kJ", "cover"]
    headers += ["counter kJ", "diff"] if phases else ["waiting", "J/token"]
    for h in headers:
        table.add_column(h, justify="left" if h in ("phase", "step", "start (UTC)") else "right")
    for iv in report.intervals:
        row = [str(iv.name), iv.start[:23], f"{iv.duration_s:,.2f}", f"{iv.energy_j / 1e3:,.3f}",
               format_value(iv.coverage, ".1%")]  # fmt: skip
        if phases:
            row += [
                format_value(None if iv.counter_energy_j is None else iv.counter_energy_j / 1e3,
                             ",.3f"),
                "-" if iv.difference_pct is None else f"{iv.difference_pct:+.1f}%",
            ]  # fmt: skip
        else:
            row += [format_value(iv.waiting_share, ".1%"), format_value(iv.j_per_token, ",.3f")]
        table.add_row(*row)
    out.print(table)
    gpus = Table("GPU", "kJ", "integrated s", "waiting", "source", box=box.SIMPLE_HEAD)
    for g in report.gpus:
        waiting = None if g.waiting_s is None or g.busy_s <= 0 else g.waiting_s / g.busy_s
        gpus.add_row(f"{g.host}:{g.gpu}", f"{g.energy_j / 1e3:,.3f}", f"{g.busy_s:,.1f}",
                     format_value(waiting, ".1%"), g.source)  # fmt: skip
    out.print(gpus)
    if phases:
        diffs = [iv.difference_pct for iv in report.intervals if iv.difference_pct is not None]
        if diffs:
            out.print(
                f"trace minus counter over {len(diffs)} phase(s): median "
                f"{sorted(diffs)[len(diffs) // 2]:+.1f}%, range {min(diffs):+.1f}% to "
                f"{max(diffs):+.1f}% (power {report.power_semantics}, sampled every "
                f"{format_value(report.interval_s, '.3f')} s; see docs/energy.md)"
            )


@handle_errors
@reader_options
def energy(
    trace: Annotated[Path, typer.Argument(help="Trace: Parquet, CSV, nvidia-smi, dmon, DCGM.")],
    steps: Annotated[
        Path | None,
        typer.Option(
            "--steps",
            help="Step starts: annotation JSON lines, a step,start CSV, or `trace` (the "
            "trace's own step column).",
        ),
    ] = None,
    phases: Annotated[
        Path | None,
        typer.Option("--phases", help="A workload's phase file with its energy counters."),
    ] = None,
    tokens: Annotated[
        bool, typer.Option("--tokens", help="Require tokens per step (J/token for each).")
    ] = False,
    wait_below: Annotated[
        str,
        typer.Option("--wait-below", help="A GPU below this power is waiting (W or % of TDP)."),
    ] = "40%",
    wait_util: Annotated[
        str | None,
        typer.Option(
            "--wait-util",
            help="Instead, a GPU below this utilization is waiting, e.g. 10% (needs gpu_util).",
        ),
    ] = None,
    fill: FillOpt = "none",
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    json_out: JsonOpt = False,
    host: HostOpt = None,
    gpus_per_frame: GpusPerFrameOpt = None,
    nameplate: NameplateOpt = None,
    reader: ReaderArgs | None = None,
) -> None:
    """Energy per step (time, energy per GPU, waiting share, J/token) or per phase (the trace's
    energy next to the workload's own counters)."""
    if (steps is None) == (phases is None):
        raise BadInputError("give one of --steps or --phases")
    threshold = parse_power(wait_below)
    util = (
        None if wait_util is None else 100 * parse_percent(wait_util, "--wait-util", positive=True)
    )
    opts = import_options(
        host=host, gpus_per_frame=gpus_per_frame, nameplate=nameplate, **(reader or {})
    )
    loaded = load_trace(trace, opts)
    if steps is not None:
        from_trace = str(steps) == "trace"
        intervals = trace_steps(loaded) if from_trace else read_steps(steps, opts.tz)
        if tokens and any(iv.tokens is None for iv in intervals):
            raise BadInputError(f"{steps}: --tokens given, but not every step has tokens")
    else:
        assert phases is not None
        intervals = read_phases(phases)
    report = interval_energy(
        loaded,
        intervals,
        kind="steps" if steps is not None else "phases",
        fill=fill_option(fill),
        wait_below=threshold if steps is not None else None,  # phases show no waiting share
        wait_util=util if steps is not None else None,
        engine=make_engine(engine, address),
    )
    for note in report.notes:
        warn(note)
    if json_out:
        label = "phase" if report.kind == "phases" else "step"
        rows: list[dict[str, object]] = []
        for iv in report.intervals:
            row: dict[str, object] = {label: iv.name}
            row.update((k, v) for k, v in vars(iv).items() if k != "name")
            if report.kind == "phases":
                row["trace_energy_j"] = iv.energy_j
            rows.append(row)
        doc = {
            "by": report.kind,
            report.kind: rows,
            "gpus": report.gpus,
            "fill": report.fill,
            "power_semantics": report.power_semantics,
            "interval_s": report.interval_s,
            "notes": report.notes,
        }
        emit_json(doc, "energy")
    else:
        render(report)
