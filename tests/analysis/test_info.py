"""powerkit info: energy by trapezoid (not across long gaps) or by counter, gaps, intervals."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
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


# --- gaps against what a power sensor resolves (cells/steps.py, docs/trace-format.md) ---------


def _exact(rows: list[tuple[float, float]], *, hold: bool = False, limit_s: float = 1e9) -> float:
    """The energy of ``rows``: trapezoid (or hold) over every step of at most ``limit_s``."""
    total = 0.0
    for (t0, p0), (t1, p1) in itertools.pairwise(rows):
        dt = t1 - t0
        if dt <= limit_s:
            total += p0 * dt if hold else (p0 + p1) / 2 * dt
    return total


def test_a_fast_loggers_jitter_is_not_a_gap(tmp_path: Path) -> None:
    """A 3 ms H100-style log whose steps range from 3 to 45 ms (a busy host's logger): no
    gap, every step's energy counted (the 5-interval rule left the long steps out)."""
    rng = np.random.default_rng(0)
    steps = np.where(rng.random(2000) < 0.1, rng.uniform(0.010, 0.045, 2000), 0.003)
    t = np.concatenate(([0.0], np.cumsum(steps)))
    rows = [(round(float(x), 6), 300.0 + 100.0 * ((i // 50) % 2)) for i, x in enumerate(t)]
    s = trace_info(read_trace(csv_trace(tmp_path, rows))).series[0]
    assert s.gaps == 0
    assert s.unintegrated_s == 0
    assert s.energy_j == pytest.approx(_exact(rows), rel=1e-6)


def test_a_stall_in_a_100ms_log_stays_a_gap(tmp_path: Path) -> None:
    rows = [(0.1 * i, 200.0) for i in range(50)] + [(8.0 + 0.1 * i, 250.0) for i in range(50)]
    s = trace_info(read_trace(csv_trace(tmp_path, rows))).series[0]
    assert s.gaps == 1 and s.max_gap_s == pytest.approx(3.1)
    assert s.energy_j == pytest.approx(_exact(rows, limit_s=0.5), rel=1e-6)


def test_an_on_change_log_holds_each_value_until_the_next_line(tmp_path: Path) -> None:
    """A logger that writes a line only when NVML's reading changes (steps from 15 ms to
    0.69 s, no two lines alike): each value holds until the next line, nothing is a gap, and
    info and energy give the same joules."""
    rng = np.random.default_rng(1)
    steps = rng.choice([0.015, 0.05, 0.1, 0.3, 0.69], size=400)
    t = np.concatenate(([0.0], np.cumsum(steps)))
    power = 250.0 + np.cumsum(rng.choice([-3.0, -1.0, 1.0, 2.0], size=t.size))
    rows = [(round(float(a), 6), float(b)) for a, b in zip(t, power, strict=True)]
    path = csv_trace(tmp_path, rows)
    s = trace_info(read_trace(path)).series[0]
    assert s.gaps == 0 and s.unintegrated_s == 0
    assert s.energy_j == pytest.approx(_exact(rows, hold=True), rel=1e-6)
    from powerkit.cells.grid import reduce_raw
    from powerkit.cells.steps import is_on_change

    found = reduce_raw(read_trace(path), list, lambda acc, series: acc.append(series))
    assert [is_on_change(series) for series in found] == [True]
