"""``powerkit jobs``: whose energy it was, per job, user, account or partition."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli import reading
from powerkit.core.units import PER_KWH, format_energy, parse_amount, parse_power
from powerkit.jobs.job import check_jobs, run_jobs, write_jobs_csv
from powerkit.jobs.report import BY, GROUP_COLUMNS, JOB_COLUMNS, JobsOptions, JobsReport
from powerkit.trace.options import ImportOptions

__all__ = ["jobs"]


@cli.handle_errors
@reading.reader_options(*reading.SOURCE)
def jobs(
    trace: Annotated[
        Path, typer.Argument(help="The fleet's trace: file, dataset, prometheus+http://…")
    ],
    sacct: Annotated[
        Path | None,
        typer.Option(help="sacct -P output (docs/jobs.md: the --format it needs)."),
    ] = None,
    scontrol: Annotated[
        Path | None,
        typer.Option(
            help="`scontrol show job -d` output: the GPU indices of jobs on shared nodes."
        ),
    ] = None,
    allocations: Annotated[
        Path | None, typer.Option(help="Instead: a job,host,gpus,start,end[,user,account] CSV.")
    ] = None,
    by_label: Annotated[
        str | None, typer.Option(help="Instead: the jobs are a label's values (pod).")
    ] = None,
    by: Annotated[str, typer.Option(help=f"Sum by {', '.join(BY)}.")] = "job",
    top: Annotated[
        int, typer.Option(min=1, help="Jobs (or groups) shown; --json and --csv have all.")
    ] = 20,
    idle_below: Annotated[
        str, typer.Option(help="Power under which a GPU is idle (W or % of TDP).")
    ] = "25%",
    price: Annotated[str | None, typer.Option(help="Energy price per kWh, e.g. 0.08/kWh.")] = None,
    region: Annotated[
        str | None, typer.Option(help="Grid intensity: a bundled region (as carbon).")
    ] = None,
    intensity: Annotated[
        str | None, typer.Option(help="Grid intensity: a constant, e.g. 250g/kWh.")
    ] = None,
    intensity_csv: Annotated[
        Path | None, typer.Option(help="Grid intensity: hourly timestamp,g/kWh rows.")
    ] = None,
    csv_out: Annotated[
        Path | None, typer.Option("--csv", help="Write every job as CSV (chargeback).")
    ] = None,
    fill: opt.Fill = "none",
    engine: opt.Engine = "local",
    address: opt.Address = None,
    force: opt.Force = False,
    json_out: opt.Json = False,
    reader: ImportOptions = reading.READER,
) -> None:
    """Energy, cost and carbon per job from a fleet trace and the scheduler's records."""
    records = [sacct, scontrol, allocations, intensity_csv]
    cli.refuse_overwrite(csv_out, force, [trace, *records], what="--csv")
    opts = JobsOptions(
        sacct,
        scontrol,
        allocations,
        by_label,
        reader.tz,
        parse_power(idle_below),
        None if price is None else parse_amount(price, "--price", PER_KWH),
        region,
        intensity,
        intensity_csv,
        by,
        opt.fill_option(fill),
        cli.make_engine(engine, address),
    )
    check_jobs(opts)  # (before the trace is read)
    report = run_jobs(cli.load_trace(trace, reader), opts)
    if csv_out is not None:
        write_jobs_csv(report, csv_out)
    cli.finish(
        report, json_out, lambda r: _render(r, top), warnings=report.notes, written=[csv_out]
    )


def _render(r: JobsReport, top: int) -> None:
    out = cli.out_console()
    if r.groups is not None:
        cli.print_table(GROUP_COLUMNS, r.groups[:top], out)
    else:
        cli.print_table(JOB_COLUMNS, r.jobs[:top], out)
    shown = len(r.groups if r.groups is not None else r.jobs)
    more = f" ({shown - top} more in --json or --csv)" if shown > top else ""
    out.print(
        f"fleet {format_energy(r.total_j)}: jobs {format_energy(r.attributed_j)}, no job "
        f"{format_energy(r.unattributed_j)}{more}"
    )
