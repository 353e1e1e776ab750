"""Where a ``powerkit top`` session reads its samples: the GPUs here (NVML, amd-smi, the
simulator, through the recorder's sources) or a Prometheus server, polled at its scrape
interval."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from powerkit.cells.grid import clean_grid_s
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import PowerSpec, format_duration
from powerkit.telemetry.schedule import Schedule
from powerkit.top.poll import PollCheck
from powerkit.top.session import TopSession, TopState
from powerkit.trace.schema import power_ceiling_w

__all__ = ["MAX_WINDOW_CELLS", "TopOptions", "open_session", "prometheus_session"]

#: the most cells one trailing window of top may span (a day of 0.5 s cells, and more)
MAX_WINDOW_CELLS = 200_000


def prometheus_session(
    url: str,
    windows_s: list[float],
    budget: PowerSpec,
    interval_s: float,
    duration_s: float | None = None,
    nameplate_w: float | None = None,
    headers: dict[str, str] | None = None,
) -> TopSession:
    """A session over a Prometheus server's GPUs (``prometheus+http://HOST:PORT[?metric=..&
    match=..]``): an instant query per tick, each series' newest sample taken once at its own
    time (a scrape repeats until the next), each host's sum where all its GPUs' samples share
    a scrape time. Hosts scrape out of step, so there is no fleet sum to judge: the fleet
    row shows the power now only."""
    from powerkit.trace.readers.promclient import PromClient
    from powerkit.trace.readers.prometheus import (
        first_power_metric,
        query_from_arg,
        recent_scrape_interval,
    )
    from powerkit.trace.readers.prominstant import instant_samples

    base, q = query_from_arg(url, None, None)
    client = PromClient(base, headers or {}, timeout_s=max(2.0, 4 * interval_s), retries=1)
    metric, found = first_power_metric(
        client, q, lambda name: instant_samples(client, name, q.match), "now"
    )
    # Cells finer than the server's scrapes are left empty in turn (no window is ever 90 %
    # complete, so none is judged): the grid follows the scrapes.
    notes = []
    scrape = recent_scrape_interval(client, q, metric)
    if scrape is not None and interval_s < scrape / 1.05:
        notes.append(
            f"polling every {format_duration(clean_grid_s(scrape))}, the server's scrape "
            f"interval of {metric} (about {format_duration(scrape)}): "
            f"{option('interval')} {format_duration(interval_s)} would leave cells empty"
        )
        interval_s = clean_grid_s(scrape)
    keys = sorted({key for key, _, _ in found})
    state = TopState(keys, [nameplate_w] * len(keys), windows_s, budget, interval_s)
    state.fleet_judged = False
    check = PollCheck(keys, power_ceiling_w(None, nameplate_w), interval_s)
    failures: list[str] = []

    def sample(session: TopSession) -> None:
        for _ in Schedule(interval_s, duration_s, session.stop):
            try:
                got = instant_samples(client, metric, q.match)
            except BadInputError as exc:  # a missed poll is a missed tick: said, not hidden
                failures.append(str(exc))
            else:
                state.update_scrapes(check.fresh(got))
            failed = (
                [f"{len(failures)} poll(s) failed; the last: {failures[-1]}"] if failures else []
            )
            session.warnings = [*notes, *failed, *check.notes()]

    session = TopSession(state, f"prometheus {client.shown}", interval_s, sample, duration_s)
    session.warnings = list(notes)
    return session


@dataclass(frozen=True)
class TopOptions:
    """What ``powerkit top`` is given, its units parsed.

    Attributes:
        backend: ``nvml``, ``amdsmi``, or ``sim`` (the simulated job of ``preset``, in real
            time); None: the GPUs this machine has; ignored with ``source_url``.
        source_url: a Prometheus server (``prometheus+http://HOST:PORT``; None: GPUs here).
        windows_s: the trailing windows, s. budget: per GPU, W or a share of nameplate.
        interval_s: the sampling interval, s (at least 0.01).
        duration_s: stop after this long, s (None: until stopped).
        record_to: also write the samples here, as ``powerkit record`` does (GPUs here only).
        preset, seed: the simulated job. gpus: GPU indices (None: all).
        nameplate_w: per-GPU nameplate for a Prometheus source, W. force: overwrite
            ``record_to``.
    """

    backend: str | None = None
    source_url: str | None = None
    windows_s: list[float] = field(default_factory=lambda: [1.0, 30.0, 300.0])
    budget: PowerSpec = field(default_factory=lambda: PowerSpec(fraction=1.0, text="100%"))
    interval_s: float = 0.5
    duration_s: float | None = None
    record_to: Path | None = None
    preset: str = "a100-7b"
    seed: int = 0
    gpus: list[int] | None = None
    nameplate_w: float | None = None
    force: bool = False


def open_session(opts: TopOptions) -> TopSession:
    """The session ``powerkit top`` runs: the GPUs of ``opts.backend`` or the Prometheus
    server ``opts.source_url``; with ``opts.record_to``, the samples are written there as
    ``powerkit record`` writes them."""
    from powerkit.core.choices import Backend
    from powerkit.telemetry.job import check_interval, refuse_unfinished

    check_interval(opts.interval_s)
    for w in opts.windows_s:  # (each series keeps a window's cells: bounded memory)
        if not w / opts.interval_s <= MAX_WINDOW_CELLS:
            raise BadInputError(
                f"{option('windows')} {format_duration(w)}: at most {MAX_WINDOW_CELLS:,} cells "
                f"of the {format_duration(opts.interval_s)} grid "
                f"({format_duration(MAX_WINDOW_CELLS * opts.interval_s)}); top keeps a window's "
                "cells for every series"
            )
    if opts.duration_s is not None and not opts.duration_s > 0:
        raise BadInputError(f"{option('duration')} must be positive")
    if opts.source_url is not None:
        if opts.record_to is not None:
            raise BadInputError(
                f"{option('record')} applies to GPUs read here; the Prometheus server keeps its "
                "history "
                "(powerkit import prometheus+http://... writes it as a trace)"
            )
        from powerkit.trace.readers.promclient import credentials

        return prometheus_session(
            opts.source_url,
            opts.windows_s,
            opts.budget,
            opts.interval_s,
            opts.duration_s,
            opts.nameplate_w,
            credentials(),
        )
    from powerkit.telemetry.sources import make_source

    if opts.record_to is not None:
        from powerkit.core.outputs import check_output

        refuse_unfinished(opts.record_to, opts.record_to)
        check_output(opts.record_to, force=opts.force, what=option("record"))
    source = make_source(
        Backend(opts.backend) if opts.backend else None,
        preset=opts.preset,
        seed=opts.seed,
        group_size=None,
        concurrency=None,
        power_cap=None,
        realtime=True,
        gpus=opts.gpus,
        host=None,
    )
    try:
        return TopSession.of_source(
            source, opts.windows_s, opts.budget, opts.interval_s, opts.duration_s, opts.record_to
        )
    except BaseException:
        source.close()
        raise
