"""powerkit info: energy by trapezoid (not across long gaps) or by counter, gaps, intervals."""

from __future__ import annotations

from pathlib import Path

import pytest

from powerkit.analysis.info import trace_info
from powerkit.trace import read_trace


def csv_trace(tmp_path: Path, rows: list[tuple[float, float]], energy: bool = False) -> Path:
    path = tmp_path / "t.csv"
    header = "ts,gpu,power_w" + (",energy_j" if energy else "")
    lines = [header]
    for i, (t, p) in enumerate(rows):
        lines.append(f"{1767225600 + t},0,{p}" + (f",{1000 + 7 * i}" if energy else ""))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_trapezoid_energy_skips_long_gaps(tmp_path: Path) -> None:
    # 1 s sampling at 100 W, then a 10 s gap (more than 5 intervals), then 200 W
    rows = [(float(t), 100.0) for t in range(5)] + [(14.0 + t, 200.0) for t in range(5)]
    info = trace_info(read_trace(csv_trace(tmp_path, rows)))
    s = info.series[0]
    assert s.energy_source == "trapezoid"
    assert s.energy_j == pytest.approx(4 * 100 + 4 * 200)
    assert s.gaps == 1 and s.max_gap_s == pytest.approx(10)
    assert s.interval_median_s == pytest.approx(1)
    assert info.span_s == pytest.approx(18)


def test_short_gap_is_integrated(tmp_path: Path) -> None:
    rows = [(0.0, 100.0), (1.0, 100.0), (2.0, 100.0), (5.0, 100.0), (6.0, 100.0)]
    s = trace_info(read_trace(csv_trace(tmp_path, rows))).series[0]
    assert s.energy_j == pytest.approx(600)
    assert s.gaps == 1


def test_counter_wins(tmp_path: Path) -> None:
    rows = [(float(t), 100.0) for t in range(5)]
    s = trace_info(read_trace(csv_trace(tmp_path, rows, energy=True))).series[0]
    assert s.energy_source == "counter"
    assert s.energy_j == pytest.approx(28)


def test_power_statistics(tmp_path: Path) -> None:
    rows = [(0.0, 50.0), (0.5, 150.0), (1.0, 100.0)]
    info = trace_info(read_trace(csv_trace(tmp_path, rows)))
    assert (info.min_power_w, info.mean_power_w, info.max_power_w) == (50, 100, 150)
    assert info.samples == 3 and info.gpus == 1
