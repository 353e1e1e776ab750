"""powerkit oversub: fleet composition, peaks and safe oversubscription."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from powerkit.analysis.fleet import compose_fleet
from powerkit.core.errors import BadInputError
from powerkit.core.units import parse_power
from powerkit.trace.arguments import parse_member
from tests.analysis.test_windows import make_trace
from tests.conftest import Cli


def square(gpu: int, cells: int, high_first: bool) -> list[tuple[int, float, float]]:
    """400 W for the first (or second) half of every 20-cell period, 100 W otherwise."""
    out = []
    for i in range(cells):
        high = (i % 20 < 10) == high_first
        out.append((gpu, 0.5 * i, 400.0 if high else 100.0))
    return out


def test_aligned_identical_members_peak_at_their_own_peak() -> None:
    trace = make_trace(square(0, 400, True))
    report, _ = compose_fleet([(trace, 3)], [0.5, 10.0], compose="aligned")
    assert report.gpus == 3 and report.fleet_nameplate_w == 1200
    w05, w10 = report.windows
    assert w05.peak_w == pytest.approx(1200.0) and w05.peak_fraction == pytest.approx(1.0)
    assert w10.peak_w == pytest.approx(3 * 250.0)  # a 20-cell window averages the square wave
    assert w10.safe_oversubscription == pytest.approx(1 / 0.625)


def test_staggered_spreads_members_evenly() -> None:
    # Two members, a 400-cell horizon: staggered offsets 0 and 200 (= 10 periods) keep them in
    # phase; members in antiphase sum to 500 W flat.
    a = make_trace(square(0, 400, True) + square(1, 400, False))
    report, _ = compose_fleet([(a, 1)], [0.5], compose="staggered")
    assert report.windows[0].peak_w == pytest.approx(500.0)


def test_random_draws_are_seeded_and_summarized() -> None:
    trace = make_trace(square(0, 400, True))
    one, first = compose_fleet([(trace, 8)], [0.5, 5.0], compose="random", draws=50, seed=3)
    two, _ = compose_fleet([(trace, 8)], [0.5, 5.0], compose="random", draws=50, seed=3)
    assert one == two and one.draws == 50
    w = one.windows[0]
    assert w.peak_fraction_p50 <= w.peak_fraction_p95 <= w.peak_fraction_max <= 1.0
    assert w.peak_fraction == w.peak_fraction_p95  # the headline is the p95 over draws
    _, other = compose_fleet([(trace, 8)], [0.5], compose="random", draws=50, seed=4)
    assert not np.array_equal(other.power_w, first.power_w)


def test_capacity_margin_and_horizon() -> None:
    short = make_trace([(0, 0.5 * i, 300.0) for i in range(100)])
    long = make_trace([(0, 0.5 * i, 200.0) for i in range(300)])
    report, timeline = compose_fleet(
        [(short, 1), (long, 1)], [0.5], capacity=parse_power("60%"), margin=0.25
    )
    assert report.horizon_s == 50.0 and timeline.power_w.size == 100  # the shortest member
    w = report.windows[0]
    assert w.peak_fraction == pytest.approx(500 / 800)
    assert w.safe_oversubscription == pytest.approx(1 / (0.625 * 1.25))
    assert report.capacity_w == pytest.approx(480.0)
    assert w.capacity_violation_rate == pytest.approx(1.0)


def test_missing_cells_make_fleet_cells_missing() -> None:
    gappy = make_trace([(0, 0.5 * i, 300.0) for i in range(40) if i % 4])
    report, timeline = compose_fleet([(gappy, 2)], [0.5, 2.0])
    assert not timeline.present.all()
    assert report.windows[0].peak_w == pytest.approx(600.0)
    assert report.windows[1].peak_w is None  # every 2 s window misses a cell: never complete


def test_window_longer_than_horizon() -> None:
    report, _ = compose_fleet([(make_trace([(0, 0.5 * i, 1.0) for i in range(10)]), 1)], [60.0])
    assert report.windows[0].peak_w is None and report.windows[0].safe_oversubscription is None


def test_nameplate_needed_and_overridable() -> None:
    trace = make_trace([(0, 0.5 * i, 100.0) for i in range(10)], nameplate=None)
    with pytest.raises(BadInputError, match=r"unknown \(give nameplate_w\)"):
        compose_fleet([(trace, 1)], [0.5])
    report, _ = compose_fleet([(trace, 1)], [0.5], nameplate_w=200.0)
    assert report.windows[0].peak_fraction == pytest.approx(0.5)


def test_member_syntax(tmp_path: Path) -> None:
    assert parse_member("a.parquet:4") == (Path("a.parquet"), 4, None)
    assert parse_member("a.parquet") == (Path("a.parquet"), 1, None)
    assert parse_member("a.parquet:4@700W") == (Path("a.parquet"), 4, 700.0)
    assert parse_member("a.parquet@0.4kW") == (Path("a.parquet"), 1, 400.0)
    with pytest.raises(BadInputError, match="PATH\\[:COUNT\\]\\[@NAMEPLATE\\]"):
        parse_member("a.parquet:2@80%")
    with pytest.raises(BadInputError):
        parse_member("a.parquet:0")
    with pytest.raises(BadInputError, match="whole number"):
        parse_member("a.parquet:two")


def test_cli_oversub_json_and_html(cli: Cli, tmp_path: Path) -> None:
    samples = Path(__file__).resolve().parents[2] / "sample_data"
    html = tmp_path / "fleet.html"
    out = cli.json(
        "oversub",
        f"{samples / 'a100-72b-tp4.parquet'}:2",
        f"{samples / 'a100-14b.parquet'}:2",
        f"{samples / 'a100-7b.parquet'}:4",
        "--windows",
        "0.5s,30s,5m",
        "--compose",
        "random",
        "--draws",
        "20",
        "--capacity",
        "60%",
        "--margin",
        "5%",
        "--html",
        html,
    )
    assert out["gpus"] == 16 and out["nameplate_w"] == 400 and out["fleet_nameplate_w"] == 6400
    assert (out["compose"], out["draws"], out["seed"]) == ("random", 20, 0)
    fractions = [w["peak_fraction"] for w in out["windows"]]
    assert fractions == sorted(fractions, reverse=True)  # longer windows, lower peaks
    assert fractions[1] < 0.7  # the 30 s peak is well under nameplate
    for w in out["windows"]:
        assert set(w) >= {
            "window",
            "window_s",
            "peak_w",
            "peak_fraction",
            "safe_oversubscription",
            "peak_fraction_p50",
            "peak_fraction_p95",
            "peak_fraction_max",
            "capacity_violation_rate",
        }
    assert "Cumulative distribution" in html.read_text()


def test_cli_windows_json(cli: Cli) -> None:
    samples = Path(__file__).resolve().parents[2] / "sample_data"
    out = cli.json(
        "windows",
        samples / "a100-72b-tp4.parquet",
        "--budget",
        "237.5W",
        "--windows",
        "0.5s,30s,5m",
    )
    assert list(out) == [
        "kind",
        "version",
        "budget_w",
        "mode",
        "scope",
        "grid_s",
        "series",
        "windows",
        "fill",
        "power_semantics",
        "trace",
        "coverage",
        "series_coverage",
        "warnings",
        "at_limit_share",
        "limit_known_s",
        "throttled_share",
        "reasons_known_s",
    ]
    assert out["trace"].endswith("a100-72b-tp4.parquet")
    assert out["series"] == 4 and out["budget_w"] == 237.5
    assert out["fill"] == "none" and out["power_semantics"] == "sim_instant"
    assert out["coverage"] == 1.0 and out["warnings"] == []
    assert [c["coverage"] for c in out["series_coverage"]] == [1.0] * 4
    rates = [w["violation_rate"] for w in out["windows"]]
    assert rates[0] > rates[1] > rates[2] == 0.0  # transients vanish at longer windows
    assert set(out["windows"][0]) == {
        "window",
        "window_s",
        "cells",
        "positions",
        "violations",
        "violation_rate",
        "violation_rate_low",
        "violation_rate_high",
        "supported",
        "max_mean_w",
        "incomplete",
        "excess_energy_j",
        "longest_violation_s",
        "coverage",
    }


def test_cli_windows_bad_inputs(cli: Cli, tmp_path: Path) -> None:
    samples = Path(__file__).resolve().parents[2] / "sample_data"
    r = cli("windows", samples / "a100-7b.parquet", "--budget", "300", "--windows", "30s")
    assert r.exit_code == 2 and "add a unit" in r.stderr
    r = cli("windows", samples / "a100-7b.parquet", "--budget", "300W", "--mode", "sliding")
    assert r.exit_code == 2 and "'sliding' is not one of 'rolling', 'tumbling'" in r.stderr
    r = cli("oversub", str(tmp_path / "none.parquet"))
    assert r.exit_code == 2 and "no such file" in r.stderr
    json.dumps(np.zeros(1).tolist())


def _independent_aligned_peaks(members, windows_cells):  # type: ignore[no-untyped-def]
    """Aligned fleet peaks straight from the definition: members on their own first cell, the
    horizon the shortest member, a fleet cell present only where every member is, the peak the
    largest rolling mean over positions with at least ceil(0.9 n) present cells."""
    horizon = min(len(m) for m in members)
    fleet = []
    for k in range(horizon):
        cells = [m[k] for m in members]
        fleet.append(None if any(c is None for c in cells) else sum(cells))
    peaks = []
    for n in windows_cells:
        best = None
        for end in range(n - 1, horizon):
            vals = [fleet[k] for k in range(end - n + 1, end + 1) if fleet[k] is not None]
            if vals and len(vals) >= -(-9 * n // 10):
                mean = sum(vals) / len(vals)
                best = mean if best is None else max(best, mean)
        peaks.append(best)
    return peaks


@st.composite
def gapped_members(draw):  # type: ignore[no-untyped-def]
    """1-4 GPU series of 20-80 cells with up to 4 holes of 1-12 missing cells each (the first
    and last cells present, as a series runs from its first to its last sample)."""
    members = []
    for _ in range(draw(st.integers(1, 4))):
        length = draw(st.integers(20, 80))
        cells = draw(st.lists(st.integers(50, 400), min_size=length, max_size=length))
        out: list[float | None] = [float(c) for c in cells]
        for _ in range(draw(st.integers(0, 4))):
            start = draw(st.integers(1, length - 2))
            for k in range(start, min(start + draw(st.integers(1, 12)), length - 1)):
                out[k] = None
        # Mostly present, as a real log is (a log sampled more coarsely than the grid is refused).
        assume(sum(c is not None for c in out) >= 0.7 * length)
        members.append(out)
    return members


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members=gapped_members())
def test_aligned_gapped_members_match_an_independent_computation(members) -> None:  # type: ignore[no-untyped-def]
    rows = [
        (g, 0.5 * k + 0.1, float(p))
        for g, cells in enumerate(members)
        for k, p in enumerate(cells)
        if p is not None
    ]
    trace = make_trace(rows)
    windows = [0.5, 2.5, 5.0]
    report, _ = compose_fleet([(trace, 1)], windows, compose="aligned")
    expected = _independent_aligned_peaks(members, [1, 5, 10])
    for got, want in zip(report.windows, expected, strict=True):
        if want is None:
            assert got.peak_w is None
        else:
            assert got.peak_w == pytest.approx(want, rel=1e-6)
