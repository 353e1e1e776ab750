"""The Power Flexibility Index of a job, its class, a bootstrap interval and two alternatives.

PFI = mean over capped points i with T_i != T_max of (1 - P_i/P_max) / (1 - T_i/T_max), where
(P_max, T_max) is the reference (uncapped, or the highest cap) run. A point counts as
``T_i != T_max`` when its slowdown |1 - T_i/T_max| exceeds ``min_slowdown`` (0 gives the literal
definition; the default 1 % keeps measurement noise out of a ratio of two tiny numbers).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from powerkit.core.documents import from_plain
from powerkit.core.errors import BadInputError, option
from powerkit.core.tables import Column
from powerkit.core.units import format_value
from powerkit.pfi.curves import JobCurve

__all__ = [
    "CLASSES",
    "PFI_COLUMNS",
    "PFI_COLUMNS_PMAX",
    "PfiResult",
    "area_index",
    "classify",
    "compute_all",
    "compute_pfi",
    "elasticity",
    "job_notes",
    "pfi_text",
    "pfi_value",
]

CLASSES = ("inelastic", "linear", "elastic")


@dataclass
class PfiResult:
    """The index of one job with what it was computed from."""

    job: str
    pfi: float  # inf: power fell and no capped point lost speed; nan: no cap bit
    klass: str | None = field(metadata={"key": "class"})
    ci: tuple[float, float] | None
    caps: int  # capped points in the mean
    reference_cap_w: float  # inf: uncapped
    p_max_w: float
    t_max: float
    area_pfi: float  # alternative 1: area above the normalized curve, shed over lost
    elasticity: float  # alternative 2: T/T_max = (P/P_max) ** elasticity, fitted
    points: list[dict[str, float | int | bool]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, entry: Any, where: str) -> PfiResult:
        """A job's entry of a ``pfi compute`` or ``pfi sweep`` document read back: an index
        written as null was infinite where its class says inelastic, else undefined."""
        if not isinstance(entry, dict):
            raise BadInputError(f"{where}: expected an object")

        def index(key: str) -> float:
            value = entry.get(key)
            if value is None:  # (NaN and inf are written as null)
                return (
                    math.inf
                    if key != "elasticity" and entry.get("class") == "inelastic"
                    else math.nan
                )
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise BadInputError(f"{where}: {key}: {value!r} is not a number")
            return float(value)

        pfi, area, elasticity = (index(k) for k in ("pfi", "area_pfi", "elasticity"))
        checked = from_plain(
            cls,
            {**entry, "klass": entry.get("class"), "pfi": 0.0, "area_pfi": 0.0, "elasticity": 0.0},
            where,
        )
        return dataclasses.replace(checked, pfi=pfi, area_pfi=area, elasticity=elasticity)

    def as_json(self) -> dict[str, object]:
        """The job's entry in ``pfi compute --json`` and ``pfi sweep --json``."""
        return {
            "job": self.job,
            "pfi": self.pfi,
            "class": self.klass,
            "ci": list(self.ci) if self.ci else None,
            "caps": self.caps,
            "area_pfi": self.area_pfi,
            "elasticity": self.elasticity,
            "reference_cap_w": self.reference_cap_w,
            "p_max_w": self.p_max_w,
            "t_max": self.t_max,
            "points": self.points,
            "notes": self.notes,
        }


def pfi_text(value: float) -> str:
    """An index as a table shows it: ``inf`` (perfectly inelastic), ``-`` (none), 2 decimals."""
    if math.isinf(value):
        return "inf"
    return format_value(None if math.isnan(value) else value, ".2f")


#: the per-job table of ``pfi compute`` and ``pfi sweep`` (and the report's)
PFI_COLUMNS = (
    Column("job", "job", key=True),
    Column("PFI", lambda r: pfi_text(r.pfi)),
    Column("class", lambda r: r.klass or "-", text=True),
    Column("95% CI", lambda r: None if r.ci is None else f"{r.ci[0]:.2f}-{r.ci[1]:.2f}"),
    Column("caps", "caps"),
    Column("area PFI", lambda r: pfi_text(r.area_pfi)),
    Column("elasticity", lambda r: None if math.isnan(r.elasticity) else r.elasticity, ".2f"),
)


#: ``pfi compute`` and ``pfi sweep`` on the terminal: the table, and each job's reference power
PFI_COLUMNS_PMAX = (*PFI_COLUMNS, Column("P_max W", "p_max_w", ".0f"))


def job_notes(results: list[PfiResult]) -> list[str]:
    """Every job's notes, each naming its job."""
    return [f"{r.job}: {note}" for r in results for note in r.notes]


def pfi_value(
    power: np.ndarray,
    tokens: np.ndarray,
    p_max: float,
    t_max: float,
    min_slowdown: float = 0.0,
) -> tuple[float, np.ndarray]:
    """Return (PFI, mask of the points used) for capped points against the reference.

    inf when some point shed power and none lost speed (perfectly inelastic); nan when no
    point shed power or lost speed (no cap was below the job's draw).
    """
    power, tokens = np.asarray(power, float), np.asarray(tokens, float)
    value, use = _pfi_rows(power, tokens, p_max, t_max, min_slowdown)
    return float(value), use


def _pfi_rows(
    power: np.ndarray,
    tokens: np.ndarray,
    p_max: float | np.ndarray,
    t_max: float | np.ndarray,
    min_slowdown: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The index along the last axis (capped points); references broadcast against it."""
    slow = 1.0 - tokens / t_max
    shed = 1.0 - power / p_max
    use = np.abs(slow) > min_slowdown
    count = use.sum(axis=-1)
    total = np.where(use, shed / np.where(use, slow, 1.0), 0.0).sum(axis=-1)
    none = np.where((shed > max(min_slowdown, 0.0)).any(axis=-1), math.inf, math.nan)
    return np.where(count > 0, total / np.maximum(count, 1), none), use


def classify(pfi: float, band: float) -> str | None:
    """inelastic (> 1 + band), linear (within ``band`` of 1), elastic (< 1 - band)."""
    if math.isnan(pfi):
        return None
    if abs(pfi - 1.0) <= band:
        return "linear"
    return "inelastic" if pfi > 1.0 else "elastic"


def area_index(x: np.ndarray, y: np.ndarray) -> float:
    """Area shed over area lost: ∫(1 - x) dx / ∫(1 - y) dx over the normalized curve.

    ``x`` = P/P_max and ``y`` = T/T_max per point, the reference (1, 1) included. 1 for a
    linear job; large for a job that keeps its speed; inf when the curve never dips.
    """
    order = np.argsort(x, kind="stable")
    xs, ys = np.asarray(x, float)[order], np.asarray(y, float)[order]
    if xs.size < 2 or xs[-1] - xs[0] <= 0:
        return math.nan
    shed = float(np.trapezoid(1.0 - xs, xs))
    lost = float(np.trapezoid(1.0 - ys, xs))
    if lost <= 0:
        return math.inf if shed > 0 else math.nan
    return shed / lost


def elasticity(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares ε of T/T_max = (P/P_max)^ε through (1, 1) on the capped points.

    1 for a linear job; below 1 inelastic (1/ε plays the role of the PFI for small cuts).
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & (np.abs(np.log(np.where(x > 0, x, 1.0))) > 1e-12)
    if not ok.any():
        return math.nan
    lx, ly = np.log(x[ok]), np.log(y[ok])
    return float((lx * ly).sum() / (lx * lx).sum())


def compute_pfi(
    curve: JobCurve,
    *,
    min_slowdown: float = 0.01,
    band: float = 0.05,
    bootstrap: int | None = 2000,
    seed: int = 0,
) -> PfiResult:
    """Return the PFI of ``curve`` with its class, interval and the two alternatives.

    ``bootstrap``: resamples for the interval when repeats exist; None: no interval.
    """
    if min_slowdown < 0 or band < 0:
        raise BadInputError(
            f"{option('min-slowdown')} and {option('linear-band')} must be at least 0"
        )
    points = curve.points()
    ref = points[-1]
    capped = points[:-1]
    notes: list[str] = []
    if not capped:
        notes.append("only one cap was measured: nothing to compare with the reference")
    power = np.array([p.power_w for p in capped])
    tokens = np.array([p.tokens_per_s for p in capped])
    value, used = pfi_value(power, tokens, ref.power_w, ref.tokens_per_s, min_slowdown)
    faster = [p for p in capped if p.tokens_per_s > ref.tokens_per_s * (1 + min_slowdown)]
    if faster:
        notes.append(
            f"{len(faster)} capped point(s) ran faster than the reference (noise or a "
            "reference that was not steady)"
        )
    if math.isnan(value) and capped:
        notes.append("no cap was below the job's draw: the index is undefined")
    x = np.append(power / ref.power_w, 1.0)
    y = np.append(tokens / ref.tokens_per_s, 1.0)
    ci = None
    if bootstrap is not None and curve.has_repeats and capped:
        ci = _bootstrap(curve, min_slowdown, bootstrap, seed)
        if ci is None:
            notes.append("the bootstrap interval is undefined: too few resamples had a finite PFI")
        elif math.isfinite(value) and not ci[0] <= value <= ci[1]:
            notes.append(
                "the bootstrap interval does not contain the point estimate: the runs at one "
                f"cap may not be repeats of one setting (see {option('split-by')})"
            )
    result_points = [
        {
            "cap_w": p.cap_w,
            "power_w": p.power_w,
            "tokens_per_s": p.tokens_per_s,
            "repeats": p.repeats,
            "used": bool(used[i]) if i < used.size else False,
        }
        for i, p in enumerate(points)
    ]
    return PfiResult(
        curve.job,
        value,
        classify(value, band),
        ci,
        int(used.sum()),
        ref.cap_w,
        ref.power_w,
        ref.tokens_per_s,
        area_index(x, y),
        elasticity(x[:-1], y[:-1]),
        result_points,
        notes,
    )


def _bootstrap(
    curve: JobCurve, min_slowdown: float, draws: int, seed: int
) -> tuple[float, float] | None:
    """95 % percentile interval, resampling the repeats of every cap (the reference too)."""
    if draws < 100:
        raise BadInputError(f"{option('bootstrap')} needs at least 100 resamples")
    rng = np.random.default_rng(seed)
    caps = curve.caps()
    p_means = np.empty((draws, caps.size))
    t_means = np.empty((draws, caps.size))
    for j, cap in enumerate(caps):
        sel = np.flatnonzero(curve.cap_w == cap)
        pick = sel[rng.integers(0, sel.size, size=(draws, sel.size))]
        p_means[:, j] = curve.power_w[pick].mean(axis=1)
        t_means[:, j] = curve.tokens_per_s[pick].mean(axis=1)
    values, _ = _pfi_rows(
        p_means[:, :-1], t_means[:, :-1], p_means[:, -1:], t_means[:, -1:], min_slowdown
    )
    finite = values[np.isfinite(values)]
    if finite.size < 0.9 * draws:
        return None
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return float(lo), float(hi)


def compute_all(
    curves: list[JobCurve],
    min_slowdown: float,
    band: float = 0.05,
    bootstrap: int | None = None,
    seed: int = 0,
) -> list[PfiResult]:
    """:func:`compute_pfi` of each job, with the same settings."""
    return [
        compute_pfi(c, min_slowdown=min_slowdown, band=band, bootstrap=bootstrap, seed=seed)
        for c in curves
    ]
