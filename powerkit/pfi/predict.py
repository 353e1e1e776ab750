"""Predicting a job's PFI from telemetry: ordinary least squares, cross-validated.

Features are columns of the jobs table (per job, at the reference cap) or products of them
(``dram_active*memcpy_util``). Cross-validation is leave-one-out (``loo``) or
leave-one-cluster-out (``loco``: every job of one cluster, e.g. one model, is held out
together, so the score says how well the model carries to a workload it has never seen).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import load_json
from powerkit.core.outputs import write_text
from powerkit.core.schemas import type_schema
from powerkit.core.tables import Column
from powerkit.core.units import format_value, list_items
from powerkit.pfi.curves import JobCurve
from powerkit.pfi.index import PfiResult

__all__ = [
    "Model",
    "PredictResult",
    "cross_validate",
    "cv_splits",
    "design",
    "fit",
    "fit_ols",
    "load_model",
    "parse_features",
    "predict_columns",
    "predicted_pfi",
    "r2_score",
]

SMALL_SAMPLE = 20  # below this many jobs the cross-validated figures get a warning


def parse_features(text: str) -> list[str]:
    """``"a,b*c"`` -> ["a", "b*c"]; a feature is a column or a product of columns."""
    features = [f.replace(" ", "") for f in list_items(text, option("features"))]
    if not features or any(not part for f in features for part in f.split("*")):
        raise BadInputError(
            f"{option('features')} {text!r}: expected column names separated by commas, "
            "products written with * (e.g. dram_active*memcpy_util)"
        )
    if len(set(features)) != len(features):
        raise BadInputError(f"{option('features')} {text!r}: a feature is repeated")
    return features


def design(curves: list[JobCurve], features: list[str]) -> np.ndarray:
    """The feature matrix (jobs x features), products evaluated; a missing column is an error."""
    x = np.empty((len(curves), len(features)))
    for i, curve in enumerate(curves):
        for j, feature in enumerate(features):
            value = 1.0
            for column in feature.split("*"):
                if column not in curve.features:
                    have = ", ".join(sorted(curve.features)) or "none"
                    raise BadInputError(
                        f"job {curve.job!r} ({curve.source}) has no feature {column!r} "
                        f"(its numeric columns: {have})"
                    )
                value *= curve.features[column]
            x[i, j] = value
    return x


def fit_ols(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Return [intercept, coefficients...] of the least-squares fit of y on x."""
    a = np.column_stack([np.ones(x.shape[0]), x])
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return np.asarray(coef, dtype=float)


def _apply(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.asarray(coef[0] + x @ coef[1:], dtype=float)


def cv_splits(kind: str, n: int, clusters: list[str] | None = None) -> list[np.ndarray]:
    """Return the held-out index set of every fold (training = the rest).

    ``loo``: one job per fold. ``loco``: all jobs of one cluster per fold.
    """
    if kind == "loo":
        return [np.array([i]) for i in range(n)]
    if kind == "loco":
        if clusters is None:
            raise BadInputError(
                f"{option('cv')} loco needs {option('cluster-col')} (the column naming each "
                "cluster)"
            )
        labels = np.asarray(clusters, dtype=object)
        return [np.flatnonzero(labels == c) for c in dict.fromkeys(clusters)]
    raise BadInputError(f"{option('cv')} {kind!r}: expected loo or loco")


def cross_validate(x: np.ndarray, y: np.ndarray, folds: list[np.ndarray]) -> np.ndarray:
    """Out-of-fold predictions: each fold predicted by a model fitted without it."""
    pred = np.full(y.size, np.nan)
    for test in folds:
        train = np.setdiff1d(np.arange(y.size), test)
        if train.size < 2:
            raise BadInputError(
                "a cross-validation fold leaves fewer than 2 jobs to fit on; use more jobs "
                "(or more clusters)"
            )
        pred[test] = _apply(fit_ols(x[train], y[train]), x[test])
    return pred


def r2_score(y: np.ndarray, pred: np.ndarray) -> float:
    """1 - SS_res / SS_tot around the mean of ``y`` (negative when worse than the mean)."""
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0:
        return math.nan
    return 1.0 - float(((y - pred) ** 2).sum()) / total


@dataclass
class Model:
    """A fitted PFI predictor: PFI ≈ intercept + Σ coefficient · feature."""

    features: list[str]
    intercept: float
    coefficients: list[float]

    def predict(self, curves: list[JobCurve]) -> np.ndarray:
        """Predicted PFI of each job."""
        return _apply(np.array([self.intercept, *self.coefficients]), design(curves, self.features))

    def save(self, path: Path) -> None:
        """Write the model as JSON (atomically)."""
        write_text(
            path,
            json.dumps(
                {
                    "kind": "powerkit-pfi-model",
                    "features": self.features,
                    "intercept": self.intercept,
                    "coefficients": self.coefficients,
                },
                indent=2,
            )
            + "\n",
        )


def load_model(path: Path) -> Model:
    """Read a model written by ``pfi predict --out``."""
    data = load_json(path)
    if not isinstance(data, dict) or data.get("kind") != "powerkit-pfi-model":
        raise BadInputError(f"{path}: not a model written by `powerkit pfi predict --out`")
    try:
        features = [str(f) for f in data["features"]]
        coefficients = [float(c) for c in data["coefficients"]]
        intercept = float(data["intercept"])
    except (KeyError, TypeError, ValueError):
        raise BadInputError(
            f"{path}: a model needs features, coefficients and an intercept"
        ) from None
    if len(coefficients) != len(features):
        raise BadInputError(
            f"{path}: {len(features)} feature(s) but {len(coefficients)} coefficient(s)"
        )
    return Model(features, intercept, coefficients)


@dataclass(frozen=True)
class PredictResult(Document):
    """The fit on every job and its cross-validated figures (``pfi predict``)."""

    COMMAND: ClassVar[str] = "pfi predict"

    model: Model
    jobs: list[str]
    pfi: np.ndarray
    fitted: np.ndarray
    predicted: np.ndarray  # out-of-fold
    clusters: list[str] | None
    cv: str
    r2: float  # in-sample
    cv_r2: float
    cv_rmse: float
    cv_spearman: float
    folds: int
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        """The fitted model and its cross-validated figures, a line each."""
        m = self.model
        terms = " + ".join(f"{c:.4g}·{x}" for x, c in zip(m.features, m.coefficients, strict=True))
        f = format_value
        return [
            f"PFI ≈ {m.intercept:.4g} + {terms}   (n = {len(self.jobs)})",
            f"in-sample R² {f(self.r2, '.3f')}; {self.cv.upper()} ({self.folds} folds): "
            f"R² {f(self.cv_r2, '.3f')}, RMSE {f(self.cv_rmse, '.3f')}, "
            f"Spearman {f(self.cv_spearman, '.3f')}",
        ]

    @classmethod
    def schema_body(cls, defs: dict[str, Any]) -> dict[str, Any]:
        """The schema of :meth:`body` (docs/schemas/)."""
        number, strings = type_schema(float, defs), type_schema(list[str], defs)
        job = {"job": {"type": "string"}, "pfi": number, "fitted": number, "predicted": number}
        cv = {k: number for k in ("r2", "rmse", "spearman")}
        return {
            "type": "object",
            "properties": {
                "features": strings,
                "intercept": number,
                "coefficients": {"type": "object", "additionalProperties": number},
                "n": {"type": "integer"},
                "r2": number,
                "cv": {
                    "type": "object",
                    "properties": {"kind": {"type": "string"}, "folds": {"type": "integer"}, **cv},
                },
                "jobs": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {**job, "cluster": {"type": "string"}},
                        "required": list(job),
                    },
                },
                "warnings": strings,
            },
            "required": ["features", "intercept", "coefficients", "n", "r2", "cv", "jobs"],
        }

    def body(self) -> dict[str, Any]:
        """The ``pfi predict --json`` document's contents."""
        return {
            "features": self.model.features,
            "intercept": self.model.intercept,
            "coefficients": dict(zip(self.model.features, self.model.coefficients, strict=True)),
            "n": len(self.jobs),
            "r2": self.r2,
            "cv": {
                "kind": self.cv,
                "folds": self.folds,
                "r2": self.cv_r2,
                "rmse": self.cv_rmse,
                "spearman": self.cv_spearman,
            },
            "jobs": [
                {
                    "job": job,
                    "pfi": float(self.pfi[i]),
                    "fitted": float(self.fitted[i]),
                    "predicted": float(self.predicted[i]),
                    **({"cluster": self.clusters[i]} if self.clusters else {}),
                }
                for i, job in enumerate(self.jobs)
            ],
            "warnings": self.warnings,
        }


def predict_columns(result: PredictResult) -> tuple[Column, ...]:
    """The per-job table of ``pfi predict``: rows are job indices into ``result``."""
    names = result.clusters
    cluster = () if not names else (Column("cluster", lambda i: names[i], text=True),)
    return (
        Column("job", lambda i: result.jobs[i], key=True),
        Column("PFI", lambda i: float(result.pfi[i]), ".2f"),
        Column("fitted", lambda i: float(result.fitted[i]), ".2f"),
        Column("predicted (CV)", lambda i: float(result.predicted[i]), ".2f"),
        *cluster,
    )


def fit(
    curves: list[JobCurve],
    results: list[PfiResult],
    features: list[str],
    cv: str = "loo",
    cluster_col: str | None = None,
) -> PredictResult:
    """Fit PFI on ``features`` over every job with a finite PFI; cross-validate."""
    warnings: list[str] = []
    keep = [i for i, r in enumerate(results) if math.isfinite(r.pfi)]
    dropped = [results[i].job for i in range(len(results)) if i not in keep]
    if dropped:
        warnings.append(
            f"{len(dropped)} job(s) without a finite PFI left out: {', '.join(dropped[:5])}"
            + (" ..." if len(dropped) > 5 else "")
        )
    curves = [curves[i] for i in keep]
    y = np.array([results[i].pfi for i in keep])
    x = design(curves, features)
    n, k = x.shape
    if n < k + 2:
        raise BadInputError(
            f"{n} job(s) with a PFI for {k} feature(s): need at least {k + 2} to fit and "
            "cross-validate"
        )
    clusters = None
    if cluster_col is not None:
        missing = [c.job for c in curves if cluster_col not in c.groups]
        if missing:
            raise BadInputError(
                f"{option('cluster-col')} {cluster_col!r}: job {missing[0]!r} has no such text "
                "column"
            )
        clusters = [c.groups[cluster_col] for c in curves]
    folds = cv_splits(cv, n, clusters)
    if cv == "loco" and len(folds) < 3:
        raise BadInputError(
            f"{option('cv')} loco needs at least 3 clusters; {cluster_col} has {len(folds)}"
        )
    if n < SMALL_SAMPLE:
        warnings.append(
            f"small sample: {n} jobs for {k} feature(s); cross-validated figures are uncertain"
        )
    coef = fit_ols(x, y)
    fitted = _apply(coef, x)
    predicted = cross_validate(x, y, folds)
    from scipy.stats import spearmanr  # (loaded where used: its import costs every command)

    rho = spearmanr(y, predicted).statistic if n > 2 and np.ptp(predicted) > 0 else math.nan
    return PredictResult(
        Model(features, float(coef[0]), [float(c) for c in coef[1:]]),
        [c.job for c in curves],
        y,
        fitted,
        predicted,
        clusters,
        cv,
        r2_score(y, fitted),
        r2_score(y, predicted),
        float(np.sqrt(np.mean((y - predicted) ** 2))),
        float(rho),
        len(folds),
        warnings,
    )


def predicted_pfi(
    curves: list[JobCurve],
    results: list[PfiResult],
    features: list[str],
    model: Path | None,
    *,
    required: bool,
    note: Callable[[str], None],
) -> np.ndarray | None:
    """Each job's predicted PFI for the ``predicted-pfi`` allocation policy: from a saved
    ``model``, else from a model fitted without that job (LOO; a job left out of the fit, one
    without a finite PFI, is taken as linear, 1.0). Where no model can be fitted, an error if
    the policy was asked for by name (``required``), else None, with ``note`` told why."""
    if model is not None:
        return load_model(model).predict(curves)
    try:
        fitted = fit(curves, results, features, "loo")
    except BadInputError as exc:
        if required:
            raise
        note(f"predicted-pfi left out: {exc}")
        return None
    by_job = dict(zip(fitted.jobs, fitted.predicted, strict=True))
    return np.array([by_job.get(c.job, 1.0) for c in curves], dtype=float)
