"""powerkit pfi: the index, its alternatives, curves, prediction, allocation, sweeps, CLI."""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from powerkit.core.errors import BadInputError
from powerkit.pfi.allocate import (
    AllocJob,
    allocate,
    interp_curves,
    oracle,
    proportional,
    upper_hull,
)
from powerkit.pfi.curves import JobCurve, load_curves, parse_stat, steady_power
from powerkit.pfi.index import area_index, classify, compute_pfi, elasticity, pfi_value
from powerkit.pfi.predict import cross_validate, cv_splits, fit, fit_ols, parse_features
from powerkit.sim import get_preset
from powerkit.sweep.backends import SimBackend
from powerkit.sweep.runner import SweepConfig, run_sweep
from tests.conftest import Cli
from tests.fake_nvml import FakeNvml


def curve(job: str, rows: list[tuple[float, float, float]], **features: float) -> JobCurve:
    """A job from (cap_w, power_w, tokens_per_s) rows; cap inf = uncapped."""
    a = np.array(rows, dtype=float)
    return JobCurve(job, a[:, 0], a[:, 1], a[:, 2], features=dict(features), source="test")


def write_jobs(path: Path, rows: list[dict[str, object]]) -> Path:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    lines = [",".join(keys)]
    lines += [",".join("" if r.get(k) is None else str(r[k]) for k in keys) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


# -- the index ---------------------------------------------------------------------------


def test_linear_job_has_pfi_exactly_one() -> None:
    # Throughput proportional to power: every capped point gives (1 - x) / (1 - x) = 1.
    c = curve("lin", [(math.inf, 1000, 500), (800, 800, 400), (600, 600, 300), (400, 400, 200)])
    r = compute_pfi(c, min_slowdown=0.0)
    assert r.pfi == 1.0 and r.klass == "linear" and r.caps == 3
    assert r.area_pfi == pytest.approx(1.0, abs=1e-12)
    assert r.elasticity == pytest.approx(1.0, abs=1e-12)
    assert r.ci is None  # no repeats


def test_hand_computed_pfi_and_excluded_points() -> None:
    # P/Pmax = 0.9, 0.7, 0.5; T/Tmax = 1.0 (excluded), 0.95, 0.8.
    power = np.array([900.0, 700.0, 500.0])
    tokens = np.array([100.0, 95.0, 80.0])
    value, used = pfi_value(power, tokens, 1000.0, 100.0)
    assert used.tolist() == [False, True, True]
    assert value == pytest.approx(((0.3 / 0.05) + (0.5 / 0.2)) / 2)  # 4.25
    c = curve("j", [(700, 1000, 100), (600, 900, 100), (500, 700, 95), (400, 500, 80)])
    r = compute_pfi(c, min_slowdown=0.0)
    assert r.pfi == pytest.approx(4.25) and r.klass == "inelastic" and r.caps == 2
    assert [p["used"] for p in r.points] == [True, True, False, False]  # ascending caps


def test_a_job_that_keeps_its_speed_is_very_inelastic() -> None:
    # Full speed down to the lowest cap, where it loses 2 %: huge PFI.
    c = curve("keep", [(700, 700, 100), (600, 600, 100), (500, 500, 100), (300, 300, 98)])
    r = compute_pfi(c, min_slowdown=0.0)
    assert r.pfi == pytest.approx((1 - 300 / 700) / 0.02) and r.pfi > 20
    # No speed lost anywhere while power fell: perfectly inelastic (inf), still classified.
    flat = curve("flat", [(700, 700, 100), (500, 500, 100)])
    assert compute_pfi(flat).pfi == math.inf and compute_pfi(flat).klass == "inelastic"


def test_elastic_job_and_undefined_index() -> None:
    c = curve("el", [(700, 700, 100), (500, 600, 50)])  # sheds 14 %, loses 50 %
    r = compute_pfi(c)
    assert r.pfi == pytest.approx((1 - 600 / 700) / 0.5) and r.klass == "elastic"
    none = curve("none", [(700, 500, 100), (600, 500, 100)])  # the cap never bit
    r = compute_pfi(none)
    assert math.isnan(r.pfi) and r.klass is None and any("undefined" in n for n in r.notes)


def test_min_slowdown_keeps_noise_out() -> None:
    # 0.2 % slower at 95 % power: literally a PFI term of 25; under the default 1 %, excluded.
    c = curve("n", [(700, 1000, 100), (650, 950, 99.8), (400, 600, 70)])
    assert compute_pfi(c, min_slowdown=0.0).pfi == pytest.approx((25 + 0.4 / 0.3) / 2)
    assert compute_pfi(c).pfi == pytest.approx(0.4 / 0.3)


def test_classify_band() -> None:
    assert classify(1.04, 0.05) == "linear" and classify(1.06, 0.05) == "inelastic"
    assert classify(0.9, 0.05) == "elastic" and classify(math.inf, 0.05) == "inelastic"
    assert classify(math.nan, 0.05) is None


def test_alternatives_on_an_inelastic_curve() -> None:
    x = np.array([0.5, 0.75, 1.0])
    y = np.sqrt(x)  # T = P^0.5
    assert elasticity(x[:-1], y[:-1]) == pytest.approx(0.5)
    assert area_index(x, y) > 1.5


def test_bootstrap_interval_with_repeats() -> None:
    rng = np.random.default_rng(3)
    rows = []
    for cap, p, t in ((700, 1000, 100), (500, 700, 80), (300, 400, 50)):
        for _ in range(4):
            rows.append(
                (
                    cap,
                    p * (1 + 0.01 * rng.standard_normal()),
                    t * (1 + 0.01 * rng.standard_normal()),
                )
            )
    r = compute_pfi(curve("rep", rows), bootstrap=500, seed=1)
    assert r.ci is not None and r.ci[0] < r.pfi < r.ci[1] and r.ci[1] - r.ci[0] < 0.5
    assert compute_pfi(curve("rep", rows), bootstrap=500, seed=1).ci == r.ci  # seeded


def test_steady_power_statistics() -> None:
    x = np.arange(1.0, 101.0)
    assert steady_power(x, "mean") == 50.5 and steady_power(x, "median") == 50.5
    assert steady_power(x, "top10") == pytest.approx(95.5)
    assert steady_power(x, parse_stat("top25%")) == pytest.approx(88.0)
    with pytest.raises(BadInputError, match="topN"):
        parse_stat("p95")


# -- prediction --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from("abcdef"), min_size=3, max_size=30))
def test_loco_folds_never_leak_a_cluster(labels: list[str]) -> None:
    folds = cv_splits("loco", len(labels), labels)
    held = np.concatenate(folds)
    assert sorted(held.tolist()) == list(range(len(labels)))  # a partition
    for test in folds:
        train = np.setdiff1d(np.arange(len(labels)), test)
        assert {labels[i] for i in test}.isdisjoint({labels[i] for i in train})
        assert len({labels[i] for i in test}) == 1


def test_loo_predictions_do_not_see_their_own_job() -> None:
    x = np.arange(6.0)[:, None]
    y = 2 * x[:, 0] + 1
    y[5] += 10  # an outlier: its LOO prediction comes from the line through the others
    pred = cross_validate(x, y, cv_splits("loo", 6))
    assert pred[5] == pytest.approx(11.0)
    assert fit_ols(x[:5], y[:5]) == pytest.approx([1.0, 2.0])


def test_fit_with_a_product_feature_and_small_sample_warning() -> None:
    curves, results = [], []
    for i, (d, m) in enumerate([(0.3, 30), (0.4, 50), (0.5, 60), (0.6, 70), (0.7, 80)]):
        pfi = 0.5 + 0.03 * d * m
        c = curve(
            f"j{i}",
            [(700, 1000, 100), (400, 1000 * (1 - 0.3 * pfi), 70)],
            dram_active=d,
            memcpy_util=m,
        )
        c.groups["model"] = f"m{i % 3}"
        curves.append(c)
        results.append(compute_pfi(c, min_slowdown=0.0))
    assert parse_features("dram_active * memcpy_util") == ["dram_active*memcpy_util"]
    r = fit(curves, results, ["dram_active*memcpy_util"], "loo")
    assert r.model.coefficients[0] == pytest.approx(0.03, rel=1e-6)
    assert r.cv_r2 == pytest.approx(1.0) and r.cv_spearman == pytest.approx(1.0)
    assert any("small sample" in w for w in r.warnings)
    loco = fit(curves, results, ["dram_active*memcpy_util"], "loco", "model")
    assert loco.folds == 3 and loco.clusters == ["m0", "m1", "m2", "m0", "m1"]
    with pytest.raises(BadInputError, match="no feature 'gpu_util'"):
        fit(curves, results, ["gpu_util"], "loo")
    with pytest.raises(BadInputError, match="needs cluster_col"):
        fit(curves, results, ["dram_active"], "loco")


# -- allocation --------------------------------------------------------------------------


def concave_job(rng: np.random.Generator, name: str) -> AllocJob:
    """A random concave, increasing curve of 3-6 points."""
    k = int(rng.integers(3, 7))
    power = np.sort(rng.uniform(100, 1000, k))
    power = np.unique(np.round(power, 3))
    slopes = np.sort(rng.uniform(0.01, 1.0, power.size - 1))[::-1]
    tokens = rng.uniform(10, 100) + np.concatenate([[0.0], np.cumsum(slopes * np.diff(power))])
    pfi, predicted = rng.uniform(0.8, 3, size=2)
    return AllocJob(name, power, tokens, power[-1], tokens[-1], float(pfi), float(predicted))


def test_upper_hull_and_interpolation() -> None:
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    y = np.array([0.0, 0.5, 3.0, 3.2, 3.3])  # (1, 0.5) lies below the chord (0,0)-(2,3)
    hx, hy = upper_hull(x, y)
    assert hx.tolist() == [0.0, 2.0, 3.0, 4.0] and hy.tolist() == [0.0, 3.0, 3.2, 3.3]
    xs = np.array([[0.0, 2.0, 4.0], [1.0, 3.0, 3.0]])
    ys = np.array([[0.0, 2.0, 3.0], [5.0, 7.0, 7.0]])
    got = interp_curves(xs, ys, np.array([1.0, 3.0]))
    assert got.tolist() == [1.0, 7.0]


def test_proportional_meets_the_budget_within_bounds() -> None:
    p_min = np.array([[100.0, 200.0, 50.0]])
    p_max = np.array([[500.0, 400.0, 300.0]])
    p = proportional(p_min, p_max, p_max, np.array([900.0]))
    assert p.sum() == pytest.approx(900.0) and np.all(p >= p_min - 1e-9) and np.all(p <= p_max)
    # Equal weights: the same share off everyone until the 400 W job hits its floor.
    assert p[0, 1] == pytest.approx(400 * (1 - 300 / 1200), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.02, 0.5))
def test_oracle_beats_every_policy_on_concave_curves(seed: int, cut: float) -> None:
    rng = np.random.default_rng(seed)
    jobs = [concave_job(rng, f"j{i}") for i in range(6)]
    floor = max(j.power_w[0] / j.power_w[-1] for j in jobs)  # the least flexible job
    cut = min(cut, 0.95 * (1 - floor))
    result = allocate(
        jobs,
        [cut],
        ["equal", "pfi", "predicted-pfi", "oracle"],
        workloads=5,
        jobs_per_workload=8,
        seed=seed,
    )
    c = result.cuts[0]
    for policy in ("equal", "pfi", "predicted-pfi"):
        assert c.tokens_per_s["oracle"] >= c.tokens_per_s[policy] * (1 - 1e-9)
    assert c.oracle_gap_bound == pytest.approx(0.0, abs=1e-9)  # concave: the hull is the curve


def brute_force(jobs_x: list[np.ndarray], jobs_y: list[np.ndarray], budget: float) -> float:
    """Exact optimum of Σ T_j(p_j), Σ p_j <= budget, on piecewise-linear curves.

    Some optimum has every job but at most one at a breakpoint of its curve (a vertex of
    the LP on the segments it sits on); enumerate those, the free job taking what is left.
    """
    best = -np.inf
    n = len(jobs_x)
    for free in range(-1, n):
        fixed = [i for i in range(n) if i != free]
        for combo in itertools.product(*(range(jobs_x[i].size) for i in fixed)):
            used = sum(jobs_x[i][k] for i, k in zip(fixed, combo, strict=True))
            value = sum(jobs_y[i][k] for i, k in zip(fixed, combo, strict=True))
            if free >= 0:
                p = min(budget - used, jobs_x[free][-1])
                if p < jobs_x[free][0] - 1e-12:
                    continue
                value += np.interp(p, jobs_x[free], jobs_y[free])
            elif used > budget + 1e-9:
                continue
            best = max(best, value)
    return float(best)


@pytest.mark.parametrize("seed", range(12))
def test_oracle_equals_brute_force_on_small_cases(seed: int) -> None:
    rng = np.random.default_rng(seed)
    concave = seed % 2 == 0
    jobs_x, jobs_y = [], []
    for _ in range(3):
        x = np.sort(rng.choice(np.arange(5.0, 101.0, 5.0), size=4, replace=False))
        rises = rng.uniform(0, 10, size=3)
        if concave:  # slopes falling with power
            rises = np.sort(rises / np.diff(x))[::-1] * np.diff(x)
        jobs_x.append(x)
        jobs_y.append(rng.uniform(0, 5) + np.concatenate([[0.0], np.cumsum(rises)]))
    floor = sum(x[0] for x in jobs_x)
    budget = float(floor + 0.6 * (sum(x[-1] for x in jobs_x) - floor))
    best = brute_force(jobs_x, jobs_y, budget)
    hulls = [upper_hull(x, y) for x, y in zip(jobs_x, jobs_y, strict=True)]
    k = max(h[0].size for h in hulls)
    hx = np.stack([np.pad(h[0], (0, k - h[0].size), mode="edge") for h in hulls])[None]
    hy = np.stack([np.pad(h[1], (0, k - h[1].size), mode="edge") for h in hulls])[None]
    power = oracle(hx, hy, np.ones((1, 3)), np.array([budget]))
    achieved = sum(np.interp(p, x, y) for p, x, y in zip(power[0], jobs_x, jobs_y, strict=True))
    bound = sum(np.interp(p, h[0], h[1]) for p, h in zip(power[0], hulls, strict=True))
    assert power.sum() <= budget + 1e-6
    # Achieved <= exact <= hull bound; on concave curves all three are one number.
    assert achieved <= best + 1e-9 <= bound + 2e-9
    if concave:
        assert achieved == pytest.approx(best, abs=1e-9) and bound == pytest.approx(best)


def test_oracle_on_a_hand_solved_case() -> None:
    # Job A: 20 -> 60 W gains 20 tok/s (0.5/W), 60 -> 100 W gains 10 (0.25/W).
    # Job B: 10 -> 50 W gains 30 (0.75/W), 50 -> 90 W gains 10 (0.25/W).
    # 120 W: both floors (30 W), then B's 0.75 segment (40 W), A's 0.5 segment (40 W),
    # the last 10 W on a 0.25 segment: 10 + 5 + 30 + 20 + 2.5 = 67.5 tok/s.
    jobs_x = [np.array([20.0, 60.0, 100.0]), np.array([10.0, 50.0, 90.0])]
    jobs_y = [np.array([10.0, 30.0, 40.0]), np.array([5.0, 35.0, 45.0])]
    power = oracle(
        np.stack(jobs_x)[None], np.stack(jobs_y)[None], np.ones((1, 2)), np.array([120.0])
    )
    got = sum(np.interp(p, x, y) for p, x, y in zip(power[0], jobs_x, jobs_y, strict=True))
    assert got == pytest.approx(67.5) and brute_force(jobs_x, jobs_y, 120.0) == pytest.approx(67.5)


def test_allocation_refuses_a_cut_deeper_than_the_curves() -> None:
    job = AllocJob("a", np.array([600.0, 1000.0]), np.array([50.0, 100.0]), 1000.0, 100.0, 1.0)
    with pytest.raises(BadInputError, match=r"deepest cut .* 40\.0%"):
        allocate([job], [0.5], ["equal", "oracle"], workloads=2, jobs_per_workload=3)


# -- the simulator and the sweep ---------------------------------------------------------


def test_memory_bound_training_jobs_lose_less_speed_under_a_cap() -> None:
    pfis = {}
    for name in ("h200-dense-pretrain", "h200-moe-pretrain", "h200-moe-finetune"):
        backend = SimBackend(get_preset(name), seed=2, common_seed=True)
        config = SweepConfig(
            axes={"power_cap_w": [300.0, 500.0, 700.0]}, warmup_s=60, point_s=300, interval_s=0.5
        )
        data = run_sweep(backend, config)
        data.job = name
        from powerkit.pfi.curves import from_sweep

        (c,) = from_sweep(data, "top10", Path(name))
        assert c.features["dram_active"] > 0 and c.features["memcpy_util"] > 0
        pfis[name] = compute_pfi(c).pfi
    assert 1.0 < pfis["h200-dense-pretrain"] < pfis["h200-moe-pretrain"] < pfis["h200-moe-finetune"]


# -- the command line --------------------------------------------------------------------


def test_cli_sweep_compute_predict_allocate(cli: Cli, tmp_path: Path) -> None:
    files = []
    jobs = (
        ("h200-dense-pretrain", "dense"),
        ("h200-moe-finetune", "moe"),
        ("h100-dense-pretrain", "dense"),
        ("h100-moe-pretrain", "moe"),
    )
    for name, model in jobs:
        out = tmp_path / f"{name}.parquet"
        doc = cli.json(
            "pfi",
            "sweep",
            "--preset",
            name,
            "--caps",
            "300W,500W,700W",
            "--point",
            "5m",
            "--repeats",
            "2",
            "--label",
            f"model={model}",
            "--out",
            out,
        )
        assert doc["jobs"][0]["job"] == name and doc["jobs"][0]["ci"] is not None
        files.append(out)
    curves_csv, html = tmp_path / "curves.csv", tmp_path / "pfi.html"
    doc = cli.json("pfi", "compute", *files, "--curves-out", curves_csv, "--html", html)
    assert [set(j) >= {"job", "pfi", "class", "ci", "caps"} for j in doc["jobs"]] == [True] * 4
    assert all(j["class"] == "inelastic" and j["caps"] == 2 for j in doc["jobs"])
    assert "plotly" in html.read_text()
    # The combined table reads back to the same indices.
    again = cli.json("pfi", "compute", curves_csv)
    assert [j["pfi"] for j in again["jobs"]] == pytest.approx([j["pfi"] for j in doc["jobs"]])
    pred = cli.json(
        "pfi",
        "predict",
        "--train",
        curves_csv,
        "--features",
        "dram_active*memcpy_util",
        "--out",
        tmp_path / "m.json",
    )
    assert pred["n"] == 4 and pred["cv"]["kind"] == "loo" and "small sample" in pred["warnings"][0]
    two = cli("pfi", "predict", "--train", curves_csv, "--cv", "loco", "--cluster-col", "model")
    assert two.exit_code == 2 and "at least 3 clusters; model has 2" in two.stderr
    loco = cli.json(
        "pfi",
        "predict",
        "--train",
        curves_csv,
        "--cv",
        "loco",
        "--cluster-col",
        "preset",
        "--features",
        "dram_active",
    )
    names = [name for name, _ in jobs]
    assert loco["cv"]["folds"] == 4 and [j["cluster"] for j in loco["jobs"]] == names
    alloc_html = tmp_path / "alloc.html"
    doc = cli.json(
        "pfi",
        "allocate",
        "--jobs",
        curves_csv,
        "--cut",
        "0%,20%,30%",
        "--workloads",
        "20",
        "--jobs-per-workload",
        "10",
        "--model",
        tmp_path / "m.json",
        "--html",
        alloc_html,
    )
    assert doc["workloads"] == 20 and doc["jobs_per_workload"] == 10 and doc["seed"] == 0
    assert [c["cut"] for c in doc["cuts"]] == [0.0, 0.2, 0.3]
    assert doc["cuts"][0]["gap_recovered"]["pfi"] is None  # no gap at no cut
    for c in doc["cuts"][1:]:
        assert set(c["policies"]) == {"equal", "pfi", "predicted-pfi", "oracle"}
        assert c["gap_recovered"]["equal"] == 0 and c["gap_recovered"]["oracle"] == 1
        assert c["policies"]["oracle"]["tokens_per_s"] >= c["policies"]["pfi"]["tokens_per_s"]
        assert set(c["policies"]["pfi"]["per_job_tokens_per_s"]) <= set(names)
    assert "plotly" in alloc_html.read_text()


def test_cli_jobs_table_and_bad_inputs(cli: Cli, tmp_path: Path) -> None:
    good = write_jobs(
        tmp_path / "jobs.csv",
        [
            {"job": "a", "cap_w": None, "power_w": 1000, "tokens_per_s": 100},
            {"job": "a", "cap_w": 500, "power_w": 500, "tokens_per_s": 50},
            {"job": "b", "cap_w": 700, "power_w": 700, "tokens_per_s": 100},
            {"job": "b", "cap_w": 400, "power_w": 400, "tokens_per_s": 90},
        ],
    )
    doc = cli.json("pfi", "compute", good)
    assert {j["job"]: (j["pfi"], j["class"]) for j in doc["jobs"]} == {
        "a": (1.0, "linear"),
        "b": (pytest.approx((3 / 7) / 0.1), "inelastic"),
    }
    assert doc["jobs"][0]["reference_cap_w"] is None  # uncapped (inf) prints as null
    bad_number = write_jobs(
        tmp_path / "bad.csv",
        [
            {"job": "a", "cap_w": 700, "power_w": 700, "tokens_per_s": 10},
            {"job": "a", "cap_w": 500, "power_w": "lots", "tokens_per_s": 9},
        ],
    )
    negative = write_jobs(
        tmp_path / "neg.csv", [{"job": "a", "cap_w": 700, "power_w": -5, "tokens_per_s": 10}]
    )
    missing = write_jobs(tmp_path / "miss.csv", [{"job": "a", "power_w": 1, "tokens_per_s": 1}])
    cases = [
        (("pfi", "compute", tmp_path / "nope.csv"), "no such file"),
        (("pfi", "compute", bad_number), "row 3: power_w 'lots' is not a number"),
        (("pfi", "compute", negative), "row 2: power_w must be"),
        (("pfi", "compute", missing), "missing column(s) cap_w"),
        (("pfi", "compute", good, "--stat", "p95"), "topN"),
        (("pfi", "compute", good, good), "is also in"),
        (("pfi", "allocate", "--jobs", good, "--cut", "30"), "percentage"),
        (
            ("pfi", "allocate", "--jobs", good, "--cut", "60%", "--policies", "equal,oracle"),
            "deepest cut",
        ),
        (("pfi", "allocate", "--jobs", good, "--policies", "equal,magic"), "unknown policy"),
        (
            ("pfi", "allocate", "--jobs", good, "--policies", "equal,predicted-pfi,oracle"),
            "no feature",
        ),
        (("pfi", "predict", "--train", good), "no feature 'dram_active'"),
        (("pfi", "sweep", "--caps", "700W", "--out", tmp_path / "s.parquet"), "at least two"),
        (
            (
                "pfi",
                "sweep",
                "--caps",
                "300W,700W",
                "--label",
                "oops",
                "--out",
                tmp_path / "s.parquet",
            ),
            "KEY=VALUE",
        ),
    ]
    for args, message in cases:
        result = cli(*args)
        assert result.exit_code == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, (
            args,
            result.stderr,
        )
    broken_model = tmp_path / "model.json"
    broken_model.write_text('{"kind": "powerkit-pfi-model", "features": ["a"]}')
    result = cli("pfi", "allocate", "--jobs", good, "--model", broken_model)
    assert result.exit_code == 2 and "needs features, coefficients" in result.stderr
    not_allocation = tmp_path / "other.json"
    not_allocation.write_text('{"cuts": []}')
    result = cli("report", "--allocation", not_allocation, "--out", tmp_path / "r.html")
    assert result.exit_code == 2 and "not a `powerkit pfi allocate --json`" in result.stderr
    assert not (tmp_path / "r.html").exists()
    # Without feature columns the default policy list leaves predicted-pfi out, with a warning.
    result = cli("pfi", "allocate", "--jobs", good, "--cut", "20%", "--workloads", "3", "--json")
    assert result.exit_code == 0 and "predicted-pfi left out" in result.stderr
    assert set(json.loads(result.stdout)["cuts"][0]["policies"]) == {"equal", "pfi", "oracle"}


def test_pfi_sweep_restores_caps_on_error(
    cli: Cli, tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake = fake_nvml(gpus=2)
    seen: list[int] = []
    setter = fake.module.nvmlDeviceSetPowerManagementLimit.side_effect

    def set_limit(handle: object, mw: int) -> None:
        seen.append(mw)
        setter(handle, mw)

    fake.module.nvmlDeviceSetPowerManagementLimit.side_effect = set_limit
    calls = {"n": 0}
    real_power = fake.module.nvmlDeviceGetPowerUsage.side_effect

    def failing(handle: object) -> object:
        calls["n"] += 1
        if calls["n"] > 90:  # the GPU falls off the bus in the third point
            raise fake.module.NVMLError_GpuIsLost()
        return real_power(handle)

    fake.module.nvmlDeviceGetPowerUsage.side_effect = failing
    tokens = tmp_path / "tokens.jsonl"
    tokens.write_text('{"ts": 1, "tokens": 0}\n')
    result = cli(
        "pfi",
        "sweep",
        "--backend",
        "nvml",
        "--tokens-from",
        tokens,
        "--caps",
        "300W,500W,700W",
        "--warmup",
        "0s",
        "--point",
        "1s",
        "--interval",
        "0.05s",
        "--out",
        tmp_path / "s.parquet",
    )
    assert result.exit_code == 2 and "lost" in result.stderr.lower(), result.stderr
    assert any(mw < 700_000 for mw in seen), (seen, calls, result.stderr)
    assert fake.limits_mw == [700_000, 700_000]  # and the original limits came back
    # The points that finished before the GPU was lost were stored as they finished.
    from powerkit.sweep.runner import checkpoint_path, read_sweep

    assert not (tmp_path / "s.parquet").exists()
    kept = read_sweep(checkpoint_path(tmp_path / "s.parquet"))
    assert kept.interrupted and 1 <= len(kept.runs) < 3


def test_load_curves_from_a_sweep_with_other_knobs(tmp_path: Path) -> None:
    from powerkit.sweep.runner import write_sweep

    backend = SimBackend(get_preset("a100-7b"), seed=0, common_seed=True)
    config = SweepConfig(
        axes={"group_size": [4.0, 8.0], "power_cap_w": [250.0, 400.0]}, warmup_s=30, point_s=120
    )
    path = write_sweep(run_sweep(backend, config), tmp_path / "s.parquet", "sim")
    curves = load_curves([path])
    assert sorted(c.job for c in curves) == ["a100-7b group_size=4", "a100-7b group_size=8"]
    assert all(c.caps().tolist() == [250.0, 400.0] for c in curves)
    assert json.dumps(curves[0].groups) == '{"preset": "a100-7b"}'


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.2, 0.98), min_size=1, max_size=6, unique=True),
    st.floats(0.1, 1e4),
    st.floats(0.1, 1e6),
)
def test_pfi_is_one_for_any_linear_job_and_ignores_job_size(
    shares: list[float], p_max: float, t_max: float
) -> None:
    rows = [(math.inf, p_max, t_max)] + [(s * p_max, s * p_max, s * t_max) for s in shares]
    r = compute_pfi(curve("lin", rows), min_slowdown=0.0)
    assert r.pfi == pytest.approx(1.0, rel=1e-9) and r.klass == "linear"
    # The same curve on a job 8x the size (power and throughput both scaled): same index.
    bent = [(c, p, t * (1 - 0.3 * (1 - p / p_max) ** 2)) for c, p, t in rows]
    big = [(c, 8 * p, 8 * t) for c, p, t in bent]
    assert compute_pfi(curve("big", big)).pfi == pytest.approx(compute_pfi(curve("b", bent)).pfi)


CAP_WORKLOAD = """
import json, sys, time
t0 = time.time()
time.sleep(0.3)
print(json.dumps({"tokens": 1000, "seconds": time.time() - t0}), flush=True)
"""


def test_pfi_sweep_cmd_backend_on_fake_gpus(
    cli: Cli, tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake = fake_nvml(gpus=2)
    seen: list[int] = []
    setter = fake.module.nvmlDeviceSetPowerManagementLimit.side_effect
    fake.module.nvmlDeviceSetPowerManagementLimit.side_effect = lambda h, mw: (
        seen.append(mw),
        setter(h, mw),
    )
    script = tmp_path / "work.py"
    script.write_text(CAP_WORKLOAD)
    out = tmp_path / "cmd.parquet"
    doc = cli.json(
        "pfi",
        "sweep",
        "--backend",
        "cmd",
        "--run",
        f"{sys.executable} {script}",
        "--caps",
        "300W,100%",
        "--warmup",
        "0s",
        "--point",
        "2s",
        "--interval",
        "0.05s",
        "--job",
        "tiny",
        "--out",
        out,
    )
    assert doc["jobs"][0]["job"] == "tiny" and doc["jobs"][0]["reference_cap_w"] == 700.0
    assert {300_000, 700_000} <= set(seen) and fake.limits_mw == [700_000, 700_000]
    (c,) = load_curves([out])
    assert c.caps().tolist() == [300.0, 700.0] and np.all(c.tokens_per_s > 0)
    assert "memcpy_util" in c.features  # NVML's memory utilization, averaged over the point
