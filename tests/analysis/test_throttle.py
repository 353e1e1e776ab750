"""Clock-event (throttle) reasons: recorded from NVML as a bit-field column, imported from
nvidia-smi and DCGM, and the time throttled by the power cap, temperature and idle in info,
windows and energy; MIG instances recorded and imported with power kept per physical GPU."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from powerkit.analysis.energy import interval_energy
from powerkit.analysis.info import trace_info
from powerkit.analysis.limits import (
    THROTTLE_KINDS,
    Limits,
    ThrottleTime,
    reason_names,
    series_limits,
)
from powerkit.analysis.windows import windowed_violations
from powerkit.cells.grid import RawSeries
from powerkit.core.errors import BadInputError
from powerkit.core.units import PowerSpec
from powerkit.telemetry.nvml import NvmlSource
from powerkit.telemetry.recorder import RecordConfig, record
from powerkit.trace import read_trace
from powerkit.trace.intervals import Interval
from powerkit.trace.model import Trace
from powerkit.trace.options import ImportOptions
from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical
from powerkit.trace.writing import write_trace
from tests.conftest import Cli
from tests.fake_nvml import FakeNvml

CAP, BRAKE, THERMAL, IDLE, HW = 0x4, 0x80, 0x20, 0x1, 0x8


def _series(reasons: list[float], t_s: list[float]) -> RawSeries:
    t_us = (np.asarray(t_s) * 1e6).astype(np.int64)
    return RawSeries(
        "h",
        0,
        t_us,
        np.full(len(t_s), 200.0),
        None,
        np.diff(t_us),
        {"clock_event_reasons": np.asarray(reasons, float)},
    )


def test_time_throttled_by_hand() -> None:
    """1 s steps whose first samples have the power cap (0x4), the power brake (0x80), cap and
    thermal (0x24), idle (0x1), no reason, and an unknown one (NaN): of the 5 s with reasons,
    3 s are capped, 1 s thermal, 1 s idle; a 10 s gap (beyond 5 nominal steps) counts in
    none."""
    s = _series([CAP, BRAKE, CAP | THERMAL, IDLE, 0, np.nan, CAP, 0], [0, 1, 2, 3, 4, 5, 6, 16])
    got = series_limits(s, 1.0).throttle
    assert got.known_s == 5.0
    assert {k: got.share(k) for k in THROTTLE_KINDS} == {
        "power_cap": 3 / 5,
        "thermal": 1 / 5,
        "hw_slowdown": 0.0,
        "idle": 1 / 5,
    }
    assert ThrottleTime().share("power_cap") is None
    both = Limits(throttle=got) + Limits(throttle=got)
    assert both.throttle.known_s == 10.0 and both.throttle.share("power_cap") == 3 / 5
    assert reason_names(0x84) == ["sw_power_cap", "hw_power_brake_slowdown"]
    assert reason_names(1 << 40) == ["bit 40"]


def _trace(with_reasons: bool = True) -> Trace:
    """100 s at 1 s: the power cap throttles from 0 to 40 s, temperature from 60 to 70 s."""
    t = np.arange(0, 100, 1.0)
    reasons = np.where(t < 40, CAP, np.where((t >= 60) & (t < 70), THERMAL, 0))
    frame = {
        "ts": pl.Series(((1.7e9 + t) * 1e6).astype(np.int64)).cast(pl.Datetime("us", "UTC")),
        "host": ["h"] * t.size,
        "gpu": np.zeros(t.size, np.int16),
        "power_w": np.where(t < 40, 300.0, 150.0),
    }
    if with_reasons:
        frame["clock_event_reasons"] = reasons
    meta = TraceMeta(source="test", interval_s=1.0, gpus=[GpuMeta("h", 0, nameplate_w=400.0)])
    return Trace(meta=meta, table_=to_canonical(pl.DataFrame(frame)), origin="t")


def test_info_windows_and_energy_report_the_time_throttled(cli: Cli, tmp_path: Path) -> None:
    trace = _trace()
    assert trace.table().schema.field("clock_event_reasons").type == "int64"
    s = trace_info(trace).series[0]
    assert (s.cap_throttled_share, s.thermal_throttled_share) == (40 / 99, 10 / 99)
    assert s.idle_share == 0.0
    report = windowed_violations(trace, PowerSpec(watts=350.0), [1.0])
    assert report.reasons_known_s == 99.0 and report.throttled_share is not None
    assert report.throttled_share["power_cap"] == pytest.approx(40 / 99)
    assert report.throttled_share["thermal"] == pytest.approx(10 / 99)
    steps = [Interval(k, 1.7e9 + 20 * k, 1.7e9 + 20 * (k + 1)) for k in range(4)]
    energy = interval_energy(trace, steps, kind="steps")
    assert [iv.cap_throttled_share for iv in energy.intervals] == [1.0, 1.0, 0.0, 0.0]
    assert any(
        "2 steps spent more than half their time throttled by the power cap" in n
        for n in energy.notes
    )
    free = _trace(with_reasons=False)
    assert trace_info(free).series[0].cap_throttled_share is None
    assert windowed_violations(free, PowerSpec(watts=350.0), [1.0]).throttled_share is None
    assert interval_energy(free, steps, kind="steps").intervals[0].cap_throttled_share is None
    path = tmp_path / "throttled.parquet"
    write_trace(trace.table(), trace.meta, path)
    shown = cli("info", path).stdout
    assert "cap thr" in shown and "40.4%" in shown and "10.1%" in shown
    text = " ".join(cli("windows", path, "--budget", "350W").stdout.split())
    assert "throttled (power_cap) 40.4%" in text and "throttled (thermal) 10.1%" in text


def test_nvml_records_the_reasons_bit_field(
    tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake = fake_nvml(gpus=2)
    fake.reasons = [CAP | BRAKE, IDLE]
    fake.limits_mw = [450_000, 700_000]
    out = tmp_path / "run.parquet"
    record(NvmlSource(), RecordConfig(out=out, interval_s=0.02, duration_s=0.2))
    t = pl.from_arrow(read_trace(out).table())
    assert t.schema["clock_event_reasons"] == pl.Int64
    assert t.filter(pl.col("gpu") == 0)["clock_event_reasons"].unique().to_list() == [0x84]
    assert t.filter(pl.col("gpu") == 1)["clock_event_reasons"].unique().to_list() == [0x1]
    assert t.filter(pl.col("gpu") == 0)["power_limit_w"][0] == 450.0  # the enforced limit


def test_older_drivers_answer_as_throttle_reasons(fake_nvml: Callable[..., FakeNvml]) -> None:
    import pynvml

    fake = fake_nvml(gpus=1)
    fake.module.nvmlDeviceGetCurrentClocksEventReasons.side_effect = (
        pynvml.NVMLError_FunctionNotFound()
    )
    fake.reasons = [THERMAL]
    source = NvmlSource()
    try:
        assert source.read_now(0.0)["clock_event_reasons"][0] == THERMAL
    finally:
        source.close()


SMI = """\
timestamp, index, power.draw [W], clocks_event_reasons.active
2025/02/03 10:00:00.000, 0, 700.00 W, 0x0000000000000004
2025/02/03 10:00:01.000, 0, 690.00 W, 0x0000000000000084
2025/02/03 10:00:02.000, 0, 120.00 W, 0x0000000000000001
2025/02/03 10:00:03.000, 0, 400.00 W, [N/A]
"""


def test_nvidia_smi_reasons_in_hex(tmp_path: Path) -> None:
    path = tmp_path / "smi.csv"
    path.write_text(SMI)
    assert read_trace(path).table().column("clock_event_reasons").to_pylist() == [4, 0x84, 1, None]
    path.write_text(SMI.replace("clocks_event_reasons", "clocks_throttle_reasons"))  # older
    trace = read_trace(path)
    assert trace.table().column("clock_event_reasons").to_pylist() == [4, 0x84, 1, None]
    s = trace_info(trace).series[0]
    assert (s.cap_throttled_share, s.idle_share) == (2 / 3, 1 / 3)


def test_dcgm_reasons_and_mig_instances(tmp_path: Path) -> None:
    """A MIG GPU's lines repeat its device-level power for each instance (GPU_I_ID): power
    stays one series per physical GPU, with no spurious scrape; the instances go into the
    metadata. A reasons value that is not a bit field is a bad row naming its line."""
    labels = 'gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"'
    rows = []
    for k, (watts, bits) in enumerate([(600, CAP), (610, CAP | BRAKE), (200, IDLE)]):
        rows.append(f"# TIMESTAMP {1700000000 + k}")
        for gi, profile in (("1", "3g.40gb"), ("2", "3g.40gb")):
            mig = f'{labels},GPU_I_ID="{gi}",GPU_I_PROFILE="{profile}"'
            rows += [
                f"DCGM_FI_DEV_POWER_USAGE{{{mig}}} {watts}",
                f"DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{mig}}} {bits}",
            ]
    path = tmp_path / "mig.prom"
    path.write_text("\n".join(rows) + "\n")
    trace = read_trace(path)
    table = trace.table()
    assert table.num_rows == 3 and table.column("power_w").to_pylist() == [600, 610, 200]
    assert table.column("clock_event_reasons").to_pylist() == [4, 0x84, 1]
    assert trace.meta.extra["mig_instances"] == [
        {
            "host": "n1",
            "gpu": 0,
            "instances": [{"id": "1", "profile": "3g.40gb"}, {"id": "2", "profile": "3g.40gb"}],
        }
    ]
    # the older field name, and no timestamps: instances repeat within a scrape, not a new one
    old = (
        "\n".join(
            r.replace("CLOCKS_EVENT_REASONS", "CLOCK_THROTTLE_REASONS")
            for r in rows
            if not r.startswith("#")
        )
        + "\n"
    )
    path.write_text(old)
    assert read_trace(path, ImportOptions(interval_s=1.0)).table().num_rows == 3
    power = 'DCGM_FI_DEV_POWER_USAGE{gpu="0"}'
    path.write_text(f'{power} 300\nDCGM_FI_DEV_CLOCKS_EVENT_REASONS{{gpu="0"}} 4.5\n{power} 310\n')
    with pytest.raises(BadInputError, match=r"line 2: .*4\.5 is not a bit field"):
        read_trace(path)


def test_a_bit_field_that_is_not_one_is_refused() -> None:
    frame = pl.DataFrame(
        {
            "ts": pl.Series([1_700_000_000, 1_700_000_001]).cast(pl.Datetime("ms", "UTC")),
            "host": ["h", "h"],
            "gpu": [0, 0],
            "power_w": [1.0, 2.0],
            "clock_event_reasons": [4.0, -1.0],
        }
    )
    with pytest.raises(BadInputError, match=r"sample 2 \(host h, GPU 0\): clock_event_reasons"):
        to_canonical(frame, what="t")


def test_nvml_records_mig_instances_smoothing_and_profiles(
    tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake = fake_nvml(gpus=2)
    fake.mig = [[(1, "3g.40gb"), (2, "3g.40gb")], []]
    fake.smoothing = [{"enabled": True, "profile": 0, "profiles": [[250_000, 100_000, 60.0]]}] * 2
    fake.power_profiles = [7]  # llm_training
    out = tmp_path / "run.parquet"
    record(NvmlSource(), RecordConfig(out=out, interval_s=0.02, duration_s=0.1))
    extra = read_trace(out).meta.extra
    (found,) = extra["mig_instances"]  # GPU 0 only: MIG is off on GPU 1
    name = "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
    assert found["gpu"] == 0 and found["instances"] == [
        {"id": 1, "profile": name, "uuid": "MIG-fake-0-0"},
        {"id": 2, "profile": name, "uuid": "MIG-fake-0-1"},
    ]
    assert extra["power_smoothing"]["0"] == {
        "enabled": True,
        "profile": 0,
        "ramp_up_w_per_s": 250.0,
        "ramp_down_w_per_s": 100.0,
        "floor_pct": 60.0,
    }
    assert extra["power_profiles"] == {"0": ["llm_training"], "1": ["llm_training"]}
    t = pl.from_arrow(read_trace(out).table())
    assert t["gpu"].unique().sort().to_list() == [0, 1]  # power per physical GPU


def test_real_v100_cap_step_throttle_reasons(realdata: Path, cli: Cli, tmp_path: Path) -> None:
    """The gridpilot V100 log steps the cap 280 -> 200 -> 280 W at 10 and 20 s and logs NVML's
    throttle reasons in hex: 2,113 samples carry SwPowerCap (0x4) and 82 GpuIdle (0x1); the
    share the cap throttled is 61 % of the samples inside the 200 W step, 14 % outside."""
    name = realdata / "nvml_1xV100_capstep_280to200W_100hz.csv"
    out = tmp_path / "v100.parquet"
    mapping = "ts=t_s,gpu=gpu_index,power_w=power_w,clock_event_reasons=throttle_reasons"
    r = cli("import", name, "--map", mapping, "--start", "1777378919.528", "-o", out)
    assert r.exit_code == 0, r.stderr
    t = pl.from_arrow(read_trace(out).table())
    counts = dict(t["clock_event_reasons"].value_counts().iter_rows())
    assert counts == {0: 6720, 4: 2113, 1: 82}
    start = t["ts"][0]
    elapsed = (t["ts"] - start).dt.total_microseconds() / 1e6
    inside = (elapsed >= 10) & (elapsed < 20)
    capped = t["clock_event_reasons"] == CAP
    assert capped.filter(inside).mean() == pytest.approx(0.610, abs=0.001)
    assert capped.filter(~inside).mean() == pytest.approx(0.141, abs=0.001)
    info = cli.json("info", out)["series"][0]
    assert 0.2 < info["cap_throttled_share"] < 0.3 and info["idle_share"] < 0.02
