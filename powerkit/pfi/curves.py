"""Power-cap curves of jobs: read from a jobs table (CSV/Parquet) or a stored sweep.

A curve is what a job did under each per-GPU power cap: its summed power and its throughput,
one row per run (repeats allowed). The uncapped run (a missing cap) or, failing that, the
highest cap is the reference (P_max, T_max) that the index compares every capped run to.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import check_regular
from powerkit.core.outputs import csv_safe, csv_unsafe
from powerkit.core.units import is_number, parse_pairs
from powerkit.sweep.plan import KNOBS
from powerkit.sweep.runner import SweepData, read_sweep, stored_sweep, unfinished_note

__all__ = [
    "REQUIRED",
    "CurvePoint",
    "JobCurve",
    "curves_frame",
    "load_curves",
    "parse_labels",
    "parse_stat",
    "steady_power",
]

REQUIRED = ("job", "cap_w", "power_w", "tokens_per_s")
_STAT_RE = re.compile(r"top(\d+(?:\.\d+)?)%?")


@dataclass(frozen=True)
class CurvePoint:
    """One cap of a job: the mean over its repeats (``cap_w`` is inf when uncapped)."""

    cap_w: float
    power_w: float
    tokens_per_s: float
    repeats: int


@dataclass
class JobCurve:
    """Every run of one job under caps; ``features`` and ``groups`` are per job."""

    job: str
    cap_w: np.ndarray  # per run; inf: uncapped
    power_w: np.ndarray  # per run, summed over the job's GPUs
    tokens_per_s: np.ndarray  # per run
    features: dict[str, float] = field(default_factory=dict)  # at the reference cap
    groups: dict[str, str] = field(default_factory=dict)  # e.g. model, cluster
    source: str = ""
    #: the per-GPU nameplate of the GPUs the curve was measured on (a sweep's, or a jobs
    #: table's ``nameplate_w`` column); None: unknown
    nameplate_w: float | None = None

    def caps(self) -> np.ndarray:
        """The distinct caps, ascending (inf last)."""
        return np.unique(self.cap_w)

    def points(self) -> list[CurvePoint]:
        """One point per cap (mean over repeats), ascending cap, the reference last."""
        out = []
        for cap in self.caps():
            sel = self.cap_w == cap
            out.append(
                CurvePoint(
                    float(cap),
                    float(self.power_w[sel].mean()),
                    float(self.tokens_per_s[sel].mean()),
                    int(sel.sum()),
                )
            )
        return out

    @property
    def reference_cap_w(self) -> float:
        """The uncapped run's cap (inf) if there is one, else the highest cap."""
        return float(self.cap_w.max())

    @property
    def has_repeats(self) -> bool:
        """Whether any cap was run more than once."""
        return bool(np.unique(self.cap_w, return_counts=True)[1].max() > 1)


#: the most a jobs table's per-GPU cap or power may be (W): far above any board
MAX_GPU_W = 100_000.0


def parse_stat(text: str) -> str:
    """Check a steady-state statistic: ``mean``, ``median`` or ``topN`` (mean of the top N %)."""
    t = text.strip().lower()
    if t in ("mean", "median"):
        return t
    m = _STAT_RE.fullmatch(t)
    if m and 0 < float(m.group(1)) <= 100:
        return f"top{m.group(1)}"
    raise BadInputError(
        f"{option('stat')} {text!r}: expected mean, median or topN (the mean of the highest N % of "
        "samples, e.g. top10)"
    )


def steady_power(series: np.ndarray, stat: str) -> float:
    """Return the steady-state power of a point's job power series under ``stat``."""
    x = np.asarray(series, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan
    if stat == "mean":
        return float(x.mean())
    if stat == "median":
        return float(np.median(x))
    share = float(parse_stat(stat)[3:]) / 100.0
    k = max(1, math.ceil(share * x.size))
    return float(np.partition(x, x.size - k)[x.size - k :].mean())


def load_curves(
    paths: list[Path], stat: str = "top10", split_by: list[str] | None = None
) -> list[JobCurve]:
    """Read job curves from jobs tables and stored sweeps; a job may appear in one file only.

    ``split_by`` names jobs-table columns that hold a setting other than the cap (an SM-clock
    target, say): each of their values makes a job of its own.
    """
    if not paths:
        raise BadInputError("no curves given: pass a jobs CSV/Parquet file or a sweep file")
    stat = parse_stat(stat)
    jobs: dict[str, JobCurve] = {}
    for path in paths:
        check_regular(path)
        for curve in _read_one(path, stat, split_by or []):
            if curve.job in jobs:
                raise BadInputError(
                    f"{path}: job {curve.job!r} is also in {jobs[curve.job].source}; "
                    "give each job one file (or rename it)"
                )
            jobs[curve.job] = curve
    return list(jobs.values())


def _read_one(path: Path, stat: str, split_by: list[str]) -> list[JobCurve]:
    if path.suffix.lower() in (".parquet", ".pq"):
        if stored_sweep(path):
            data = read_sweep(path)
            note = unfinished_note(data, path)
            if note is not None:  # caps missing from a curve would change its PFI silently
                raise BadInputError(note)
            return from_sweep(data, stat, path)
        try:
            frame = pl.read_parquet(path, glob=False)
        except Exception as exc:
            raise BadInputError(f"{path}: not a readable Parquet file ({exc})") from None
        return from_frame(frame, path, split_by)
    try:
        frame = pl.read_csv(path, infer_schema_length=10_000, glob=False)
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadInputError(f"{path}: not a readable CSV file ({reason})") from None
    return from_frame(frame, path, split_by)


def _numbers(frame: pl.DataFrame, column: str, path: Path) -> np.ndarray:
    try:
        values = frame.get_column(column).cast(pl.Float64, strict=True)
    except Exception:
        bad = next(
            (
                i
                for i, v in enumerate(frame.get_column(column).cast(pl.Utf8).to_list())
                if v is not None and not is_number(v)
            ),
            0,
        )
        raise BadInputError(
            f"{path}: row {bad + 2}: {column} {frame.get_column(column)[bad]!r} is not a number"
        ) from None
    return values.to_numpy().astype(float)


def from_frame(
    frame: pl.DataFrame, path: Path, split_by: list[str] | None = None
) -> list[JobCurve]:
    """Curves from a jobs table: job, cap_w, power_w, tokens_per_s (+ features, groups).

    A numeric column that looks like a second setting (at one cap of a job it takes several
    values, each of which recurs at other caps) is refused: its rows are not repeats of one
    another. ``split_by`` makes one job per value of such columns instead.
    """
    text = [c for c, t in frame.schema.items() if t == pl.String]
    frame = frame.with_columns(
        pl.col(c).map_elements(csv_unsafe, return_dtype=pl.String) for c in text
    )
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise BadInputError(
            f"{path}: missing column(s) {', '.join(missing)} (a jobs file needs "
            f"{', '.join(REQUIRED)}; cap_w empty for an uncapped run)"
        )
    if frame.height == 0:
        raise BadInputError(f"{path}: no rows")
    cap = _numbers(frame, "cap_w", path)
    power = _numbers(frame, "power_w", path)
    tokens = _numbers(frame, "tokens_per_s", path)
    for name, values, allow_nan in (
        ("cap_w", cap, True),
        ("power_w", power, False),
        ("tokens_per_s", tokens, False),
    ):
        bad = np.flatnonzero(
            (~np.isnan(values) & ((values < 0) | ~np.isfinite(values)))
            | (np.isnan(values) & (not allow_nan))
        )
        if bad.size:
            raise BadInputError(
                f"{path}: row {bad[0] + 2}: {name} must be a finite number of at least 0"
            )
    zero_cap = np.flatnonzero(cap == 0)
    if zero_cap.size:
        raise BadInputError(f"{path}: row {zero_cap[0] + 2}: cap_w is 0")
    for name, values in (("cap_w", cap), ("power_w", power)):  # (per GPU: no board draws it)
        huge = np.flatnonzero(values > MAX_GPU_W)
        if huge.size:
            raise BadInputError(
                f"{path}: row {huge[0] + 2}: {name} {values[huge[0]]:g} is more than any GPU "
                f"draws (at most {MAX_GPU_W:,.0f} W a GPU)"
            )
    if "nameplate_w" in frame.columns:  # (an empty cell is unknown; NaN or infinity is wrong)
        given = frame.get_column("nameplate_w").cast(pl.Float64, strict=False)
        wrong = (given.is_nan() | given.is_infinite()).fill_null(False).to_numpy()
        if wrong.any():
            row = int(np.flatnonzero(wrong)[0])
            raise BadInputError(f"{path}: row {row + 2}: nameplate_w must be a positive number")
    _refuse_copied_rows(frame, path)
    cap = np.where(np.isnan(cap), np.inf, cap)
    names = frame.get_column("job").cast(pl.Utf8).to_list()
    if any(n is None or not str(n).strip() for n in names):
        row = next(i for i, n in enumerate(names) if n is None or not str(n).strip())
        raise BadInputError(f"{path}: row {row + 2}: empty job name")
    split_by = split_by or []
    unknown = [c for c in split_by if c not in frame.columns]
    if unknown:
        raise BadInputError(
            f"{path}: {option('split-by')} column(s) {', '.join(unknown)} not in the table"
        )
    if split_by:
        settings = frame.select(pl.col(c).cast(pl.Utf8) for c in split_by).rows()
        names = [
            f"{n} [{', '.join(f'{c}={v}' for c, v in zip(split_by, row, strict=True))}]"
            for n, row in zip(names, settings, strict=True)
        ]
    extra = [c for c in frame.columns if c not in (*REQUIRED, "repeat", "nameplate_w", *split_by)]
    plates = _numbers(frame, "nameplate_w", path) if "nameplate_w" in frame.columns else None
    numeric = [c for c in extra if frame.schema[c].is_numeric()]
    text = [c for c in extra if c not in numeric]
    out = []
    job_array = np.asarray(names, dtype=object)
    for job in dict.fromkeys(names):
        sel = job_array == job
        for c in numeric:
            _refuse_second_setting(
                frame.get_column(c).cast(pl.Float64).to_numpy()[sel], cap[sel], c, str(job), path
            )
        plate = None if plates is None else plates[sel][np.isfinite(plates[sel])]
        if plate is not None and plate.size and not (np.all(plate == plate[0]) and plate[0] > 0):
            raise BadInputError(f"{path}: job {job!r}: nameplate_w must be one positive number")
        curve = JobCurve(
            str(job),
            cap[sel],
            power[sel],
            tokens[sel],
            source=str(path),
            nameplate_w=float(plate[0]) if plate is not None and plate.size else None,
        )
        ref = curve.cap_w == curve.reference_cap_w
        for c in numeric:
            values = frame.get_column(c).cast(pl.Float64).to_numpy()[sel]
            at_ref = values[ref][np.isfinite(values[ref])]
            anywhere = values[np.isfinite(values)]
            if at_ref.size or anywhere.size:
                curve.features[c] = float((at_ref if at_ref.size else anywhere).mean())
        for c in text:
            labels = [str(v) for v in frame.get_column(c).cast(pl.Utf8).to_numpy()[sel] if v]
            if len(set(labels)) > 1:
                raise BadInputError(
                    f"{path}: job {job!r} has more than one {c} ({', '.join(sorted(set(labels)))})"
                )
            if labels:
                curve.groups[c] = labels[0]
        _check_curve(curve, path)
        out.append(curve)
    return out


def _refuse_copied_rows(frame: pl.DataFrame, path: Path) -> None:
    """Raise on a row that repeats an earlier one: the same job, cap and repeat number where
    the table numbers its repeats, else the same value in every column. Repeats of a run
    are averaged; a copied row would be counted twice."""
    key = ["job", "cap_w", "repeat"] if "repeat" in frame.columns else frame.columns
    seen: dict[tuple[object, ...], int] = {}
    for i, row in enumerate(frame.select(key).iter_rows()):
        first = seen.setdefault(row, i)
        if first != i:
            same = "job, cap_w and repeat" if "repeat" in frame.columns else "value in every column"
            raise BadInputError(
                f"{path}: row {i + 2} repeats row {first + 2} (the same {same}): a run is "
                "counted once; repeats of one cap differ in their figures or their repeat column"
            )


def _refuse_second_setting(
    values: np.ndarray, caps: np.ndarray, column: str, job: str, path: Path
) -> None:
    """Raise when ``column`` varies like a setting across a job's rows (see from_frame)."""
    ok = np.isfinite(values)
    if ok.sum() < 2:
        return
    v, c = values[ok], caps[ok]
    distinct = np.unique(v)
    if distinct.size < 2 or distinct.size >= v.size:
        return  # constant, or a measurement that differs on every row
    caps_per_value = [np.unique(c[v == x]).size for x in distinct]
    if min(caps_per_value) < 2:
        return
    for cap_w in np.unique(c):
        here = np.unique(v[c == cap_w])
        if here.size > 1:
            where = "uncapped" if np.isinf(cap_w) else f"cap {cap_w:g} W"
            shown = ", ".join(f"{x:g}" for x in here[:5])
            raise BadInputError(
                f"{path}: job {job!r}: column {column} takes {here.size} values ({shown}) at "
                f"{where}, each at several caps: a second setting, so its rows are not "
                f"repeats; give {option('split-by')} {column} (one job per setting) or drop the "
                "column"
            )


def from_sweep(data: SweepData, stat: str, path: Path) -> list[JobCurve]:
    """Curves from a ``sweep`` or ``pfi sweep`` file: one job per setting of the other knobs."""
    name = data.job or data.preset or path.stem
    other = [k for k in KNOBS if k != "power_cap_w" and len(data.config.axes.get(k, [])) > 1]
    groups: dict[tuple[object, ...], list[tuple[float, float, float, dict[str, float]]]] = {}
    for run in data.runs:
        if run.error or run.times_s.size == 0 or run.tokens_per_s is None:
            continue
        key = tuple(getattr(run.point, k) for k in other)
        cap = run.point.power_cap_w
        job_power = np.asarray(run.power_w, dtype=float).sum(axis=0)
        groups.setdefault(key, []).append(
            (
                math.inf if cap is None else float(cap),
                steady_power(job_power, stat),
                float(run.tokens_per_s),
                run.features,
            )
        )
    if not groups:
        raise BadInputError(f"{path}: no run of this sweep measured both power and throughput")
    out = []
    for key, rows in groups.items():
        job = name + "".join(
            f" {k}={v:g}" for k, v in zip(other, key, strict=True) if v is not None
        )
        curve = JobCurve(
            job,
            np.array([r[0] for r in rows]),
            np.array([r[1] for r in rows]),
            np.array([r[2] for r in rows]),
            source=str(path),
            nameplate_w=data.nameplate_w,
        )
        ref = [r[3] for r in rows if r[0] == curve.reference_cap_w]
        for feature in sorted({f for r in ref for f in r}):
            values = [r[feature] for r in ref if feature in r]
            curve.features[feature] = float(np.mean(values))
        if data.preset:
            curve.groups["preset"] = data.preset
        curve.groups.update(data.labels)
        _check_curve(curve, path)
        out.append(curve)
    return out


def _check_curve(curve: JobCurve, path: Path) -> None:
    ref = curve.cap_w == curve.reference_cap_w
    if not (curve.tokens_per_s[ref].mean() > 0 and curve.power_w[ref].mean() > 0):
        raise BadInputError(
            f"{path}: job {curve.job!r}: the reference run (uncapped or highest cap) has no "
            "throughput or no power"
        )


def curves_frame(curves: list[JobCurve]) -> pl.DataFrame:
    """All runs as one jobs table (cap_w empty when uncapped), features and groups per job."""
    rows = []
    for c in curves:
        for i in range(c.cap_w.size):
            row: dict[str, object] = {
                "job": c.job,
                "cap_w": None if math.isinf(c.cap_w[i]) else float(c.cap_w[i]),
                "power_w": float(c.power_w[i]),
                "tokens_per_s": float(c.tokens_per_s[i]),
            }
            if c.nameplate_w is not None:
                row["nameplate_w"] = c.nameplate_w
            row.update(c.groups)
            row.update(c.features)
            rows.append(row)
    frame = pl.DataFrame(rows, infer_schema_length=None)
    # job names and group labels come from users: never a formula in a spreadsheet
    text = [c for c, t in frame.schema.items() if t == pl.String]
    return frame.with_columns(
        pl.col(c).map_elements(csv_safe, return_dtype=pl.String) for c in text
    )


def parse_labels(items: list[str]) -> dict[str, str]:
    """``--label KEY=VALUE`` (repeatable) as the group labels a jobs table carries."""
    labels = parse_pairs(items, option("label"), "KEY=VALUE", "model=moe-finetune")
    for item in items:
        key = item.partition("=")[0].strip()
        if key in REQUIRED:
            raise BadInputError(
                f"{option('label')} {item!r}: {key} is a column of every jobs table"
            )
    return labels
