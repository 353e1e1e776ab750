"""The setting a job should run at, from a sweep (``sweep show --optimal energy|cost[:eta]``).

Over the sweep's settings with a measured throughput (its point table):

- **energy**: the least energy per token, J/token = mean power x GPUs ÷ tokens/s;
- **cost** (Zeus, You, Chung and Chowdhury, NSDI '23): the least η · energy + (1 − η) ·
  MAXPOWER · time per unit of work, here per token: η · J/token + (1 − η) · MAXPOWER ÷
  tokens/s, MAXPOWER the GPUs' nameplate x their count (the price of time in the watts the
  GPUs could draw); η from 0 (time only) to 1 (energy only), 0.5 by default.

A choice is made among the GPU settings (caps, clocks) of one setting of the workload's own
knobs (group size, concurrency), for each such setting run at two or more GPU settings: a
different group size or concurrency is different work, so a sweep that varies only those
has no optimum and is refused.

Each choice is set against the **reference**: the setting with the same other knobs and no
cap (or the highest cap) and no clock lock (or the highest clock): what the job costs as it
would run unchanged. Ties go to the faster setting.
"""

from __future__ import annotations

from powerkit.core.errors import BadInputError, option
from powerkit.core.tables import Column
from powerkit.sweep.authority import Optimal, SettingRow, SweepReport
from powerkit.sweep.plan import GPU_KNOBS, KNOBS

__all__ = ["OPTIMAL_COLUMNS", "optimal_settings", "parse_objectives"]

#: Zeus's default weight of energy against time
DEFAULT_ETA = 0.5


def parse_objectives(text: str) -> list[tuple[str, float | None]]:
    """``energy``, ``cost`` or ``cost:0.3``, comma-separated."""
    out: list[tuple[str, float | None]] = []
    for part in (p.strip() for p in text.split(",")):
        name, sep, value = part.partition(":")
        if name == "energy" and not sep:
            out.append(("energy", None))
        elif name == "cost":
            try:
                eta = float(value) if sep else DEFAULT_ETA
            except ValueError:
                eta = float("nan")
            if not 0 <= eta <= 1:
                raise BadInputError(
                    f"{option('optimal')} {part!r}: η is a number from 0 to 1 (cost:0.5)"
                )
            out.append(("cost", eta))
        else:
            raise BadInputError(f"{option('optimal')} {part!r}: energy, cost or cost:ETA")
    if not out:
        raise BadInputError(f"{option('optimal')}: energy, cost or cost:ETA")
    return out


def _knobs(row: SettingRow) -> dict[str, float | None]:
    return {k: getattr(row, k) for k in KNOBS if getattr(row, k) is not None}


def _reference(rows: list[SettingRow], chosen: SettingRow) -> SettingRow:
    """The same other knobs, no (or the highest) cap and clock."""
    same = [
        r
        for r in rows
        if all(getattr(r, k) == getattr(chosen, k) for k in KNOBS if k not in GPU_KNOBS)
    ]

    def openness(r: SettingRow) -> tuple[float, ...]:
        return tuple(
            float("inf") if getattr(r, k) is None else float(getattr(r, k)) for k in GPU_KNOBS
        )

    return max(same, key=openness)


def optimal_settings(
    report: SweepReport, objectives: list[tuple[str, float | None]]
) -> list[Optimal]:
    """The best setting of ``report`` for each objective (module docstring)."""
    rows = [
        r for r in report.points if r.tokens_per_s and r.j_per_token and r.mean_power_w is not None
    ]
    if not rows:
        raise BadInputError(f"{option('optimal')}: no setting of this sweep measured throughput")
    groups = _by_workload(rows)
    if not groups:
        varied = [k for k in KNOBS if len({getattr(r, k) for r in rows}) > 1]
        raise BadInputError(
            f"{option('optimal')} chooses a power cap or GPU clock for one setting of the job, "
            f"and this sweep varies {' and '.join(varied) or 'nothing'} only: the job's own "
            "knobs differ in more than cost (rollouts, batching, latency), so none of their "
            "settings is an optimum; compare them in the sweep's table"
        )
    out = []
    for objective, eta in objectives:
        weight = 1.0 if objective == "energy" else (DEFAULT_ETA if eta is None else eta)
        if objective == "cost" and report.nameplate_w is None:
            raise BadInputError(
                f"{option('optimal')} cost needs the GPUs' nameplate, which this sweep does not "
                "record"
            )
        max_power = (report.nameplate_w or 0.0) * report.gpus
        for group in groups:
            out.append(_best(group, objective, eta, weight, max_power))
    return out


def _by_workload(rows: list[SettingRow]) -> list[list[SettingRow]]:
    """The settings of each combination of the workload's own knobs (group size,
    concurrency) that were run at two or more GPU settings (caps, clocks), in sweep order."""
    groups: dict[tuple[object, ...], list[SettingRow]] = {}
    for r in rows:
        groups.setdefault(tuple(getattr(r, k) for k in KNOBS if k not in GPU_KNOBS), []).append(r)
    return [g for g in groups.values() if len({_gpu_setting(r) for r in g}) > 1]


def _gpu_setting(r: SettingRow) -> tuple[object, ...]:
    return tuple(getattr(r, k) for k in GPU_KNOBS)


def _best(
    rows: list[SettingRow], objective: str, eta: float | None, weight: float, max_power: float
) -> Optimal:
    """The best of ``rows`` (one workload setting) for one objective, against its reference."""
    best = min(rows, key=lambda r: (_cost(r, weight, max_power), -float(r.tokens_per_s or 0)))
    ref = _reference(rows, best)
    return Optimal(
        objective=objective,
        eta=eta,
        setting=_knobs(best),
        reference=_knobs(ref),
        j_per_token=float(best.j_per_token or 0),
        tokens_per_s=float(best.tokens_per_s or 0),
        mean_power_w=float(best.mean_power_w or 0),
        cost_per_token=None if objective == "energy" else _cost(best, weight, max_power),
        throughput_change=float(best.tokens_per_s or 0) / float(ref.tokens_per_s or 1) - 1,
        energy_change=float(best.j_per_token or 0) / float(ref.j_per_token or 1) - 1,
    )


def _cost(r: SettingRow, eta: float, max_power_w: float) -> float:
    """η · J/token + (1 − η) · MAXPOWER · s/token (η = 1: energy alone)."""
    return eta * float(r.j_per_token or 0) + (1 - eta) * max_power_w / float(r.tokens_per_s or 1)


def _text(knobs: dict[str, float | None]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in knobs.items() if v is not None) or "as swept"


#: the ``sweep show --optimal`` table
OPTIMAL_COLUMNS = (
    Column(
        "objective", lambda o: o.objective if o.eta is None else f"cost (η={o.eta:g})", key=True
    ),
    Column("setting", lambda o: _text(o.setting), text=True),
    Column("J/tok", "j_per_token", ".3f"),
    Column("tok/s", "tokens_per_s", ".1f"),
    Column("mean W", "mean_power_w", ".1f"),
    Column("throughput", "throughput_change", "+.1%"),
    Column("energy", "energy_change", "+.1%"),
    Column("against", lambda o: _text(o.reference), text=True),
)
