"""The enforced power limit beside power: time at the limit (info, windows) and its import
from nvidia-smi and DCGM, the enforced limit winning over the requested one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from powerkit.analysis.info import trace_info
from powerkit.analysis.limits import LimitTime, series_limit_time
from powerkit.analysis.windows import windowed_violations
from powerkit.cells.grid import RawSeries
from powerkit.core.units import PowerSpec
from powerkit.trace import read_trace
from powerkit.trace.model import Trace
from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical


def _series(power: list[float], limit: list[float], t_s: list[float]) -> RawSeries:
    t_us = (np.asarray(t_s) * 1e6).astype(np.int64)
    return RawSeries(
        "h",
        0,
        t_us,
        np.asarray(power, float),
        None,
        np.diff(t_us),
        {"power_limit_w": np.asarray(limit, float)},
    )


def test_time_at_the_limit_by_hand() -> None:
    """1 s steps from samples at 300, 295, 200, 300 W under a 300 W limit: 291 W (3 % under)
    and above is at it, so 3 of the 4 s; a sample without a limit starts a step counted in
    neither; a step beyond the gap rule (5 nominal intervals) neither."""
    s = _series([300, 295, 200, 300, 100], [300] * 5, [0, 1, 2, 3, 4])
    got = series_limit_time(s, 1.0)
    assert (got.at_limit_s, got.known_s, got.share) == (3.0, 4.0, 0.75)
    assert (got.min_limit_w, got.max_limit_w) == (300.0, 300.0)
    s = _series([300, 295, 200, 300, 100], [300, np.nan, 250, 300, 300], [0, 1, 2, 3, 10])
    got = series_limit_time(s, 1.0)  # step 1 has no limit, step 3 is a 7 s gap
    assert (got.at_limit_s, got.known_s) == (1.0, 2.0) and got.min_limit_w == 250.0
    assert series_limit_time(_series([1, 2], [np.nan, np.nan], [0, 1]), 1.0).share is None
    both = LimitTime(1, 2, 250, 300) + LimitTime(3, 4, 200, 280)
    assert (both.at_limit_s, both.known_s, both.min_limit_w, both.max_limit_w) == (4, 6, 200, 300)


def _trace(limit: float | None) -> Trace:
    t = np.arange(0, 100, 1.0)
    power = np.where(t < 40, 250.0, 100.0)  # at a 250 W limit for 40 of 99 s
    frame = {
        "ts": pl.Series(((1.7e9 + t) * 1e6).astype(np.int64)).cast(pl.Datetime("us", "UTC")),
        "host": ["h"] * t.size,
        "gpu": np.zeros(t.size, np.int16),
        "power_w": power,
    }
    if limit is not None:
        frame["power_limit_w"] = np.full(t.size, limit)
    meta = TraceMeta(source="test", interval_s=1.0, gpus=[GpuMeta("h", 0, nameplate_w=400.0)])
    return Trace(meta=meta, table_=to_canonical(pl.DataFrame(frame)), origin="t")


def test_info_and_windows_report_the_limit_and_the_time_at_it() -> None:
    capped = _trace(250.0)
    series = trace_info(capped).series[0]
    assert (series.power_limit_min_w, series.power_limit_max_w) == (250.0, 250.0)
    assert series.at_limit_share == pytest.approx(40 / 99)
    report = windowed_violations(capped, PowerSpec(watts=300.0), [1.0])
    assert report.at_limit_share == pytest.approx(40 / 99) and report.limit_known_s == 99.0
    free = _trace(None)
    assert trace_info(free).series[0].at_limit_share is None
    assert windowed_violations(free, PowerSpec(watts=300.0), [1.0]).limit_known_s is None
    assert windowed_violations(free, PowerSpec(watts=300.0), [1.0]).at_limit_share is None


def test_the_cli_shows_the_limit_beside_power(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from powerkit.trace.writing import write_trace

    path = tmp_path / "capped.parquet"
    write_trace(_trace(250.0).table(), _trace(250.0).meta, path)
    shown = cli("info", path).stdout
    assert "limit W" in shown and "40.4%" in shown
    assert "at the power limit 40.4% of the time" in cli("windows", path, "--budget", "300W").stdout


SMI = """timestamp, index, power.draw [W], power.limit [W], enforced.power.limit [W]
2024/04/05 06:17:19.635, 0, 250.00 W, 400.00 W, 250.00 W
2024/04/05 06:17:20.135, 0, 260.00 W, 400.00 W, 260.00 W
"""


def test_nvidia_smi_the_enforced_limit_wins_in_any_order(tmp_path: Path) -> None:
    path = tmp_path / "smi.csv"
    path.write_text(SMI)
    assert read_trace(path).table().column("power_limit_w").to_pylist() == [250.0, 260.0]
    lines = [line.split(", ") for line in SMI.splitlines()]
    swapped = "\n".join(", ".join([*x[:3], x[4], x[3]]) for x in lines) + "\n"
    path.write_text(swapped)
    assert read_trace(path).table().column("power_limit_w").to_pylist() == [250.0, 260.0]
    path.write_text("\n".join(", ".join(x[:4]) for x in lines) + "\n")  # the requested only
    assert read_trace(path).table().column("power_limit_w").to_pylist() == [400.0, 400.0]


def test_dcgm_the_enforced_limit_wins_over_the_management_limit(tmp_path: Path) -> None:
    rows = [
        "# TIMESTAMP 1700000000.0",
        'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 300',
        'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="0"} 700',
        'DCGM_FI_DEV_ENFORCED_POWER_LIMIT{gpu="0"} 350',
        "# TIMESTAMP 1700000001.0",
        'DCGM_FI_DEV_ENFORCED_POWER_LIMIT{gpu="0"} 360',
        'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="0"} 700',
        'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 310',
        "# TIMESTAMP 1700000002.0",
        'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 320',
        'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="0"} 690',
    ]
    path = tmp_path / "scrape.prom"
    path.write_text("\n".join(rows) + "\n")
    assert read_trace(path).table().column("power_limit_w").to_pylist() == [350, 360, 690]


def test_a_limit_that_is_not_one_is_unknown_not_at_the_limit(tmp_path: Path) -> None:
    """[N/A], a negative or a zero limit counts in neither the time at the limit nor the time
    with a limit (the sample's power still counts everywhere else)."""
    path = tmp_path / "smi.csv"
    path.write_text(
        "timestamp, index, power.draw [W], enforced.power.limit [W]\n"
        "2024/04/05 06:17:19.000, 0, 250.00 W, [N/A]\n"
        "2024/04/05 06:17:20.000, 0, 250.00 W, -5.00 W\n"
        "2024/04/05 06:17:21.000, 0, 250.00 W, 0.00 W\n"
        "2024/04/05 06:17:22.000, 0, 250.00 W, 250.00 W\n"
        "2024/04/05 06:17:23.000, 0, 100.00 W, 250.00 W\n"
        "2024/04/05 06:17:24.000, 0, 100.00 W, 250.00 W\n"
    )
    trace = read_trace(path)
    report = windowed_violations(trace, PowerSpec(watts=300.0), [1.0])
    assert (report.at_limit_share, report.limit_known_s) == (0.5, 2.0)
    assert trace_info(trace).series[0].samples == 6
