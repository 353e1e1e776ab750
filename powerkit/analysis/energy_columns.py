"""The tables of ``powerkit energy``: one row per interval, one per GPU."""

from __future__ import annotations

from powerkit.analysis.energy import IntervalEnergy, SeriesTotal
from powerkit.core.tables import Column

__all__ = ["GPU_COLUMNS", "interval_columns"]


def interval_columns(kind: str, throttled: bool = False) -> tuple[Column, ...]:
    """The per-interval table of ``powerkit energy`` (``kind``: steps or phases): time,
    energy and coverage; waiting and J/token per step, the workload's counters per phase; with
    ``throttled``, the share of time the power cap throttled the GPUs."""
    phases = kind == "phases"
    capped = (Column("capped", "cap_throttled_share", ".1%"),) if throttled else ()
    return (
        Column("phase" if phases else "step", lambda iv: str(iv.name), key=True),
        Column("start (UTC)", lambda iv: iv.start[:23], text=True),
        Column("s", "duration_s", ",.2f"),
        Column("trace kJ", "energy_j", ",.3f", scale=1e-3),
        Column("truth within", _within, text=True),
        Column("cover", "coverage", ".1%"),
        *(
            (
                Column("counter kJ", "counter_energy_j", ",.3f", scale=1e-3),
                Column("diff", "difference_pct", "+.1f", "%"),
                Column("in", lambda iv: _yes_no(iv.counter_inside), text=True),
            )
            if phases
            else (
                Column("waiting", "waiting_share", ".1%"),
                Column("J/token", "j_per_token", ",.3f"),
            )
        ),
        *capped,
    )


def _within(iv: IntervalEnergy) -> str | None:
    """How far below and above the energy the truth can lie, in per cent (docs/trust.md)."""
    if iv.energy_low_j is None or iv.energy_high_j is None or iv.energy_j <= 0:
        return None
    low, high = iv.energy_low_j / iv.energy_j - 1, iv.energy_high_j / iv.energy_j - 1
    return f"{100 * low:+.1f}/{100 * high:+.1f}%"


def _yes_no(value: bool | None) -> str | None:
    return None if value is None else "yes" if value else "no"


def _waiting(g: SeriesTotal) -> float | None:
    return None if g.waiting_s is None or g.busy_s <= 0 else g.waiting_s / g.busy_s


#: the per-GPU table of ``powerkit energy``
GPU_COLUMNS = (
    Column("GPU", lambda g: f"{g.host}:{g.gpu}", key=True),
    Column("kJ", "energy_j", ",.3f", scale=1e-3),
    Column("integrated s", "busy_s", ",.1f"),
    Column("waiting", _waiting, ".1%"),
    Column("source", "source", text=True),
)
