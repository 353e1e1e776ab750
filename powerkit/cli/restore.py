"""``powerkit restore``: put back the GPU limits and clocks a killed powerkit run left."""

from __future__ import annotations

from typing import Annotated

import typer

from powerkit.actuation.restore import RestoreOptions, RestoreResult, run_restore
from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.core.errors import BadInputError

__all__ = ["restore"]


@cli.handle_errors
def restore(
    all_entries: Annotated[
        bool,
        typer.Option("--all", help="Also restore GPUs whose run still seems alive (a reused pid)."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option(help="Say what would be restored; change nothing.")
    ] = False,
    json_out: opt.Json = False,
) -> None:
    """Restore the power limits (and reset the locked clocks) in this host's cap journal whose run
    is gone."""
    result = run_restore(RestoreOptions(all_entries, dry_run))
    cli.finish(result, json_out, render)
    if result.invalid:  # (the valid entries restored above; these are bad input)
        raise BadInputError(f"{result.journal}: not applied, left: {'; '.join(result.invalid)}")


def render(result: RestoreResult) -> None:
    """A line per GPU restored (or that would be) and per GPU kept."""
    if not (result.restored or result.kept or result.invalid):
        cli.err.print(f"nothing to restore ({result.journal} has no entries)")
        return
    out = cli.out_console()
    for r in result.restored:
        what = {
            "locked_clocks": "reset its locked clocks",
            "power_smoothing": "put back its power smoothing",
        }.get(r.kind, f"restore {r.original_w:g} W")
        what = f"would {what}" if result.dry_run else what.replace("restore ", "restored ")
        out.print(
            f"GPU {r.gpu} ({r.uuid or 'no uuid'}): {what} (changed by pid {r.pid}, was {r.found_w})"
        )
    for r in result.kept:
        out.print(f"GPU {r.gpu}: kept ({r.why})")
