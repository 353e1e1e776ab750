"""Windowed violations: the engine against a plain NumPy reference, and hand-computed edges."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from powerkit.analysis.windows import windowed_violations
from powerkit.core.errors import BadInputError
from powerkit.core.units import parse_power
from powerkit.trace import Trace, TraceMeta, read_trace, to_canonical

EPOCH = 1_767_225_600.0


def make_trace(rows: list[tuple[int, float, float]], nameplate: float | None = 400.0) -> Trace:
    """rows: (gpu, t seconds after EPOCH, power W)."""
    df = pl.DataFrame(
        {
            "ts": [round((EPOCH + t) * 1e6) for _, t, _ in rows],
            "host": ["h"] * len(rows),
            "gpu": [g for g, _, _ in rows],
            "power_w": [p for _, _, p in rows],
        }
    ).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    gpus = sorted({g for g, _, _ in rows})
    from powerkit.trace import GpuMeta

    meta = TraceMeta(source="csv", gpus=[GpuMeta("h", g, nameplate_w=nameplate) for g in gpus])
    return Trace(meta=meta, table_=to_canonical(df), origin="test")


# ---- the reference: loops over positions, straight from the definitions ---------------------


def reference_cells(rows, grid_s):  # type: ignore[no-untyped-def]
    """Return {gpu: {cell: mean}}: duplicated timestamps averaged first, then per cell."""
    by_ts: dict[tuple[int, int], list[float]] = {}
    for g, t, p in rows:
        by_ts.setdefault((g, round((EPOCH + t) * 1e6)), []).append(p)
    cells: dict[int, dict[int, list[float]]] = {}
    grid_us = round(grid_s * 1e6)
    for (g, t_us), ps in by_ts.items():
        cells.setdefault(g, {}).setdefault(t_us // grid_us, []).append(sum(ps) / len(ps))
    return {g: {k: sum(v) / len(v) for k, v in c.items()} for g, c in cells.items()}


def reference_positions(cells, n, mode, step_s):  # type: ignore[no-untyped-def]
    """Return [(mean or None, complete)] in position order."""
    first, last = min(cells), max(cells)
    need = math.ceil(0.9 * n - 1e-9)
    if mode == "rolling":
        windows = [range(k - n + 1, k + 1) for k in range(first + n - 1, last + 1)]
    else:
        windows = [range(j * n, j * n + n) for j in range(first // n, last // n + 1)]
    out = []
    for window in windows:
        vals = [cells[k] for k in window if k in cells]
        out.append((sum(vals) / len(vals) if vals else None, len(vals) >= need))
    return out


def reference(rows, budget_w, window_s, grid_s, mode, scope):  # type: ignore[no-untyped-def]
    per_gpu = reference_cells(rows, grid_s)
    if scope == "sum":
        lo = min(min(c) for c in per_gpu.values())
        hi = max(max(c) for c in per_gpu.values())
        summed = {
            k: sum(c[k] for c in per_gpu.values())
            for k in range(lo, hi + 1)
            if all(k in c for c in per_gpu.values())
        }
        series = [summed] if summed else []  # the sum spans its own present cells
    else:
        series = list(per_gpu.values())
    n = round(window_s / grid_s)
    step = grid_s if mode == "rolling" else n * grid_s
    tol = 1e-9 * max(1.0, abs(budget_w))
    stats = {
        "positions": 0,
        "violations": 0,
        "incomplete": 0,
        "max_mean_w": None,
        "excess_energy_j": 0.0,
        "longest_violation_s": 0.0,
    }
    for cells in series:
        run = 0
        for mean, complete in reference_positions(cells, n, mode, step):
            if not complete:
                stats["incomplete"] += 1
                run = 0
                continue
            stats["positions"] += 1
            top = stats["max_mean_w"]
            stats["max_mean_w"] = mean if top is None else max(top, mean)
            if mean - budget_w > tol:
                stats["violations"] += 1
                stats["excess_energy_j"] += (mean - budget_w) * step
                run += 1
                stats["longest_violation_s"] = max(stats["longest_violation_s"], run * step)
            else:
                run = 0
    return stats


def assert_matches(result, expected) -> None:  # type: ignore[no-untyped-def]
    assert result.positions == expected["positions"]
    assert result.violations == expected["violations"]
    assert result.incomplete == expected["incomplete"]
    if expected["max_mean_w"] is None:
        assert result.max_mean_w is None
    else:
        assert result.max_mean_w == pytest.approx(expected["max_mean_w"], rel=1e-9, abs=1e-6)
    assert result.excess_energy_j == pytest.approx(expected["excess_energy_j"], rel=1e-7, abs=1e-4)
    assert result.longest_violation_s == pytest.approx(expected["longest_violation_s"])
    rate = expected["violations"] / expected["positions"] if expected["positions"] else None
    assert result.violation_rate == (pytest.approx(rate) if rate is not None else None)


@st.composite
def traces(draw):  # type: ignore[no-untyped-def]
    """Random traces on a 0.5 s grid: jitter, gaps, two readings in one cell, several GPUs."""
    gpus = draw(st.integers(1, 3))
    rows = []
    for g in range(gpus):
        n = draw(st.integers(1, 120))
        interval = draw(st.sampled_from([0.25, 0.4, 0.5]))
        start = draw(st.floats(0, 3, allow_nan=False))
        jitter = draw(st.floats(0, 0.2))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        t = start + interval * np.arange(n) + rng.uniform(0, jitter * interval, n)
        keep = rng.random(n) > draw(st.sampled_from([0.0, 0.05, 0.3]))
        keep[0] = True
        power = np.round(rng.uniform(50, 400, n) * 4) / 4  # multiples of 0.25 W
        for ti, pi in zip(t[keep], power[keep], strict=True):
            rows.append((g, float(round(ti, 6)), float(pi)))
        if draw(st.booleans()):  # a second reading 1 ms later, mostly in the same cell
            # (a repeated timestamp itself is refused: rows of one GPU at one time are never
            # merged, see test_layouts)
            g0, t0, _ = rows[-1]
            rows.append((g0, round(t0 + 0.001, 6), float(np.round(rng.uniform(50, 400) * 4) / 4)))
    return rows


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=traces(),
    budget=st.sampled_from([150.013, 225.013, 300.013]),
    window=st.sampled_from([0.5, 1.0, 2.5, 5.0, 10.0]),
    mode=st.sampled_from(["rolling", "tumbling"]),
    scope=st.sampled_from(["gpu", "sum"]),
)
def test_engine_matches_reference(rows, budget, window, mode, scope) -> None:  # type: ignore[no-untyped-def]
    total_budget = budget * (3 if scope == "sum" else 1)
    trace = make_trace(rows)
    run = lambda: windowed_violations(  # noqa: E731
        trace, parse_power(f"{total_budget}W"), [window], mode=mode, scope=scope, grid_s=0.5
    )
    if coarser_than_grid(rows, 0.5):
        with pytest.raises(BadInputError, match="more coarsely than the 500ms grid"):
            run()
        return
    expected = reference(rows, total_budget, window, 0.5, mode, scope)
    assert_matches(run().windows[0], expected)


def coarser_than_grid(rows, grid_s: float) -> bool:  # type: ignore[no-untyped-def]
    """The refusal rule: some series' median time step exceeds 1.1 grid cells."""
    for g in {r[0] for r in rows}:
        t = np.sort([round((EPOCH + r[1]) * 1e6) for r in rows if r[0] == g])
        if t.size > 1 and np.median(np.diff(t)) / 1e6 > 1.1 * grid_s:
            return True
    return False


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=traces(), mode=st.sampled_from(["rolling", "tumbling"]))
def test_unsorted_parquet_is_sorted_first(tmp_path_factory, rows, mode) -> None:  # type: ignore[no-untyped-def]
    """A Parquet file in no particular order (no index) gives the same answer."""
    assume(not coarser_than_grid(rows, 0.5))
    trace = make_trace(rows)
    shuffled = trace.table().take(np.random.default_rng(0).permutation(trace.table().num_rows))
    path = tmp_path_factory.mktemp("unsorted") / "t.parquet"
    pq.write_table(shuffled, path)
    loose = read_trace(path)
    assert loose.series_runs() is None
    a = windowed_violations(trace, parse_power("225.013W"), [2.5], mode=mode)
    b = windowed_violations(loose, parse_power("225.013W"), [2.5], mode=mode)
    assert a.windows == b.windows


def test_a_foreign_sorted_file_is_cut_where_the_gpu_changes(tmp_path: Path) -> None:
    """A Parquet file of one host in (gpu, ts) order, without powerkit's index: its series are
    cut where the GPU changes (the footer says one host: no counting pass), including a series
    longer than a scan batch; the figures equal the canonical trace's. Two hosts in the footer
    are counted instead, with the same figures."""
    rng = np.random.default_rng(3)
    rows = [(g, 0.1 * i, float(rng.uniform(100, 400))) for g in (0, 1, 5) for i in range(70_000)]
    trace = make_trace(rows)
    path = tmp_path / "foreign.parquet"
    pq.write_table(trace.table(), path, row_group_size=50_000)
    loose = read_trace(path)
    assert loose.series_runs() is None and loose.one_host == "h"
    windows = [0.5, 30.0]
    expected = windowed_violations(trace, parse_power("300W"), windows).windows
    assert windowed_violations(loose, parse_power("300W"), windows).windows == expected
    table = trace.table()
    two = table.set_column(
        1, "host", pa.array(["a"] * 70_000 + ["b"] * (table.num_rows - 70_000), pa.string())
    )
    pq.write_table(two, path)
    hosts = read_trace(path)
    assert hosts.one_host is None
    got = windowed_violations(hosts, parse_power("300W"), windows).windows
    assert [w.positions for w in got] == [w.positions for w in expected]
    assert [w.violations for w in got] == [w.violations for w in expected]


# ---- edges, computed by hand ---------------------------------------------------------------


def test_constant_power_exactly_at_budget_never_violates() -> None:
    trace = make_trace([(0, 0.5 * i, 300.0) for i in range(100)])
    w = windowed_violations(trace, parse_power("300W"), [0.5, 5.0]).windows
    assert [x.violations for x in w] == [0, 0]
    assert [x.positions for x in w] == [100, 91]
    assert w[0].max_mean_w == 300.0


@pytest.mark.parametrize("budget", [287.98, 300.013, 151.7, 0.1])
def test_float32_stored_sample_at_budget_never_violates(budget: float) -> None:
    """power_w is float32: 287.98 W reads back as 287.980011 W, still not above 287.98 W."""
    assert float(np.float32(287.98)) > 287.98  # the case this guards against
    trace = make_trace([(0, 0.5 * i, budget) for i in range(40)])
    for scope in ("gpu", "sum"):
        w = windowed_violations(trace, parse_power(f"{budget}W"), [0.5, 5.0], scope=scope)
        assert [x.violations for x in w.windows] == [0, 0]


def test_window_longer_than_trace_has_no_positions() -> None:
    trace = make_trace([(0, 0.5 * i, 350.0) for i in range(10)])
    w = windowed_violations(trace, parse_power("300W"), [30.0]).windows[0]
    assert (w.positions, w.violations, w.incomplete) == (0, 0, 0)
    assert w.violation_rate is None and w.max_mean_w is None
    t = windowed_violations(trace, parse_power("300W"), [30.0], mode="tumbling").windows[0]
    assert (t.positions, t.incomplete) == (0, 1)  # one 60-cell block, 10 cells present


def test_single_sample() -> None:
    trace = make_trace([(0, 0.1, 320.0)])
    w = windowed_violations(trace, parse_power("300W"), [0.5]).windows[0]
    assert (w.positions, w.violations) == (1, 1)
    assert w.excess_energy_j == pytest.approx(20 * 0.5)
    assert w.longest_violation_s == 0.5


def test_hand_computed_rolling_and_tumbling() -> None:
    # cells 0..5 at 100, 400, 400, 100, 400, missing; window 1 s = 2 cells, budget 300 W
    rows = [
        (0, 0.0, 100.0),
        (0, 0.5, 400.0),
        (0, 1.0, 400.0),
        (0, 1.5, 100.0),
        (0, 2.0, 400.0),
        (0, 3.0, 100.0),
    ]
    r = windowed_violations(make_trace(rows), parse_power("300W"), [1.0]).windows[0]
    # positions end at cells 1..6: means 250, 400, 250, 250, (400: 1 of 2 cells), 100
    # completeness needs ceil(1.8) = 2 cells, so the window ending at cell 5 (one present) and
    # at cell 6 (cells 5 missing) are incomplete
    assert (r.positions, r.violations, r.incomplete) == (4, 1, 2)
    assert r.max_mean_w == 400.0
    assert r.excess_energy_j == pytest.approx(100 * 0.5)
    t = windowed_violations(make_trace(rows), parse_power("300W"), [1.0], mode="tumbling")
    tw = t.windows[0]  # blocks {0,1}: 250, {2,3}: 250, {4,5}: incomplete, {6}: incomplete
    assert (tw.positions, tw.violations, tw.incomplete) == (2, 0, 2)


def test_sum_scope_needs_every_gpu() -> None:
    rows = [(0, 0.5 * i, 200.0) for i in range(8)] + [(1, 0.5 * i, 150.0) for i in range(2, 8)]
    r = windowed_violations(make_trace(rows), parse_power("340W"), [0.5], scope="sum").windows[0]
    assert (r.positions, r.violations, r.incomplete) == (6, 6, 0)  # the sum starts at cell 2
    assert r.max_mean_w == 350.0
    pct = windowed_violations(make_trace(rows), parse_power("40%"), [0.5], scope="sum")
    assert pct.budget_w == 320.0  # 40 % of two 400 W nameplates


def test_coarse_trace_is_refused_unless_grid_is_raised() -> None:
    trace = make_trace([(0, 1.0 * i, 300.0) for i in range(30)])
    with pytest.raises(BadInputError, match=r"more coarsely than the 500ms grid .*; use grid_s 1s"):
        windowed_violations(trace, parse_power("250W"), [5.0])
    ok = windowed_violations(trace, parse_power("250W"), [5.0], grid_s=1.0).windows[0]
    assert ok.violations == ok.positions == 26


def test_percent_budget_needs_a_nameplate() -> None:
    trace = make_trace([(0, 0.5 * i, 300.0) for i in range(4)], nameplate=None)
    with pytest.raises(BadInputError, match="nameplate"):
        windowed_violations(trace, parse_power("80%"), [0.5])


def test_window_shorter_than_grid() -> None:
    trace = make_trace([(0, 0.5 * i, 300.0) for i in range(4)])
    with pytest.raises(BadInputError, match="shorter than the 500ms grid"):
        windowed_violations(trace, parse_power("80%"), [0.2])


def test_canonical_file_uses_its_index(tmp_path: Path) -> None:
    from powerkit.trace import write_trace

    trace = make_trace([(g, 0.5 * i, 100.0 + g) for g in range(3) for i in range(50)])
    write_trace(trace.table(), trace.meta, tmp_path / "c.parquet")
    back = read_trace(tmp_path / "c.parquet")
    assert back.series_runs() == [("h", 0, 50), ("h", 1, 50), ("h", 2, 50)]
    a = windowed_violations(back, parse_power("101W"), [1.0]).windows[0]
    assert (a.positions, a.violations) == (3 * 49, 49)
    _ = pa  # the Arrow module is used by the unsorted-file test
