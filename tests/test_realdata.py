"""Real nvidia-smi logs from ../shared/realdata (skipped when the folder is absent)."""

from __future__ import annotations

import csv
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
