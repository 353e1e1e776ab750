"""How fast power follows a cap (``powerkit cap latency``): from a recorded cap step and its
step plan, the time from each cap change to 90 % of the power's move.

Definitions (docs/cap.md): for each change in the plan's ``applied`` list (the times the cap
was actually set, in seconds after the trace's first sample; the first entry, the initial
cap, is not a change) the level **before** is the median power over the second before it,
the level **after** the median over the window from 1 s after it to the next change (at most
5 s); the change **settles** at the first sample at or after it that has moved 90 % of the
way from before to after. Medians, so that a workload's own brief dips do not move a level.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import load_json
from powerkit.core.tables import Column
from powerkit.trace.model import Trace

__all__ = ["STEP_COLUMNS", "LatencyReport", "StepResponse", "step_latency"]

SETTLED = 0.9  # the share of the move that counts as settled
BEFORE_S, AFTER_FROM_S, AFTER_MAX_S = 1.0, 1.0, 5.0


@dataclass(frozen=True)
class StepResponse:
    """One cap change and how the power followed it."""

    label: str
    t_s: float  # when the cap was set, after the trace's first sample
    cap_from_w: float
    cap_to_w: float
    before_w: float
    after_w: float
    settle_s: float | None  # None: the power never moved 90 % of the way


@dataclass(frozen=True)
class LatencyReport(Document):
    """What ``powerkit cap latency`` reports: each cap change and the settle times' median
    and 95th percentile (what ``cap --latency`` should be given)."""

    COMMAND: ClassVar[str] = "cap latency"

    trace: str
    gpu: int
    steps: list[StepResponse]
    median_s: float | None
    p95_s: float | None

    def summary(self) -> str:
        """The settle times in a line (what ``cap --latency`` should be given)."""
        if self.median_s is None or self.p95_s is None:
            return "no cap change settled: the power never moved 90 % of the way"
        return (
            f"90 % settled: median {1e3 * self.median_s:,.1f} ms, p95 {1e3 * self.p95_s:,.1f} "
            f"ms over {len(self.steps)} change(s)"
        )


#: the table of ``cap latency``, a row per cap change
STEP_COLUMNS = (
    Column("change", "label", key=True),
    Column("at s", "t_s", ".3f"),
    Column("cap W", lambda s: f"{s.cap_from_w:g} -> {s.cap_to_w:g}"),
    Column("before W", "before_w", ".1f"),
    Column("after W", "after_w", ".1f"),
    Column("90% in ms", "settle_s", ",.1f", scale=1e3),
)


def read_plan(path: Path) -> list[tuple[float, float, str]]:
    """(time, cap, label) of each cap actually set, from a step plan's ``applied`` list."""
    doc = load_json(path, hint='a step plan: {"applied": [{"t_actual", "pcap_w"}, ...]}')
    applied = doc.get("applied") if isinstance(doc, dict) else None
    if not isinstance(applied, list) or len(applied) < 2:
        raise BadInputError(f'{path}: expected "applied": a list of at least two cap settings')
    out = []
    for k, a in enumerate(applied):
        t = a.get("t_actual", a.get("t")) if isinstance(a, dict) else None
        cap = a.get("pcap_w") if isinstance(a, dict) else None
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) and np.isfinite(x) and x >= 0
            for x in (t, cap)
        ):
            raise BadInputError(f"{path}: applied[{k}] needs a time and a cap (t_actual, pcap_w)")
        out.append((float(t), float(cap), str(a.get("label", f"change {k}"))))  # type: ignore[arg-type]
    if any(b[0] <= a[0] for a, b in itertools.pairwise(out)):
        raise BadInputError(f"{path}: the applied caps are not in time order")
    return out


def step_latency(trace: Trace, plan: Path, gpu: int | None = None) -> LatencyReport:
    """The settle time of every cap change of ``plan`` on one GPU of ``trace`` (module
    docstring); ``gpu`` None: the trace's only GPU."""
    changes = read_plan(plan)
    table = trace.table()
    gpus = sorted(set(table.column("gpu").to_pylist()))
    if gpu is None and len(gpus) != 1:
        raise BadInputError(f"{trace.origin}: {len(gpus)} GPUs; say which with {option('gpu')}")
    chosen = gpus[0] if gpu is None else gpu
    if chosen not in gpus:
        raise BadInputError(f"{trace.origin}: no GPU {chosen} (it has {gpus})")
    mask = np.asarray(table.column("gpu").to_numpy(zero_copy_only=False)) == chosen
    ts = table.column("ts").cast("int64").to_numpy(zero_copy_only=False)[mask]
    order = np.argsort(ts, kind="stable")
    t = (ts[order] - ts[order][0]) / 1e6
    p = table.column("power_w").to_numpy(zero_copy_only=False)[mask][order].astype(float)
    steps = []
    for k in range(1, len(changes)):
        at, cap, label = changes[k]
        end = changes[k + 1][0] if k + 1 < len(changes) else t[-1]
        before = p[(t >= at - BEFORE_S) & (t < at)]
        after = p[(t >= at + AFTER_FROM_S) & (t < min(end, at + AFTER_FROM_S + AFTER_MAX_S))]
        if before.size == 0 or after.size == 0:
            raise BadInputError(
                f"{trace.origin}: no samples around the change at {at:g} s ({label}); do the "
                "plan's times count from the trace's start?"
            )
        lo, hi = float(np.median(before)), float(np.median(after))
        mark = lo + SETTLED * (hi - lo)
        window = (t >= at) & (t < end)
        moved = (p <= mark) if hi < lo else (p >= mark)
        hit = np.flatnonzero(window & moved)
        settle = float(t[hit[0]] - at) if hit.size else None
        steps.append(StepResponse(label, at, changes[k - 1][1], cap, lo, hi, settle))
    settled = np.array([s.settle_s for s in steps if s.settle_s is not None])
    return LatencyReport(
        trace=trace.origin,
        gpu=int(chosen),
        steps=steps,
        median_s=float(np.median(settled)) if settled.size else None,
        p95_s=float(np.quantile(settled, 0.95)) if settled.size else None,
    )
