"""The ``pfi`` commands as library jobs: the index of every job in jobs tables or sweep files
(``compute``, and ``sweep`` after its cap sweep), the fit that predicts it (``predict``), and
a power cut shared among jobs by each policy (``allocate``), callable from Python."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Self

from powerkit.core.choices import Backend, CvKind, only
from powerkit.core.documents import Document, from_plain
from powerkit.core.errors import BadInputError, option
from powerkit.core.jsonable import to_plain
from powerkit.core.outputs import atomic_path
from powerkit.core.units import PowerSpec
from powerkit.pfi.allocate import POLICIES, AllocationResult, allocate, jobs_from_curves
from powerkit.pfi.curves import curves_frame, load_curves, parse_stat
from powerkit.pfi.index import PfiResult, compute_all
from powerkit.pfi.predict import PredictResult, fit, parse_features, predicted_pfi
from powerkit.sweep.backends import make_backend
from powerkit.sweep.job import SweepCallbacks, run_and_store
from powerkit.sweep.runner import SweepConfig

__all__ = [
    "AllocateOptions",
    "ComputeOptions",
    "PfiReport",
    "PfiSweepOptions",
    "PfiSweepReport",
    "PredictOptions",
    "cap_ladder",
    "run_allocate",
    "run_compute",
    "run_pfi_sweep",
    "run_predict",
]


class _JobsDocument(Document):
    """A document of jobs' indices (``jobs``, each as :meth:`PfiResult.as_json`) and the
    settings they were computed with (the other fields)."""

    jobs: list[PfiResult]

    def body(self) -> dict[str, Any]:
        """The jobs, then the settings."""
        rest = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "jobs"}  # type: ignore[arg-type]
        return {"jobs": [r.as_json() for r in self.jobs], **to_plain(rest)}

    @classmethod
    def from_body(cls, doc: dict[str, Any]) -> Self:
        """The report a document holds (each job by :meth:`PfiResult.from_json`)."""
        jobs = doc.get("jobs")
        if not isinstance(jobs, list):
            raise BadInputError("jobs must be a list")
        settings = from_plain(cls, {**doc, "jobs": []}, "document")
        found = [PfiResult.from_json(j, f"jobs[{i}]") for i, j in enumerate(jobs)]
        return replace(settings, jobs=found)  # type: ignore[type-var]


@dataclass(frozen=True)
class PfiReport(_JobsDocument):
    """What ``powerkit pfi compute`` reports: each job's index, and what it was judged by."""

    COMMAND: ClassVar[str] = "pfi compute"

    jobs: list[PfiResult]
    stat: str
    min_slowdown: float
    linear_band: float


@dataclass(frozen=True)
class PfiSweepReport(_JobsDocument):
    """What ``powerkit pfi sweep`` reports: the job's index from the sweep written to ``out``."""

    COMMAND: ClassVar[str] = "pfi sweep"

    jobs: list[PfiResult]
    stat: str
    out: str


def cap_ladder(
    caps: list[PowerSpec],
    nameplate_w: float | None,
    note: Callable[[str], None] = lambda line: None,
) -> list[float]:
    """The caps of ``pfi sweep`` in watts (shares of ``nameplate_w`` resolved): at least two,
    the highest the reference; ``note`` hears a reference below the nameplate."""
    values = [cap.resolve(nameplate_w) for cap in caps]
    if len(values) < 2:
        raise BadInputError(
            f"{option('caps')}: give at least two caps (the highest is the reference), not "
            f"{len(values)}"
        )
    if nameplate_w is not None and max(values) < nameplate_w:
        note(
            f"the highest cap ({max(values):g} W) is below the nameplate ({nameplate_w:g} W): it "
            "is the reference run, so PFI compares against a capped job"
        )
    return values


@dataclass(frozen=True)
class PfiSweepOptions:
    """What ``pfi sweep`` is given, its units parsed.

    Attributes:
        caps: the per-GPU caps, each a power or a share of the GPUs' nameplate (two at least;
            the highest is the reference).
        backend: ``sim``, ``nvml``/``amdsmi`` (a running job) or ``cmd`` (a command per cap).
        timing: each cap's warm-up, length, sampling interval and cool-down, the repeats and
            the seed of the order (and of the simulated job), as a :class:`SweepConfig`
            (default: 1 min warm-up, 10 min points, 0.5 s).
        preset: the simulated job. job: the job's name (default: the preset's, under sim).
        run: ``cmd``'s command. tokens_from: a JSON-lines file of cumulative tokens.
        gpus: GPU indices (None: all). labels: group columns of the job (``model=moe``).
        stat, min_slowdown: as :class:`ComputeOptions`.
    """

    caps: list[PowerSpec]
    backend: Backend = Backend.sim
    timing: SweepConfig = field(
        default_factory=lambda: SweepConfig(axes={}, warmup_s=60.0, point_s=600.0)
    )
    preset: str = "h200-dense-pretrain"
    job: str | None = None
    run: str | None = None
    tokens_from: Path | None = None
    gpus: list[int] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    stat: str = "top10"
    min_slowdown: float = 0.01


def run_pfi_sweep(
    opts: PfiSweepOptions,
    out: Path,
    *,
    resume: bool = False,
    force: bool = False,
    callbacks: SweepCallbacks | None = None,
) -> PfiSweepReport | None:
    """Run the job under each cap (random order, repeats; every cap of a repeat runs the same
    simulated job), store the sweep in ``out`` (:func:`powerkit.sweep.job.run_and_store`) and
    return the job's PFI; None when the sweep was interrupted (no PFI from part of the caps)."""
    allowed = (Backend.sim, Backend.nvml, Backend.amdsmi, Backend.cmd)
    only(opts.backend, allowed, option("backend"), "pfi sweep")
    parse_stat(opts.stat)  # (a bad stat fails before the sweep)
    runner, source = make_backend(
        opts.backend,
        preset=opts.preset,
        seed=opts.timing.seed,
        common_seed=True,
        run=opts.run,
        gpus=opts.gpus,
        tokens_from=opts.tokens_from,
    )
    plate = runner.devices[0].nameplate_w if runner.devices else None
    warn = callbacks.warning if callbacks is not None else (lambda line: None)
    config = replace(opts.timing, axes={"power_cap_w": cap_ladder(opts.caps, plate, note=warn)})
    name = opts.job or (opts.preset if opts.backend is Backend.sim else None)
    written = run_and_store(
        runner,
        config,
        source,
        out,
        job=name,
        labels=opts.labels,
        resume=resume,
        force=force,
        callbacks=callbacks,
    )
    if written != out:
        return None
    computed = run_compute(
        [out], ComputeOptions(opts.stat, opts.min_slowdown, seed=opts.timing.seed)
    )
    return PfiSweepReport(computed.jobs, computed.stat, str(out))


@dataclass(frozen=True)
class ComputeOptions:
    """What ``pfi compute`` is given, its units parsed.

    Attributes:
        stat: steady-state power of a point (``top10``: mean of the top 10 %, ``mean``...).
        min_slowdown: a cap counts only if it changed throughput by more than this share.
        linear_band: a PFI within this of 1 is linear.
        bootstrap: resamples for the CI (where repeats exist); seed: the bootstrap's.
        split_by: jobs-table columns whose values make jobs of their own (None: none).
        curves_out: every run written here as one jobs CSV (None: not written).
    """

    stat: str = "top10"
    min_slowdown: float = 0.01
    linear_band: float = 0.05
    bootstrap: int = 2000
    seed: int = 0
    split_by: list[str] | None = None
    curves_out: Path | None = None


def run_compute(paths: list[Path], opts: ComputeOptions = ComputeOptions()) -> PfiReport:
    """PFI per job of the jobs tables or sweep files ``paths``."""
    curves = load_curves(paths, opts.stat, opts.split_by)
    results = compute_all(curves, opts.min_slowdown, opts.linear_band, opts.bootstrap, opts.seed)
    if opts.curves_out is not None:
        with atomic_path(opts.curves_out) as tmp:
            curves_frame(curves).write_csv(tmp)
    return PfiReport(results, parse_stat(opts.stat), opts.min_slowdown, opts.linear_band)


@dataclass(frozen=True)
class PredictOptions:
    """What ``pfi predict`` is given, its units parsed.

    Attributes:
        features: telemetry columns, products with ``*`` (``dram_active*memcpy_util``).
        cv: ``loo``, or ``loco`` (leave one cluster out, by ``cluster_col``).
        cluster_col: the column naming each job's cluster.
        stat, min_slowdown: as for ``pfi compute``.
        out: the fitted model saved here (None: not saved).
    """

    features: str = "dram_active*memcpy_util"
    cv: CvKind = CvKind.loo
    cluster_col: str | None = None
    stat: str = "top10"
    min_slowdown: float = 0.01
    out: Path | None = None


def run_predict(train: list[Path], opts: PredictOptions = PredictOptions()) -> PredictResult:
    """Fit PFI on telemetry features (OLS) over the jobs of ``train``, cross-validated."""
    names = parse_features(opts.features)
    curves = load_curves(train, opts.stat)
    results = compute_all(curves, opts.min_slowdown, 0.05, None, 0)
    result = fit(curves, results, names, opts.cv.value, opts.cluster_col)
    if opts.out is not None:
        result.model.save(opts.out)
    return result


@dataclass(frozen=True)
class AllocateOptions:
    """What ``pfi allocate`` is given, its units parsed.

    Attributes:
        jobs: jobs tables or sweep files with the jobs' cap curves.
        cuts: the cuts, each a share of the summed peak power (0.3: 30 %).
        policies: any of ``equal``, ``pfi``, ``predicted-pfi``, ``oracle`` (None: every one,
            predicted-pfi where it can be fit).
        workloads: synthetic workloads drawn (500). jobs_per_workload: jobs in each (100).
        size_spread: job sizes log-uniform in 1x..this x (1: as measured).
        features: predicted-pfi: the LOO predictor's features (``dram_active*memcpy_util``).
        model: predicted-pfi: a ``pfi predict --out`` model (None: fit on ``jobs``).
        seed: the seed of the draws. stat, min_slowdown: as :class:`ComputeOptions`.
    """

    jobs: list[Path]
    cuts: list[float]
    policies: list[str] | None = None
    workloads: int = 500
    jobs_per_workload: int = 100
    size_spread: float = 1.0
    features: str = "dram_active*memcpy_util"
    model: Path | None = None
    seed: int = 0
    stat: str = "top10"
    min_slowdown: float = 0.01


def run_allocate(
    opts: AllocateOptions,
    *,
    note: Callable[[str], None] = lambda line: None,
    progress: Callable[[int, int], None] | None = None,
) -> AllocationResult:
    """Share each cut of the summed peak power among synthetic workloads of the jobs, by each
    policy; ``note`` hears why predicted-pfi was left out (when it was not asked for by name),
    ``progress(done, total)`` each cut finished."""
    if not opts.cuts:
        raise BadInputError(f"{option('cut')}: give at least one cut, e.g. 30%")
    curves = load_curves(opts.jobs, opts.stat)
    results = compute_all(curves, opts.min_slowdown, 0.05, None, 0)
    chosen = list(opts.policies) if opts.policies else list(POLICIES)
    predicted = None
    if "predicted-pfi" in chosen:
        predicted = predicted_pfi(
            curves,
            results,
            parse_features(opts.features),
            opts.model,
            required=bool(opts.policies),
            note=note,
        )
        if predicted is None:
            chosen.remove("predicted-pfi")
    return allocate(
        jobs_from_curves(curves, results, predicted),
        opts.cuts,
        chosen,
        workloads=opts.workloads,
        jobs_per_workload=opts.jobs_per_workload,
        seed=opts.seed,
        size_spread=opts.size_spread,
        progress=progress,
    )
