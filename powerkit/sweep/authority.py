"""Sweep analysis: the point table and each knob's authority over power.

Authority of a knob (DESIGN.md): with the other knobs at their defaults,
``swing = (max_s P(s) - min_s P(s)) / max_s P(s)`` over the knob's settings s, where P(s) is
the mean power at a setting after warm-up; also as a share of nameplate, with the throughput
ratio ``max_s T(s) / min_s T(s)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from powerkit.core.documents import Document
from powerkit.core.jsonable import OMIT_NONE
from powerkit.core.tables import Column
from powerkit.sweep.plan import GPU_KNOBS, KNOBS
from powerkit.sweep.runner import SweepData

__all__ = [
    "OCCUPANCY_SWING",
    "VOLUME_RATIO",
    "Authority",
    "Optimal",
    "SettingRow",
    "SweepFailure",
    "SweepReport",
    "analyse",
]

OCCUPANCY_SWING = 0.05  # a knob that moves mean power by 5 % or more changes the power level
VOLUME_RATIO = 1.2  # otherwise, one that stretches the unit of work by 20 % changes volume


@dataclass
class SettingRow:
    """One knob setting, over its repeats (``*_std``: spread across repeats)."""

    group_size: int | None
    concurrency: int | None
    power_cap_w: float | None
    gpu_frequency_mhz: float | None
    mean_power_w: float | None
    p95_power_w: float | None
    max_power_w: float | None
    tokens_per_s: float | None
    j_per_token: float | None
    wh_per_1k_tokens: float | None
    repeats: int
    failed: int = 0
    mean_power_w_std: float | None = None
    p95_power_w_std: float | None = None
    tokens_per_s_std: float | None = None
    j_per_token_std: float | None = None
    duration_s: float | None = None


@dataclass
class Authority:
    """How much one knob moves mean power, with the other knobs held at ``fixed``."""

    knob: str
    swing: float | None
    swing_ci: list[float] | None
    swing_nameplate: float | None
    throughput_ratio: float | None
    verdict: str  # "occupancy" | "volume" | "none"
    settings: list[float] = field(default_factory=list)
    mean_power_w: list[float | None] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)


def point_columns(varied: list[str]) -> tuple[Column, ...]:
    """The point table of ``powerkit sweep``: the knobs ``varied``, then the figures."""
    return (
        *(Column(k, k, "g") for k in varied),
        Column("mean W", "mean_power_w", ".1f"),
        Column("±", "mean_power_w_std", ".1f"),
        Column("p95 W", "p95_power_w", ".1f"),
        Column("tok/s", "tokens_per_s", ".1f"),
        Column("J/tok", "j_per_token", ".3f"),
        Column("Wh/1k", "wh_per_1k_tokens", ".3f"),
        Column("n", lambda p: f"{p.repeats}" + (f"+{p.failed}!" if p.failed else "")),
    )


def _ci(interval: list[float] | None) -> str | None:
    return None if not interval else f"{100 * interval[0]:.1f}-{100 * interval[1]:.1f}%"


#: the authority table of ``powerkit sweep``, a row per knob varied
AUTHORITY_COLUMNS = (
    Column("knob", "knob", key=True),
    Column("swing", "swing", ".1f", "%", scale=100),
    Column("95% CI", lambda a: _ci(a.swing_ci)),
    Column("of TDP", "swing_nameplate", ".1f", "%", scale=100),
    Column("T ratio", "throughput_ratio", ".2f"),
    Column("verdict", "verdict", text=True),
    Column(
        "held at", lambda a: ", ".join(f"{k}={v:g}" for k, v in a.fixed.items()) or "-", text=True
    ),
)


@dataclass(frozen=True)
class Optimal:
    """The best setting of a sweep for one objective, and what it costs against the reference
    (powerkit.sweep.optimal)."""

    objective: str  # "energy" or "cost"
    eta: float | None  # cost: the weight of energy
    setting: dict[str, float | None]  # the knobs of the chosen setting
    reference: dict[str, float | None]
    j_per_token: float
    tokens_per_s: float
    mean_power_w: float
    cost_per_token: float | None  # cost: η J/token + (1 − η) MAXPOWER s/token, in J
    throughput_change: float  # tokens/s ÷ the reference's − 1
    energy_change: float  # J/token ÷ the reference's − 1


@dataclass(frozen=True)
class SweepFailure:
    """A run of a sweep that gave no figures: its place in the order, its repeat, the knob
    settings it ran at (None: the knob was not swept), and why."""

    order: int
    repeat: int
    group_size: int | None
    concurrency: int | None
    power_cap_w: float | None
    gpu_frequency_mhz: float | None
    error: str


@dataclass(frozen=True)
class SweepReport(Document):
    """What ``powerkit sweep`` (and ``sweep show``) reports."""

    COMMAND: ClassVar[str] = "sweep"

    points: list[SettingRow]
    authority: list[Authority]
    nameplate_w: float | None
    backend: str
    preset: str | None
    gpus: int
    failures: list[SweepFailure] = field(default_factory=list)
    interrupted: bool = False
    optimal: list[Optimal] | None = field(default=None, metadata=OMIT_NONE)  # --optimal


def _stat(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


def analyse(data: SweepData, *, bootstrap: int = 2000, seed: int = 0) -> SweepReport:
    """Return the point table and the authority of every knob the sweep varied."""
    by_setting: dict[int, list[Any]] = {}
    failures = []
    for run in data.runs:
        by_setting.setdefault(run.point.setting, []).append(run)
        if run.error:
            p = run.point
            failures.append(
                SweepFailure(
                    p.order,
                    p.repeat,
                    p.group_size,
                    p.concurrency,
                    p.power_cap_w,
                    p.gpu_frequency_mhz,
                    run.error,
                )
            )
    rows: dict[int, SettingRow] = {}
    run_means: dict[int, list[float]] = {}
    for setting, runs in sorted(by_setting.items()):
        ok = [r for r in runs if not r.error and r.times_s.size]
        means = [float(r.power_w.mean()) for r in ok]
        p95s = [float(np.percentile(r.power_w, 95)) for r in ok]
        tokens = [r.tokens_per_s for r in ok if r.tokens_per_s]
        joules = [
            float(r.power_w.mean()) * data.gpus / r.tokens_per_s for r in ok if r.tokens_per_s
        ]
        durations = [r.duration_s for r in ok if r.duration_s]
        mean, mean_std = _stat(means)
        p95, p95_std = _stat(p95s)
        tps, tps_std = _stat(tokens)
        jpt, jpt_std = _stat(joules)
        point = runs[0].point
        rows[setting] = SettingRow(
            group_size=point.group_size,
            concurrency=point.concurrency,
            power_cap_w=point.power_cap_w,
            gpu_frequency_mhz=point.gpu_frequency_mhz,
            mean_power_w=mean,
            p95_power_w=p95,
            max_power_w=float(max(r.power_w.max() for r in ok)) if ok else None,
            tokens_per_s=tps,
            j_per_token=jpt,
            wh_per_1k_tokens=None if jpt is None else jpt * 1000 / 3600,
            repeats=len(ok),
            failed=len(runs) - len(ok),
            mean_power_w_std=mean_std,
            p95_power_w_std=p95_std,
            tokens_per_s_std=tps_std,
            j_per_token_std=jpt_std,
            duration_s=float(np.mean(durations)) if durations else None,
        )
        run_means[setting] = means
    authority = [
        _authority(knob, data, rows, run_means, bootstrap, seed)
        for knob in KNOBS
        if len(data.config.axes.get(knob, [])) > 1
    ]
    return SweepReport(
        list(rows.values()),
        authority,
        data.nameplate_w,
        data.backend,
        data.preset,
        data.gpus,
        failures,
        data.interrupted,
    )


def fixed_values(data: SweepData, knob: str) -> dict[str, Any]:
    """Return the values the other varied knobs are held at: their defaults when swept, else
    the middle of their axis (a power cap: the highest, the nearest to no cap)."""
    fixed: dict[str, Any] = {}
    for other, values in data.config.axes.items():
        if other == knob or len(values) < 2:
            continue
        default = data.defaults.get(other)
        if default in values:
            fixed[other] = default
        elif other in GPU_KNOBS:  # the highest cap or clock: the nearest to none
            fixed[other] = max(values)
        else:
            fixed[other] = sorted(values)[len(values) // 2]
    return fixed


def _authority(
    knob: str,
    data: SweepData,
    rows: dict[int, SettingRow],
    run_means: dict[int, list[float]],
    bootstrap: int,
    seed: int,
) -> Authority:
    fixed = fixed_values(data, knob)
    chosen = sorted(
        (s for s, row in rows.items() if all(getattr(row, k) == v for k, v in fixed.items())),
        key=lambda s: getattr(rows[s], knob),
    )
    settings = [float(getattr(rows[s], knob)) for s in chosen]
    powers = [rows[s].mean_power_w for s in chosen]
    auth = Authority(knob, None, None, None, None, "none", settings, powers, fixed)
    measured = [(s, p) for s, p in zip(chosen, powers, strict=True) if p is not None]
    if len(measured) < 2:
        return auth
    p = np.array([v for _, v in measured])
    auth.swing = float((p.max() - p.min()) / p.max())
    if data.nameplate_w:
        auth.swing_nameplate = float((p.max() - p.min()) / data.nameplate_w)
    tokens = [rows[s].tokens_per_s for s, _ in measured]
    if all(t for t in tokens):
        t = np.array(tokens, dtype=float)
        auth.throughput_ratio = float(t.max() / t.min())
    samples = [run_means[s] for s, _ in measured]
    if all(len(x) > 1 for x in samples):
        rng = np.random.default_rng(seed)
        boot = np.empty(bootstrap)
        for b in range(bootstrap):
            m = np.array([rng.choice(x, size=len(x)).mean() for x in samples])
            boot[b] = (m.max() - m.min()) / m.max()
        lo, hi = np.percentile(boot, [2.5, 97.5])
        auth.swing_ci = [float(lo), float(hi)]
    durations = [rows[s].duration_s for s, _ in measured]
    if auth.swing >= OCCUPANCY_SWING:
        auth.verdict = "occupancy"
    elif all(durations) and max(durations) / min(durations) >= VOLUME_RATIO:  # type: ignore[type-var,operator]
        auth.verdict = "volume"
    return auth
