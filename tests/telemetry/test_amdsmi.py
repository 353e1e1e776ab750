"""AMD Instinct GPUs through amd-smi, faked at its one seam: recording, caps and clocks through
the GpuControl interface both vendors implement, the journal and `restore`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import powerkit.actuation.journal as journal
import powerkit.telemetry.amdsmi as amd_module
import powerkit.telemetry.nvml as nvml_module
from powerkit.actuation.caps import LockedClocks, PowerCaps
from powerkit.core.choices import Backend
from powerkit.core.errors import DeviceError
from powerkit.sweep.backends import make_backend
from powerkit.telemetry.amdsmi import AmdGpu, AmdSmiSource, amdsmi_session
from powerkit.telemetry.recorder import RecordConfig, record
from powerkit.telemetry.vendors import open_gpu_source
from powerkit.trace import read_trace
from tests.conftest import Cli
from tests.fake_amdsmi import FakeAmdSmi
from tests.fake_nvml import FakeNvml


@pytest.fixture
def fake_amd(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeAmdSmi]:
    """A factory that installs a FakeAmdSmi at the amd-smi seam."""

    def install(**kwargs: object) -> FakeAmdSmi:
        fake = FakeAmdSmi(**kwargs)  # type: ignore[arg-type]
        monkeypatch.setattr(amd_module, "amdsmi", fake.module)
        return fake

    return install


def test_record_backend_amdsmi(
    cli: Cli, tmp_path: Path, fake_amd: Callable[..., FakeAmdSmi]
) -> None:
    fake = fake_amd(gpus=2)
    out = tmp_path / "mi300.parquet"
    r = cli(
        "record",
        "--backend",
        "amdsmi",
        "--interval",
        "20ms",
        "--duration",
        "0.3s",
        "-o",
        out,
        "--quiet",
    )
    assert r.exit_code == 0, r.stderr
    assert not fake.initialized  # amd-smi shut down after recording
    trace = read_trace(out)
    t = pl.from_arrow(trace.table())
    g1 = t.filter(pl.col("gpu") == 1)
    assert g1["power_w"][0] == pytest.approx(350.0)  # the current socket power, in W
    assert (g1["power_w"] - g1["power_avg_w"]).mean() == pytest.approx(2.0)
    # the accumulator in ticks of 15.3 µJ: 65,536 ticks a reading
    assert np.diff(g1["energy_j"].to_numpy()) == pytest.approx(65_536 * 15.3e-6)
    assert g1["power_limit_w"][0] == pytest.approx(750.0)  # µW in the struct
    assert g1["sm_clock_mhz"][0] == 2100 and g1["temp_c"][0] == 71 and g1["gpu_util"][0] == 93
    meta = trace.meta
    assert meta.source == "amdsmi" and meta.power_semantics == "amd_socket"
    assert meta.gpus[0].name == "AMD Instinct MI300X" and meta.nameplate_w() == 750
    assert meta.gpus[1].uuid == "fake-amd-1" and meta.extra["driver"] == "6.8.5"


def test_gpus_without_current_power_record_the_average(
    tmp_path: Path, fake_amd: Callable[..., FakeAmdSmi]
) -> None:
    fake_amd(gpus=1, current=False, name="AMD Instinct MI250X")
    out = tmp_path / "mi250.parquet"
    record(AmdSmiSource(), RecordConfig(out=out, interval_s=0.02, duration_s=0.1))
    trace = read_trace(out)
    t = pl.from_arrow(trace.table())
    assert trace.meta.power_semantics == "average_1s"
    assert (t["power_w"] == t["power_avg_w"]).all()  # average_socket_power
    assert "power_instant_w" not in t.columns


@pytest.mark.parametrize("unit", [1e6, 1.0])
def test_power_cap_struct_in_microwatts_or_watts(
    fake_amd: Callable[..., FakeAmdSmi], unit: float
) -> None:
    fake_amd(gpus=1, cap_unit=unit)  # bare metal (µW) or a virtualization host (W)
    with amdsmi_session():
        gpu = AmdGpu(0)
        assert gpu.power_limit_w() == 750.0
        assert gpu.power_limit_range_w() == (200.0, 750.0)
        assert gpu.default_power_limit_w() == 750.0


def test_caps_and_clocks_set_journaled_and_put_back(
    fake_amd: Callable[..., FakeAmdSmi], _state_dir: Path
) -> None:
    fake = fake_amd(gpus=2)
    with amdsmi_session():
        gpus = [AmdGpu(0), AmdGpu(1)]
        with PowerCaps(gpus) as caps, LockedClocks(gpus) as clocks:
            caps.set(400)
            clocks.set(1500)
            assert fake.caps_w == [400.0, 400.0] and fake.gfx_range == [(1500, 1500)] * 2
            entries = journal.read_entries()
            assert {(e.kind, e.vendor) for e in entries} == {
                (journal.LIMIT, "amd"),
                (journal.CLOCKS, "amd"),
            }
            assert [e.original_w for e in entries if e.kind == journal.LIMIT] == [750.0, 750.0]
            with pytest.raises(Exception, match="outside GPU 0's range 200-750 W"):
                caps.set(800)
    assert fake.caps_w == [750.0, 750.0] and fake.gfx_range == [None, None]
    assert journal.read_entries() == []


def test_restore_puts_back_what_a_killed_amd_sweep_left(
    cli: Cli,
    fake_amd: Callable[..., FakeAmdSmi],
    monkeypatch: pytest.MonkeyPatch,
    _state_dir: Path,
) -> None:
    fake = fake_amd(gpus=2)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with monkeypatch.context() as m, amdsmi_session():
        m.setattr(journal.os, "getpid", lambda: child.pid)
        gpus = [AmdGpu(0), AmdGpu(1)]
        PowerCaps(gpus).__enter__().set(300)  # then killed: no __exit__
        LockedClocks(gpus).__enter__().set(900)
    assert fake.caps_w == [300.0, 300.0] and fake.gfx_range == [(900, 900)] * 2
    done = cli.json("restore")
    assert len(done["restored"]) == 4 and {r["vendor"] for r in done["restored"]} == {"amd"}
    assert fake.caps_w == [750.0, 750.0] and fake.gfx_range == [None, None]
    assert journal.read_entries() == []


def test_a_refused_cap_is_one_line(
    cli: Cli, tmp_path: Path, fake_amd: Callable[..., FakeAmdSmi]
) -> None:
    fake = fake_amd(gpus=1, permit=False)
    tokens = tmp_path / "tokens.jsonl"
    tokens.write_text('{"ts": 1, "tokens": 0}\n')
    r = cli(
        "pfi",
        "sweep",
        "--backend",
        "amdsmi",
        "--tokens-from",
        tokens,
        "--caps",
        "300W,750W",
        "--point",
        "0.2s",
        "--warmup",
        "0s",
        "-o",
        tmp_path / "s.parquet",
    )
    assert r.exit_code == 2
    assert "setting GPU power limits is not permitted" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert fake.caps_w == [750.0] and journal.read_entries() == []


def test_amdsmi_backend_is_a_running_job_under_caps(
    tmp_path: Path, fake_amd: Callable[..., FakeAmdSmi]
) -> None:
    fake_amd(gpus=1)
    engine, source = make_backend(
        Backend.amdsmi, preset="a100-7b", seed=0, tokens_from=tmp_path / "t.jsonl"
    )
    try:
        assert engine.name == "amdsmi" and source is not None and source.vendor == "amd"
    finally:
        assert source is not None
        source.close()


def test_without_the_library_one_line(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(amd_module, "amdsmi", None)
    r = cli("record", "--backend", "amdsmi", "--duration", "1s", "-o", tmp_path / "x.parquet")
    assert r.exit_code == 2 and "amd-smi's Python library is not available" in r.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_the_vendor_is_found_where_nvml_fails(
    monkeypatch: pytest.MonkeyPatch, fake_amd: Callable[..., FakeAmdSmi]
) -> None:
    monkeypatch.setattr(nvml_module, "pynvml", FakeNvml(gpus=1, fail_init=True).module)
    fake_amd(gpus=1)
    source = open_gpu_source()
    try:
        assert source.vendor == "amd"
    finally:
        source.close()
    fake_amd(gpus=1, fail_init=True)
    with pytest.raises(DeviceError, match=r"no GPU found \(NVML: NVML is not available.*amd-smi"):
        open_gpu_source()


def test_without_backend_the_gpus_found_else_one_line_naming_sim(
    monkeypatch: pytest.MonkeyPatch, fake_amd: Callable[..., FakeAmdSmi], cli: Cli, tmp_path: Path
) -> None:
    """record, top and control run read the GPUs the machine has (NVIDIA's, else AMD's); with
    none, one line that names --backend sim, and nothing written."""
    monkeypatch.setattr(nvml_module, "pynvml", FakeNvml(gpus=1, fail_init=True).module)
    fake_amd(gpus=2)
    out = tmp_path / "amd.parquet"
    result = cli("record", "--out", out, "--duration", "0.3s", "--interval", "0.1s", "--json")
    assert result.exit_code == 0, result.stderr
    assert read_trace(out).meta.source == "amdsmi"
    fake_amd(gpus=1, fail_init=True)
    for argv in (
        ("record", "--out", tmp_path / "none.parquet", "--duration", "1s"),
        ("top", "--once"),
    ):
        result = cli(*argv)
        assert result.exit_code == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "no GPU found" in lines[0]
        assert "--backend sim runs the simulator" in lines[0]
    assert not (tmp_path / "none.parquet").exists()


def test_a_journal_entry_of_an_unknown_vendor_is_one_line(cli: Cli, _state_dir: Path) -> None:
    path = journal.journal_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "pid": 1 << 22,
        "gpu": 0,
        "uuid": None,
        "original_w": 300.0,
        "since": 0.0,
        "vendor": "intel",
    }
    path.write_text('{"entries": [' + __import__("json").dumps(entry) + "]}\n")
    before = path.read_text()
    r = cli("restore")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "vendor 'intel' is not valid" in r.stderr
    assert path.read_text() == before  # nothing lost


@pytest.mark.parametrize("step", [-65_536.0, 1e300])
def test_a_counter_that_falls_or_leaps_is_not_trusted(
    cli: Cli, tmp_path: Path, fake_amd: Callable[..., FakeAmdSmi], step: float
) -> None:
    """An accumulator that falls (0 kWh where power says otherwise) or rises 1e300 J/s: the
    recording's energy and every analysis integrate the power instead."""
    fake = fake_amd(gpus=1)
    fake.energy_step = step
    out = tmp_path / "mi300.parquet"
    argv = ["record", "--backend", "amdsmi", "--interval", "20ms", "--duration", "0.3s"]
    done = cli.json(*argv, "-o", out)
    info = cli.json("info", out)
    (series,) = info["series"]
    assert series["energy_source"] == "trapezoid"
    power = 350.0  # the fake's socket power, W, over about 0.3 s
    assert 0.5 * power * 0.2 < done["energy_j"][0] < 2 * power * 0.4
    assert 0.5 * power * 0.2 < series["energy_j"] < 2 * power * 0.4
