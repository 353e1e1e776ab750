"""Power smoothing on NVIDIA Blackwell GPUs (``powerkit smoothing``): read its state, set the
ramp rates and floor, journaled and put back like power caps.

Power smoothing holds a GPU's power from falling faster than the ramp-down rate and rising
faster than the ramp-up rate, and never below the floor (a share of the board's TGP): the
hardware knob behind the utility view's ramp-rate and floor remedies (docs/utility.md). It needs
a Blackwell GPU and driver 570 or later; elsewhere ``set`` is refused with one line.

A set writes the GPU's original setting into the cap journal first (kind ``power_smoothing``,
powerkit.actuation.journal), so that ``powerkit restore`` puts it back, and a second ``set`` keeps
the first original. The setting stays after ``set`` exits: it is the operator's to keep, or to
undo with ``powerkit restore``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

from powerkit.actuation import journal
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.telemetry.nvml import NvmlGpu, Smoothing, nvml_session, open_gpus

__all__ = ["SmoothingOptions", "SmoothingReport", "run_smoothing", "smoothing_state"]


@dataclass(frozen=True)
class SmoothingReport(Document):
    """Each GPU's power-smoothing state (``show``), or what ``set`` changed it from and to."""

    COMMAND: ClassVar[str] = "smoothing"

    gpus: list[dict[str, Any]] = field(default_factory=list)
    changed: bool = False
    #: what else a killed run left changed on these GPUs (``powerkit restore`` puts it back)
    warnings: list[str] = field(default_factory=list)


def _row(gpu: NvmlGpu, s: Smoothing | None) -> dict[str, Any]:
    row: dict[str, Any] = {"gpu": gpu.index, "name": gpu.name(), "uuid": gpu.uuid()}
    row["smoothing"] = None if s is None else asdict(s)
    row["power_profiles"] = gpu.power_profiles()
    return row


def smoothing_state(gpus: list[int] | None = None) -> SmoothingReport:
    """Every chosen GPU's power-smoothing state and enforced workload power profiles (None
    where the driver or GPU has none)."""
    with nvml_session():
        return SmoothingReport([_row(g, g.smoothing()) for g in open_gpus(gpus)])


@dataclass(frozen=True)
class SmoothingOptions:
    """What ``powerkit smoothing set`` is given.

    Attributes:
        gpus: GPU indices (None: all).
        ramp_up_w_per_s, ramp_down_w_per_s: the ramp rates, W/s (None: kept).
        floor_pct: the power floor, % of the board's TGP (None: kept).
        enabled: switch smoothing on (False: off).
    """

    gpus: list[int] | None = None
    ramp_up_w_per_s: float | None = None
    ramp_down_w_per_s: float | None = None
    floor_pct: float | None = None
    enabled: bool = True


def run_smoothing(opts: SmoothingOptions) -> SmoothingReport:
    """Set power smoothing on the chosen GPUs (the active preset profile's ramp rates and floor,
    those not given kept), each GPU's original journaled first; refused with one line, nothing
    changed, where any GPU lacks smoothing."""
    gpus, enabled, floor_pct = opts.gpus, opts.enabled, opts.floor_pct
    ramp_up_w_per_s, ramp_down_w_per_s = opts.ramp_up_w_per_s, opts.ramp_down_w_per_s
    for name, value, high in (
        (option("ramp-up"), ramp_up_w_per_s, math.inf),
        (option("ramp-down"), ramp_down_w_per_s, math.inf),
        (option("floor"), floor_pct, 100.0),
    ):
        if value is not None and not (math.isfinite(value) and 0 <= value <= high):
            limit = "from 0 to 100 (% of TGP)" if high == 100 else "a finite rate from 0 (W/s)"
            raise BadInputError(f"{name} {value:g}: {limit}")
    with nvml_session():
        chosen = open_gpus(gpus)
        before = [(g, g.smoothing()) for g in chosen]
        lacking = [g for g, s in before if s is None]
        if lacking:
            g = lacking[0]
            raise BadInputError(
                f"GPU {g.index} ({g.name()}) has no power smoothing: it needs a Blackwell GPU and "
                "driver 570 or later; nothing was changed"
            )
        originals = {g.index: s for g, s in before if s is not None}
        journal.claim(
            [(g.index, g.uuid()) for g in chosen],
            lambda index: 0.0,
            journal.SMOOTHING,
            settings=lambda index: asdict(originals[index]),
        )
        rows = []
        for g, s in before:
            assert s is not None
            target = replace(
                s,
                enabled=enabled,
                ramp_up_w_per_s=s.ramp_up_w_per_s if ramp_up_w_per_s is None else ramp_up_w_per_s,
                ramp_down_w_per_s=s.ramp_down_w_per_s
                if ramp_down_w_per_s is None
                else ramp_down_w_per_s,
                floor_pct=s.floor_pct if floor_pct is None else floor_pct,
            )
            g.set_smoothing(target)
            rows.append({**_row(g, g.smoothing()), "was": asdict(s)})
        ids = [(g.index, g.uuid()) for g in chosen]
        left = [
            f"GPU {e.gpu}: its {journal.CHANGED[e.kind]} was left changed by pid {e.pid} "
            f"({e.command or 'a powerkit run'}), which ended without putting it back; "
            "`powerkit restore` does"
            for e in journal.stale()
            if e.kind != journal.SMOOTHING and any(e.same_gpu(i, u) for i, u in ids)
        ]
    return SmoothingReport(rows, changed=True, warnings=left)
