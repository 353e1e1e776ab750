"""Real nvidia-smi logs from ../shared/realdata (skipped when the folder is absent)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from powerkit.analysis.info import trace_info
from powerkit.trace import ImportOptions, read_trace

# file -> (GPUs, rows kept, min W, max W) as documented in SOURCES.md
EXPECTED = {
    "smi_8xH100_gpt350m_train_ckpt1000_100ms.csv": (8, 54_736, 69, 603),
    "smi_8xH100_gpt350m_train_ckpt10_100ms.csv": (8, 43_600, 69, 576),
    "smi_2xTitanX_gpt350m_train_100ms_nounitW.csv": (2, 8_186, 16, 178),
    "smi_4xA100-40GB_llama2-70b_infer_inputsweep_100ms.csv": (4, 42_962, 51, 473),
    "smi_1xV100_falcon-7b_infer_inputsweep_100ms.csv": (1, 9_631, 24, 242),
    "smi_1xV100_falcon-7b_infer_100ms_89min.csv": (1, 50_933, 30, 285),
    "smi_1xRTX4090_vlm_eval_1s_gaps.csv": (1, 2_619, 33, 333),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_realdata_imports(realdata: Path, name: str) -> None:
    gpus, rows, low, high = EXPECTED[name]
    trace = read_trace(realdata / name)
    t = pl.from_arrow(trace.table())
    assert t["gpu"].n_unique() == gpus
    assert t.height == rows
    assert low <= t["power_w"].min() and t["power_w"].max() <= high
    # every GPU gets the same number of samples (up to a frame cut short at the end)
    counts = t.group_by("gpu").len()["len"]
    assert counts.max() - counts.min() <= 1


def test_h100_gpu0_is_the_one_with_more_memory(realdata: Path) -> None:
    """GPU identity comes from row position: GPU0 holds the most memory (SOURCES.md)."""
    path = realdata / "smi_8xH100_gpt350m_train_ckpt1000_100ms.csv"
    trace = read_trace(path)
    t = pl.from_arrow(trace.table()).sort("ts", "gpu")
    with open(path) as fh:
        rows = list(csv.reader(fh, skipinitialspace=True))[1:]
    # before training starts, only GPU0 holds memory (135 MiB against 17 MiB)
    idle = [float(r[3].split()[0]) for r in rows[:80]]
    assert {g: idle[g::8] for g in range(8)}[0] == [135.0] * 10
    assert all(set(idle[g::8]) == {17.0} for g in range(1, 8))
    # the power of row k in the file lands on GPU k % 8
    first = [float(r[1].split()[0]) for r in rows[:8]]
    got = [t.filter(pl.col("gpu") == g)["power_w"][0] for g in range(8)]
    assert got == pytest.approx(first, abs=0.01)


def test_truncated_line_and_tz(realdata: Path) -> None:
    name = "smi_4xA100-40GB_llama2-70b_infer_inputsweep_100ms.csv"
    trace = read_trace(realdata / name, ImportOptions(tz="America/Chicago"))
    assert any("truncated final line" in w for w in trace.warnings)
    first = trace.table().column("ts")[0].as_py()
    assert first.isoformat().startswith("2024-04-05T11:17:19.635")  # 06:17 CDT = 11:17 UTC


def test_midnight_crossing_and_stalls(realdata: Path) -> None:
    info = trace_info(read_trace(realdata / "smi_8xH100_gpt350m_train_ckpt10_100ms.csv"))
    assert info.start.startswith("2025-07-26T23:53")
    assert info.end.startswith("2025-07-27T00:05")
    assert 8.0 < info.max_gap_s < 9.5  # the 8.7 s checkpoint stall
    assert info.gpus == 8


def test_gaps_in_1s_log(realdata: Path) -> None:
    info = trace_info(read_trace(realdata / "smi_1xRTX4090_vlm_eval_1s_gaps.csv"))
    assert info.series[0].gaps == 86  # steps longer than 1.5 s
    assert 7.0 < info.max_gap_s < 7.5
    assert info.series[0].name == "NVIDIA GeForce RTX 4090"
    assert info.series[0].nameplate_w == 450


def _phase_energy(realdata: Path) -> list[tuple[float, float, float]]:
    with open(realdata / "smi_1xV100_falcon-7b_infer_inputsweep_PHASES_nvml_energy.csv") as fh:
        rows = list(csv.DictReader(fh))
    return [
        (float(r["Timestamp"]), float(r["Runtime (s)"]), float(r["GPU Energy (uJ)"]) / 1e6)
        for r in rows
        if r["Phase"].startswith("start-inference")
    ]


def test_energy_matches_nvml_counter_phase_by_phase(realdata: Path) -> None:
    """Trapezoid energy of the imported power log vs the workload's NVML energy deltas."""
    trace = read_trace(
        realdata / "smi_1xV100_falcon-7b_infer_inputsweep_100ms.csv",
        ImportOptions(tz="America/New_York"),
    )
    t = pl.from_arrow(trace.table())
    secs = t["ts"].dt.epoch("us").to_numpy() / 1e6
    power = t["power_w"].to_numpy().astype(float)
    ratios = []
    for start, runtime, joules in _phase_energy(realdata):
        if runtime < 5:
            continue
        sel = (secs >= start) & (secs <= start + runtime)
        integrated = np.trapezoid(power[sel], secs[sel])
        ratios.append(integrated / joules)
    assert len(ratios) >= 10
    assert 0.9 < float(np.median(ratios)) < 1.1


def test_interleaved_gpus_match_their_own_energy_counters(realdata: Path) -> None:
    """Each GPU inferred by position integrates to that GPU's NVML energy, phase by phase."""
    trace = read_trace(
        realdata / "smi_4xA100-40GB_llama2-70b_infer_inputsweep_100ms.csv",
        ImportOptions(tz="America/Chicago"),
    )
    t = pl.from_arrow(trace.table())
    with open(
        realdata / "smi_4xA100-40GB_llama2-70b_infer_inputsweep_PHASES_nvml_energy.csv"
    ) as fh:
        phases = [r for r in csv.DictReader(fh) if r["Phase"].startswith("start-inference")]
    series = {
        g: (
            t.filter(pl.col("gpu") == g)["ts"].dt.epoch("us").to_numpy() / 1e6,
            t.filter(pl.col("gpu") == g)["power_w"].to_numpy().astype(float),
        )
        for g in range(4)
    }
    ratios = []
    for row in phases:
        start, runtime = float(row["Timestamp"]), float(row["Runtime (s)"])
        if runtime < 5:
            continue
        for g, (secs, power) in series.items():
            sel = (secs >= start) & (secs <= start + runtime)
            ratios.append(
                np.trapezoid(power[sel], secs[sel]) / (float(row[f"GPU-{g} Energy (mJ)"]) / 1e3)
            )
    assert len(ratios) >= 100
    assert 0.97 < float(np.median(ratios)) < 1.03
    assert float(np.percentile(ratios, 10)) > 0.85


# ---- GridPilot NVML logs: relative times, a GPU-index column, corrupted lines --------------

MATMUL = "nvml_3xV100_matmul_100hz_reltime_corrupt.csv"
GRIDPILOT_MAP = "ts=t_s,gpu=gpu_index,power_w=power_w,gpu_util=util_gpu,temp_c=temperature_c"


def _clean_rows(path: Path, start: float) -> list[tuple[int, float, float]]:
    """The matmul log's clean rows, independently of powerkit: 13 fields, and a time in order
    with its GPU's neighbours; as (gpu, seconds after EPOCH, float32 power)."""
    from tests.analysis.test_windows import EPOCH

    with open(path, newline="") as fh:
        rows = [r for r in csv.reader(fh)][1:]
    good = [r for r in rows if len(r) == 13]
    by_gpu: dict[int, list[list[str]]] = {}
    for r in good:
        by_gpu.setdefault(int(r[1]), []).append(r)
    out = []
    for gpu, rs in by_gpu.items():
        t = [float(r[0]) for r in rs]
        for i, r in enumerate(rs):
            if 0 < i < len(rs) - 1 and t[i - 1] <= t[i + 1] and not t[i - 1] <= t[i] <= t[i + 1]:
                continue  # one corrupted time (the log's line 277)
            out.append((gpu, start + t[i] - EPOCH, float(np.float32(float(r[2])))))
    return out


def test_gridpilot_matmul_imports_with_every_bad_line_reported(
    realdata: Path, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    path = realdata / MATMUL
    start = json.loads((realdata / MATMUL.replace(".csv", ".meta.json")).read_text())[
        "start_wallclock"
    ]
    args = ["--map", GRIDPILOT_MAP, "--start", str(start)]
    r = cli("import", path, *args, "-o", tmp_path / "m.parquet")
    assert r.exit_code == 2 and "line 193" in r.stderr  # refused without --skip-bad-rows
    out = cli.json(
        "import",
        path,
        *args,
        "--skip-bad-rows",
        "--host",
        "ecocloud-exp06",
        "--gpu-name",
        "Tesla V100-SXM2-32GB",
        "-o",
        tmp_path / "m.parquet",
    )
    with open(path) as fh:
        wrong_count = [n for n, line in enumerate(fh, start=1) if line.count(",") not in (12,)]
    wrong_count = [n for n in wrong_count if n > 1]
    bad = out["bad_rows"][str(path)]
    assert len(wrong_count) == 9 and set(wrong_count) <= set(bad["lines"])
    assert bad["count"] == 10 and 277 in bad["lines"]  # + one right-length line with a wrong time
    clean = _clean_rows(path, start)
    assert out["rows"] == len(clean) == 8731

    # energy: the trapezoid over each GPU's clean samples, not across steps longer than 5
    # nominal intervals and than the sensor floor (0.1 s: docs/trace-format.md, gaps)
    steps = []
    for gpu in (0, 1, 2):
        t = np.array([x[1] for x in clean if x[0] == gpu])
        steps.append(np.diff(t))
    nominal = float(np.median(np.concatenate(steps)[np.concatenate(steps) > 0]))
    want = 0.0
    for gpu in (0, 1, 2):
        t = np.array([x[1] for x in clean if x[0] == gpu])
        p = np.array([x[2] for x in clean if x[0] == gpu])
        dt = np.diff(t)
        ok = dt <= max(5 * nominal, 0.1)
        want += float(np.sum((p[1:] + p[:-1]) / 2 * dt * ok))
    info = cli.json("info", tmp_path / "m.parquet")
    assert info["energy_j"] == pytest.approx(want, rel=1e-6)
    assert info["metadata"]["interval_s"] == pytest.approx(nominal, rel=1e-4)

    # violation rates: the window reference of test_windows on the clean rows
    from tests.analysis.test_windows import reference

    for scope, budget in (("gpu", 230.0), ("sum", 330.0)):
        doc = cli.json(
            "windows",
            tmp_path / "m.parquet",
            "--budget",
            f"{budget}W",
            "--windows",
            "0.5s,5s",
            "--scope",
            scope,
        )
        for w in doc["windows"]:
            expected = reference(clean, budget, w["window_s"], 0.5, "rolling", scope)
            assert w["positions"] == expected["positions"]
            assert w["violations"] == expected["violations"]
            assert w["violation_rate"] == pytest.approx(
                expected["violations"] / expected["positions"] if expected["positions"] else None
            )


@pytest.mark.parametrize(
    ("name", "mapping", "rows", "gpus"),
    [
        (
            "nvml_1xV100_capstep_280to200W_100hz.csv",
            "ts=t_s,gpu=gpu_index,power_w=power_w",
            8915,
            1,
        ),
        ("nvml_3xV100_budget750W_70hz.csv", "ts=t,gpu=gpu_index,power_w=power_w", 16236, 3),
    ],
)
def test_other_gridpilot_logs_import_with_map(  # type: ignore[no-untyped-def]
    realdata: Path, cli, tmp_path: Path, name: str, mapping: str, rows: int, gpus: int
) -> None:
    out = cli.json(
        "import",
        realdata / name,
        "--map",
        mapping,
        "--start",
        "1777378919.528",
        "-o",
        tmp_path / "g.parquet",
    )
    assert out["rows"] == rows and out["gpus"] == gpus
    assert out["bad_rows"][str(realdata / name)]["count"] == 0
    info = cli.json("info", tmp_path / "g.parquet")
    assert info["start"].startswith("2026-04-28T12:21:59")


def test_gapped_real_fleet_has_a_figure_at_every_window_with_fill(realdata: Path, cli) -> None:  # type: ignore[no-untyped-def]
    fleet = [
        f"{realdata / 'smi_8xH100_gpt350m_train_ckpt1000_100ms.csv'}:2",
        f"{realdata / 'smi_8xH100_gpt350m_train_ckpt10_100ms.csv'}:2",
        f"{realdata / 'smi_4xA100-40GB_llama2-70b_infer_inputsweep_100ms.csv'}:4",
    ]
    args = [
        *fleet,
        "--compose",
        "random",
        "--draws",
        "20",
        "--capacity",
        "60%",
        "--nameplate",
        "700W",
    ]
    none = cli.json("oversub", *args)
    assert none["coverage"] < 0.1 and any("no complete position" in w for w in none["warnings"])
    assert [w["peak_w"] is None for w in none["windows"]] == [False, True, True]
    held = cli.json("oversub", *args, "--fill", "hold:10s")
    assert held["coverage"] > 0.99 and all(w["peak_w"] is not None for w in held["windows"])
    assert held["fill"] == "hold:10s"


def test_real_logs_rewritten_wide_and_long_read_the_same(realdata: Path, tmp_path: Path) -> None:
    """The same real samples in the layouts other loggers write — one power column per GPU (a
    pynvml loop) and one row per field (a DCGM client) — give the same samples, energy and
    windows as the nvidia-smi log itself."""
    from powerkit.analysis.windows import windowed_violations
    from powerkit.core.units import parse_power

    def figures(trace):  # type: ignore[no-untyped-def]
        info = trace_info(trace)  # each on its own default grid and windows
        rates = windowed_violations(trace, parse_power("150W"))
        return (
            info.samples,
            round(info.energy_j, 6),
            round(info.mean_power_w, 6),
            info.grid_s,
            [(w.window, w.positions, w.violations) for w in rates.windows],
        )

    source = read_trace(realdata / "smi_2xTitanX_gpt350m_train_100ms_nounitW.csv")
    t = pl.from_arrow(source.table()).sort("gpu", "ts")
    long = tmp_path / "fields.csv"
    us = pl.col("ts").dt.epoch("us")
    rows = pl.concat(
        [
            t.select(
                pl.col("gpu").alias("GPUId"),
                us.alias("TimeStampUs"),
                pl.lit("155").alias("Field"),
                pl.col("power_w").cast(pl.Float64).alias("Values"),
            ),
            t.select(
                pl.col("gpu").alias("GPUId"),
                (us + 250_000).alias("TimeStampUs"),
                pl.lit("203").alias("Field"),
                pl.col("gpu_util").cast(pl.Float64).alias("Values"),
            ),
        ]
    ).sort("TimeStampUs")
    rows.write_csv(long)
    opts = ImportOptions(
        mapping={"ts": "TimeStampUs", "gpu": "GPUId", "power_w": "Values"},
        time_unit="us",
        where=(("Field", "155"),),
        host=source.meta.gpus[0].host,
    )
    assert figures(read_trace(long, opts)) == figures(source)

    single = read_trace(realdata / "smi_1xRTX4090_vlm_eval_1s_gaps.csv", ImportOptions(tz="UTC"))
    s = pl.from_arrow(single.table())
    wide = tmp_path / "wide.csv"
    s.select(
        pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").alias("timestamp"),
        pl.col("power_w").cast(pl.Float64).alias("GPU0"),
    ).write_csv(wide)
    read = read_trace(wide, ImportOptions(host=single.meta.gpus[0].host))
    assert figures(read) == figures(single)
