"""``powerkit utility`` as a job: :class:`UtilityOptions` and :func:`run_utility`, the fleet's
swings as the utility sees them, judged against a spec, with each remedy's cost."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from powerkit.cells.fill import NO_FILL, FillPolicy
from powerkit.cells.grid import default_grid_s
from powerkit.core.choices import Compose, only
from powerkit.core.errors import option
from powerkit.core.units import check_site_mw
from powerkit.trace.model import Trace
from powerkit.utility.analysis import utility_report
from powerkit.utility.document import UtilityDocument, utility_document
from powerkit.utility.mitigate import Mitigation
from powerkit.utility.spec import Spec

__all__ = ["UtilityOptions", "run_utility", "utility_steps"]


@dataclass(frozen=True)
class UtilityOptions:
    """What ``powerkit utility`` is given.

    Attributes:
        compose: aligned (one synchronous job) or random starts (``--compose``).
        site_mw: scale the fleet to a site of this many MW (``--site-mw``; None: as measured).
        spec: the utility's limits to judge against (``--spec``; None: not judged).
        mitigations: remedies to try (``--mitigate floor:60%,ramp:2%/s``; empty: none).
        price_usd_per_kwh: energy price, for the remedies' cost (``--price``).
        grid_s: cell length in s (``--grid``; None: the traces' own interval, rounded up).
        seed: seed of random starts (``--seed``; default 0).
        fill: gap fill on the grid (``--fill``; default none).
    """

    compose: Compose = Compose.aligned
    site_mw: float | None = None
    spec: Spec | None = None
    mitigations: list[Mitigation] = field(default_factory=list)
    price_usd_per_kwh: float | None = None
    grid_s: float | None = None
    seed: int = 0
    fill: FillPolicy = NO_FILL


def utility_steps(opts: UtilityOptions) -> int:
    """How many steps :func:`run_utility` reports to ``on_progress``."""
    n = len(opts.mitigations)
    return 2 + n * (n + 1) // 2


def run_utility(
    traces: list[tuple[Trace, int]],
    opts: UtilityOptions = UtilityOptions(),
    *,
    on_progress: Callable[[str], None] | None = None,
) -> UtilityDocument:
    """What ``powerkit utility`` reports of the fleet of ``traces`` (each with its count);
    ``on_progress(note)`` hears each of :func:`utility_steps` steps."""
    only(opts.compose, (Compose.aligned, Compose.random), option("compose"), "utility")
    if opts.site_mw is not None:
        check_site_mw(opts.site_mw)
    # the traces' own interval (the coarsest, rounded up): a fast recording keeps its spectrum
    grid_s = opts.grid_s or default_grid_s(*(t for t, _ in traces), floor_s=0.0)
    report = utility_report(
        traces,
        grid_s=grid_s,
        compose=opts.compose.value,
        seed=opts.seed,
        site_mw=opts.site_mw,
        spec=opts.spec,
        mitigations=opts.mitigations or None,
        fill=opts.fill,
        price_usd_per_kwh=opts.price_usd_per_kwh,
        on_step=on_progress,
    )
    return utility_document(report)
