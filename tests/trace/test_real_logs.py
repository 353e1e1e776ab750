"""What real logs bring: corrupted lines, wild times, relative times, gaps, averaged power,
zoneless times, time slices, and settings that are not repeats."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from powerkit.analysis.info import trace_info
from powerkit.analysis.windows import windowed_violations
from powerkit.cells.fill import FillPolicy, fill_cells, parse_fill
from powerkit.core.errors import BadInputError
from powerkit.core.units import parse_power
from powerkit.trace import ImportOptions, read_trace
from powerkit.trace.semantics import usage_semantics
from tests.analysis.test_windows import EPOCH, make_trace
from tests.conftest import Cli

HEADER = "t_s,gpu_index,power_w,sm_clock_mhz"


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def steady(n: int, gpus: int = 1, dt: float = 0.01, watts: float = 100.0) -> list[str]:
    return [f"{i * dt:.4f},{g},{watts + g:.2f},1500" for i in range(n) for g in range(gpus)]


MAP = "ts=t_s,gpu=gpu_index,power_w=power_w"


# ---- corrupted lines: a wrong field count is a bad row, always -----------------------------


def test_merged_lines_are_bad_rows_not_truncated(cli: Cli, tmp_path: Path) -> None:
    lines = [HEADER, *steady(300)]
    lines[50] = "0.4900,0,100.00,15000.5000,0,100.00,1500"  # two writers' lines merged
    lines[120] = "1.1900,0,100.00"  # cut short
    path = write(tmp_path / "log.csv", lines)
    r = cli("info", path, "--map", MAP, "--start", "2026-04-28T00:00:00Z")
    assert r.exit_code == 2
    assert "line 51: 7 fields, the header has 4" in r.stderr and "1 more bad row" in r.stderr
    out = cli.json(
        "import",
        path,
        "--map",
        MAP,
        "--start",
        "2026-04-28T00:00:00Z",
        "--skip-bad-rows",
        "-o",
        tmp_path / "t.parquet",
    )
    bad = out["bad_rows"][str(path)]
    assert bad["count"] == 2 and bad["lines"] == [51, 121]
    assert out["rows"] == 298


def test_smi_log_with_a_merged_line_is_refused(cli: Cli, tmp_path: Path) -> None:
    rows = [
        f"2026/01/01 00:00:{i // 10:02d}.{i % 10}00, 0, {100 + i % 7:.2f} W" for i in range(200)
    ]
    rows[40] = rows[40] + ", 2026/01/01 00:00:04.100, 0"
    path = write(tmp_path / "smi.csv", ["timestamp, index, power.draw [W]", *rows])
    r = cli("info", path, "--tz", "UTC")
    assert r.exit_code == 2 and "line 42: 5 fields, the header has 3" in r.stderr
    info = cli.json("info", path, "--tz", "UTC", "--skip-bad-rows")
    assert info["samples"] == 199 and info["bad_rows"]["lines"] == [42]


def test_a_wild_time_is_reported_not_integrated(tmp_path: Path) -> None:
    """A corrupted time with the right field count must not make a gap of minutes."""
    lines = [HEADER, *steady(500, gpus=2)]
    lines[201] = "5299.0000,1,100.00,1500"  # GPU 1, in the middle of a 5 s run
    path = write(tmp_path / "log.csv", lines)
    opts = ImportOptions(
        mapping={"ts": "t_s", "gpu": "gpu_index", "power_w": "power_w"}, start="1777394666.994"
    )
    with pytest.raises(BadInputError, match="line 202: time out of order"):
        read_trace(path, opts)
    opts.skip_bad_rows = True
    trace = read_trace(path, opts)
    assert trace.bad_rows == [(202, "time out of order within its series (one sample off)")]
    info = trace_info(trace)
    assert info.span_s < 5.0
    # 100 W (GPU 0) + 101 W (GPU 1) over ~5 s: no 87-minute step integrated
    assert info.energy_j == pytest.approx(100 * 4.99 + 101 * 4.99, rel=0.01)


def test_a_time_far_outside_the_run_is_reported(tmp_path: Path) -> None:
    lines = [HEADER, *steady(500, gpus=2), "5299.0000,2,60.00,1500", "5299.0100,2,60.00,1500"]
    path = write(tmp_path / "log.csv", lines)
    opts = ImportOptions(
        mapping={"ts": "t_s", "gpu": "gpu_index", "power_w": "power_w"},
        start="1777394666.994",
        skip_bad_rows=True,
    )
    trace = read_trace(path, opts)
    assert [n for n, _ in trace.bad_rows] == [1002, 1003]
    assert "outside the rest of the run" in trace.bad_rows[0][1]
    assert trace.table().column("gpu").to_numpy().max() == 1


def test_gaps_are_judged_against_the_file_interval(tmp_path: Path) -> None:
    """A three-sample series 1 s apart in a 100 Hz file has two gaps (its own median is 1 s)."""
    lines = [
        HEADER,
        *steady(400),
        "0.0000,1,50.00,1500",
        "1.0000,1,50.00,1500",
        "2.0000,1,50.00,1500",
    ]
    opts = ImportOptions(
        mapping={"ts": "t_s", "gpu": "gpu_index", "power_w": "power_w"}, start="1777394666.994"
    )
    info = trace_info(read_trace(write(tmp_path / "log.csv", lines), opts))
    short = info.series[1]
    assert short.interval_median_s == pytest.approx(0.01)
    assert short.gaps == 2 and short.energy_j == 0.0 and short.unintegrated_s == 2.0


# ---- relative times, units, --format -------------------------------------------------------


def test_start_anchors_relative_times(cli: Cli, tmp_path: Path) -> None:
    path = write(tmp_path / "rel.csv", ["ts,gpu,power_w", "0,0,100", "0.5,0,110", "1.0,0,120"])
    info = cli.json("info", path, "--start", "2026-04-28T16:44:26Z")
    assert info["start"] == "2026-04-28T16:44:26Z" and info["end"] == "2026-04-28T16:44:27Z"
    info = cli.json("info", path, "--start", "1777394666")
    assert info["start"] == "2026-04-28T16:44:26Z"
    r = cli("info", path)
    assert r.exit_code == 0 and "give --start" in r.stderr  # 1970 is said, not silent


def test_time_and_power_units(cli: Cli, tmp_path: Path) -> None:
    path = write(
        tmp_path / "ms.csv", ["when,card,mw", "1777394666000,3,100000", "1777394666500,3,110000"]
    )
    info = cli.json(
        "info",
        path,
        "--map",
        "ts=when,gpu=card,power_w=mw",
        "--time-unit",
        "ms",
        "--power-unit",
        "mW",
    )
    assert info["series"][0]["gpu"] == 3 and info["max_power_w"] == pytest.approx(110.0)
    assert info["start"] == "2026-04-28T16:44:26Z"
    withunit = write(tmp_path / "kw.csv", ["ts,power_w", "1777394666,0.1 kW", "1777394667,100 W"])
    assert cli.json("info", withunit)["min_power_w"] == pytest.approx(100.0)
    r = cli("info", path, "--map", "ts=when,power_w=nope")
    assert r.exit_code == 2 and "nope" in r.stderr


def test_format_is_used_not_only_validated(cli: Cli, tmp_path: Path, realdata: Path) -> None:
    log = realdata / "smi_1xV100_falcon-7b_infer_inputsweep_100ms.csv"
    r = cli("import", log, "--format", "dcgm", "-o", tmp_path / "x.parquet")
    assert r.exit_code == 2 and "DCGM" in r.stderr and not (tmp_path / "x.parquet").exists()
    out = cli.json("import", log, "--format", "nvidia-smi", "-o", tmp_path / "y.parquet")
    assert out["formats"] == ["nvidia-smi"]


# ---- gap fill -------------------------------------------------------------------------------


def reference_fill(cells: list[float | None], kind: str, limit: int) -> list[float | None]:
    out = list(cells)
    i = 0
    while i < len(cells):
        if cells[i] is not None:
            i += 1
            continue
        j = i
        while j < len(cells) and cells[j] is None:
            j += 1
        if i > 0 and j < len(cells) and j - i <= limit:
            a, b = cells[i - 1], cells[j]
            assert a is not None and b is not None
            for k in range(i, j):
                out[k] = a if kind == "hold" else a + (b - a) * (k - i + 1) / (j - i + 1)
        i = j
    return out


@settings(max_examples=200, deadline=None)
@given(
    cells=st.lists(st.one_of(st.none(), st.integers(0, 500).map(float)), min_size=1, max_size=60),
    kind=st.sampled_from(["hold", "linear"]),
    limit=st.integers(0, 8),
)
def test_fill_matches_the_definition(cells, kind, limit) -> None:  # type: ignore[no-untyped-def]
    values = np.array([0.0 if c is None else c for c in cells])
    present = np.array([c is not None for c in cells])
    policy = FillPolicy(kind, limit * 0.5)
    out, mask, filled = fill_cells(values, present, policy, 0.5)
    want = reference_fill(cells, kind, limit)
    assert mask.tolist() == [w is not None for w in want]
    assert filled == sum(w is not None for w in want) - sum(present)
    for got, w in zip(out.tolist(), want, strict=True):
        if w is not None:
            assert got == pytest.approx(w)
    assert values.tolist() == [0.0 if c is None else c for c in cells]  # input untouched


def test_parse_fill() -> None:
    assert str(parse_fill("none")) == "none" and str(parse_fill("hold:10s")) == "hold:10s"
    assert parse_fill("linear:2s").max_cells(0.5) == 4
    for bad in ("hold", "hold:", "zero:1s", "hold:10"):
        with pytest.raises(BadInputError):
            parse_fill(bad)


def test_windows_fill_and_coverage_by_hand() -> None:
    # cells 0..9: 100 W, cells 3-4 missing (1 s), cells 7-9 missing before a last cell 10
    rows = [(0, 0.5 * k, 100.0 + 10 * k) for k in (0, 1, 2, 5, 6, 10)]
    trace = make_trace(rows)
    none = windowed_violations(trace, parse_power("1000W"), [1.0])
    assert none.coverage == pytest.approx(6 / 11)
    assert none.series_coverage[0].present == 6 and none.series_coverage[0].filled == 0
    hold = windowed_violations(trace, parse_power("1000W"), [1.0], fill=parse_fill("hold:1s"))
    assert hold.coverage == pytest.approx(8 / 11) and hold.fill == "hold:1s"
    # windows of 2 cells end at cells 1..10; complete where both present: 0-1-2-3-4-5-6
    assert hold.windows[0].positions == 6 and hold.windows[0].incomplete == 4
    assert hold.windows[0].max_mean_w == pytest.approx((150 + 160) / 2)
    linear = windowed_violations(trace, parse_power("1000W"), [0.5], fill=parse_fill("linear:2s"))
    assert linear.coverage == 1.0 and linear.windows[0].max_mean_w == pytest.approx(200.0)


def test_low_coverage_warning_names_the_worst_series() -> None:
    rows = [(0, 0.5 * k, 100.0) for k in range(200) if k % 10 < 5 or k == 199] + [
        (1, 0.5 * k, 100.0) for k in range(200) if k % 10 < 3 or k == 199
    ]
    report = windowed_violations(make_trace(rows), parse_power("300W"), [0.5, 30.0])
    assert report.coverage == pytest.approx((101 + 61) / 400)
    assert len(report.warnings) == 1
    line = report.warnings[0]
    assert "no complete position at 30s" in line and "coverage 40.5 %" in line
    assert "gpu=1 (139 of 200" in line and "try fill hold:10s" in line
    filled = windowed_violations(
        make_trace(rows), parse_power("300W"), [0.5, 30.0], fill=parse_fill("hold:5s")
    )
    assert filled.coverage == 1.0 and filled.warnings == []


# ---- power semantics and zones --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("NVIDIA H100 80GB HBM3", "average_1s"),
        ("NVIDIA GeForce RTX 4090", "average_1s"),
        ("NVIDIA A10G", "average_1s"),
        ("NVIDIA A100-SXM4-40GB", "instant"),
        ("Tesla V100-SXM2-32GB", "instant"),
        (None, "nvml_usage"),
    ],
)
def test_usage_semantics_follow_the_gpu_model(name: str | None, kind: str) -> None:
    assert usage_semantics(name) == kind


def test_averaged_power_warns_on_short_windows(cli: Cli, realdata: Path) -> None:
    log = realdata / "smi_1xRTX4090_vlm_eval_1s_gaps.csv"
    info = cli.json("info", log)
    assert info["power_semantics"] == "average_1s"
    r = cli("windows", log, "--budget", "300W", "--windows", "0.5s,30s", "--grid", "1s", "--json")
    assert r.exit_code == 2  # a 0.5 s window is shorter than the 1 s grid
    r = cli("windows", log, "--budget", "300W", "--windows", "1s,30s", "--grid", "1s", "--json")
    doc = json.loads(r.stdout)
    assert doc["power_semantics"] == "average_1s" and not any(
        "average" in w for w in doc["warnings"]
    )
    # The V100 log does not name its GPU: its power may be a 1 s average, and 0.5 s is shorter.
    v100 = realdata / "smi_1xV100_falcon-7b_infer_inputsweep_100ms.csv"
    r = cli("windows", v100, "--budget", "200W", "--windows", "0.5s,30s", "--tz", "UTC")
    assert r.exit_code == 0
    warned = [ln for ln in r.stderr.splitlines() if "average" in ln]
    assert len(warned) == 1 and "may be a 1s average" in warned[0]
    assert "windows 500ms are shorter" in warned[0]


def test_zoneless_times_are_said_and_stored(cli: Cli, realdata: Path) -> None:
    log = realdata / "smi_1xV100_falcon-7b_infer_inputsweep_100ms.csv"
    r = cli("info", log)
    assert "timestamps carry no zone; read as UTC" in r.stderr
    info = cli.json("info", log, "--tz", "America/New_York")
    assert info["tz"] == "America/New_York" and info["start"].startswith("2024-03-29T15:16:49")
    r = cli("info", log, "--tz", "America/New_York")
    assert "carry no zone" not in r.stderr


# ---- time slices -----------------------------------------------------------------------------


def test_from_to_slice_every_reader(cli: Cli, tmp_path: Path) -> None:
    rows = [(0, 0.5 * k, 100.0 + k / 5) for k in range(1200)]  # 10 minutes
    parquet = tmp_path / "t.parquet"
    from powerkit.trace import write_trace

    trace = make_trace(rows)
    write_trace(trace.table(), trace.meta, parquet)
    whole = cli.json("info", parquet)
    part = cli.json("info", parquet, "--from", "+1m", "--to", "-1m")
    # [from, to): from the first sample + 1 min up to (not including) the last sample - 1 min
    assert part["samples"] == 959 and part["start"] == "2026-01-01T00:01:00Z"
    iso = cli.json("info", parquet, "--from", "2026-01-01T00:09:00Z")
    assert iso["samples"] == 120 and whole["samples"] == 1200
    w = cli.json("windows", parquet, "--budget", "1000W", "--windows", "0.5s", "--to", "+10s")
    assert w["windows"][0]["positions"] == 20
    r = cli("info", parquet, "--from", "2030-01-01T00:00:00Z")
    assert r.exit_code == 2 and "no samples between --from and --to" in r.stderr
    r = cli("info", parquet, "--from", "soon")
    assert r.exit_code == 2 and "--from 'soon'" in r.stderr
    assert math.isclose(EPOCH, 1_767_225_600.0)


# ---- a second setting is not a repeat --------------------------------------------------------


def test_pfi_refuses_a_second_setting_as_repeats(cli: Cli, tmp_path: Path) -> None:
    lines = ["job,cap_w,power_w,tokens_per_s,sm_clock_target_mhz"]
    for cap, p, t in ((None, 700, 100), (500, 520, 95), (400, 420, 85), (300, 320, 70)):
        for clock, slow in ((1980, 1.0), (1200, 0.8)):
            cap_text = "" if cap is None else str(cap)
            lines.append(f"a,{cap_text},{p * slow:.1f},{t * slow:.2f},{clock}")
    path = write(tmp_path / "jobs.csv", lines)
    r = cli("pfi", "compute", path)
    assert r.exit_code == 2
    assert (
        "sm_clock_target_mhz takes 2 values (1200, 1980)" in r.stderr and "--split-by" in r.stderr
    )
    out = cli.json("pfi", "compute", path, "--split-by", "sm_clock_target_mhz")
    assert sorted(j["job"] for j in out["jobs"]) == [
        "a [sm_clock_target_mhz=1200]",
        "a [sm_clock_target_mhz=1980]",
    ]


def test_import_anchors_relative_times_with_start(cli: Cli, tmp_path: Path) -> None:
    """--start was accepted by import and then ignored for CSV: times landed in 1970."""
    path = write(tmp_path / "rel.csv", ["ts,gpu,power_w", "0,0,100", "0.5,0,110", "1.0,0,120"])
    out = tmp_path / "rel.parquet"
    cli.json("import", path, "--start", "2026-04-28T16:44:26Z", "-o", out)
    assert cli.json("info", out)["start"] == "2026-04-28T16:44:26Z"


def test_plot_time_axis_is_in_the_logs_zone(realdata: Path) -> None:
    from powerkit.report.trace_section import power_over_time

    log = realdata / "smi_1xV100_falcon-7b_infer_inputsweep_100ms.csv"
    chicago = read_trace(log, ImportOptions(tz="America/New_York"))
    fig = power_over_time(chicago, trace_info(chicago))
    assert fig.layout.xaxis.title.text == "time (America/New_York)"
    first = min(min(t.x) for t in fig.data)
    assert str(first).startswith("2024-03-29 11:16")  # wall-clock time where it was logged
    assumed = read_trace(log)
    fig = power_over_time(assumed, trace_info(assumed))
    assert fig.layout.xaxis.title.text == "time (UTC, assumed)"


def test_replayed_trace_is_filled_before_replay(cli: Cli, tmp_path: Path) -> None:
    from powerkit.control.trace_env import TraceEnv

    full, sweep = tmp_path / "t.parquet", tmp_path / "s.parquet"
    preset = ("--preset", "a100-72b-tp4-gen")
    assert (
        cli(
            "record", "--backend", "sim", *preset, "--duration", "10m", "--out", full, "--quiet"
        ).exit_code
        == 0
    )
    args = ("--concurrency", "1,8", "--point", "5m", "--warmup", "1m", "--out", sweep)
    assert cli("sweep", *preset, *args, "--json").exit_code == 0
    # drop 4 s of every minute from each GPU: a logger that stalls
    import polars as pl

    from powerkit.trace import write_trace

    trace = read_trace(full)
    table = pl.from_arrow(trace.table())
    assert isinstance(table, pl.DataFrame)
    seconds = table["ts"].dt.second()
    gapped = tmp_path / "gapped.parquet"
    write_trace(table.filter(seconds >= 4).to_arrow(), trace.meta, gapped)
    none = TraceEnv(str(gapped), str(sweep), 150.0, "concurrency", period_s=30)
    held = TraceEnv(str(gapped), str(sweep), 150.0, "concurrency", period_s=30, fill="hold:5s")
    assert none.replay_coverage == pytest.approx(56 / 60, abs=0.01)
    assert held.replay_coverage == 1.0


def test_econ_and_report_name_the_empty_windows(cli: Cli, tmp_path: Path) -> None:
    rows = [(g, 0.5 * k, 300.0) for g in range(2) for k in range(600) if k % 40 >= 4 + g * 8]
    trace = make_trace(rows)
    from powerkit.trace import write_trace

    path = tmp_path / "gapped.parquet"
    write_trace(trace.table(), trace.meta, path)
    fleet = tmp_path / "fleet.json"
    r = cli("oversub", path, "--windows", "0.5s,30s", "--json")
    assert r.exit_code == 0 and "no complete position at 30s" in r.stderr
    fleet.write_text(r.stdout)
    r = cli("econ", "--oversub", fleet, "--gpus", "100", "--gpu-tdp", "400W", "--window", "30s")
    assert r.exit_code == 2
    assert "no complete position at 30s" in r.stderr and "windows with a peak: 500ms" in r.stderr
    page = tmp_path / "r.html"
    assert cli("report", "--oversub", fleet, "--out", page).exit_code == 0
    assert "No complete position at 30s" in page.read_text()
