"""The recorder against the fake NVML and the simulator: schedule, chunks, signals, annotations."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from powerkit.core.errors import DeviceError
from powerkit.sim import get_preset
from powerkit.telemetry.nvml import NvmlSource
from powerkit.telemetry.recorder import RecordConfig, record, stop_on_signals
from powerkit.telemetry.sim import SimSource
from powerkit.trace import read_trace
from tests.conftest import Cli
from tests.fake_nvml import FakeNvml


def test_nvml_recording_fields_and_metadata(
    tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake = fake_nvml(gpus=2)
    out = tmp_path / "run.parquet"
    result = record(
        NvmlSource(), RecordConfig(out=out, interval_s=0.02, duration_s=0.3, flush_s=0.1)
    )
    # 0.3 s at 20 ms is 15 positions; each is sampled or, when the machine stalls, missed
    # (never sampled late, and never past the duration).
    assert result.ticks <= 15
    assert result.samples == 2 * (15 - result.missed_ticks)
    assert not fake.initialized  # NVML shut down after recording
    trace = read_trace(out)
    t = pl.from_arrow(trace.table())
    assert t["gpu"].unique().sort().to_list() == [0, 1]
    g0 = t.filter(pl.col("gpu") == 0)
    # instant power comes from the field value; the average field is 0.5 W below it
    assert (g0["power_w"] - g0["power_avg_w"]).mean() == pytest.approx(0.5, abs=1e-3)
    assert g0["power_w"][0] == pytest.approx(100.0)
    assert g0["energy_j"].is_sorted()
    assert g0["sm_clock_mhz"][0] == 1980 and g0["temp_c"][0] == 61
    assert g0["power_limit_w"][0] == 700
    meta = trace.meta
    assert meta.source == "nvml" and meta.power_semantics == "instant"
    assert meta.nameplate_w() == 700
    assert meta.gpus[1].uuid == "GPU-fake-1"
    rec = meta.extra["recording"]
    assert rec["ticks"] == result.ticks and rec["interrupted"] is False
    assert set(rec["lateness_ms"]) == {"p50", "p99", "max"}
    assert meta.extra["driver"] == "550.54.15"
    assert not out.with_name(out.name + ".parts").exists()


def test_nvml_without_field_values_uses_power_usage(
    tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake_nvml(gpus=1, fields=False, energy=False)
    out = tmp_path / "run.parquet"
    record(NvmlSource(), RecordConfig(out=out, interval_s=0.02, duration_s=0.1))
    trace = read_trace(out)
    assert trace.meta.power_semantics == "average_1s"  # H100: NVML power usage is a 1 s average
    assert trace.table().column("energy_j").null_count == trace.table().num_rows


def test_absolute_deadline_schedule(tmp_path: Path, fake_nvml: Callable[..., FakeNvml]) -> None:
    """Reads that take 20 ms do not push later ticks back (a relative sleep would drift)."""
    import time

    fake_nvml(gpus=1)
    source = NvmlSource()
    original = source.read_now

    def slow(elapsed: float):  # type: ignore[no-untyped-def]
        time.sleep(0.02)
        return original(elapsed)

    source.read_now = slow  # type: ignore[method-assign]
    out = tmp_path / "run.parquet"
    result = record(source, RecordConfig(out=out, interval_s=0.05, duration_s=1.0))
    ts = read_trace(out).table().column("ts").to_numpy().astype("datetime64[us]").astype(float)
    assert result.ticks + result.missed_ticks == 20
    # tick k is read at about start + k * 50 ms: 20 ticks of drift would be 400 ms
    spans = (ts[-1] - ts[0]) / 1e6
    assert spans < (result.ticks + result.missed_ticks - 1) * 0.05 + 0.2


def test_sigint_mid_recording_keeps_a_readable_file(
    tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake_nvml(gpus=2)
    out = tmp_path / "run.parquet"
    stop = threading.Event()
    before = signal.getsignal(signal.SIGINT)  # (SIG_IGN where the suite runs in the background)
    timer = threading.Timer(0.6, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with stop_on_signals(stop):
        result = record(
            NvmlSource(),
            RecordConfig(out=out, interval_s=0.02, duration_s=30, flush_s=0.2),
            stop=stop,
        )
    timer.cancel()
    assert result.interrupted
    assert 0.4 < result.duration_s < 5
    trace = read_trace(out)
    assert trace.table().num_rows == result.samples > 0
    assert trace.meta.extra["recording"]["interrupted"] is True
    # the handler was restored afterwards
    assert signal.getsignal(signal.SIGINT) is before


def test_error_mid_recording_still_finalizes(
    tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake_nvml(gpus=1)
    source = NvmlSource()
    original = source.read_now
    calls = {"n": 0}

    def dying(elapsed: float):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 12:
            raise DeviceError("GPU 0: nvmlDeviceGetPowerUsage: GPU is lost")
        return original(elapsed)

    source.read_now = dying  # type: ignore[method-assign]
    out = tmp_path / "run.parquet"
    with pytest.raises(DeviceError, match="GPU is lost"):
        record(source, RecordConfig(out=out, interval_s=0.02, duration_s=10, flush_s=0.1))
    assert read_trace(out).table().num_rows == 11  # every tick before the failure


def test_unfinished_parts_are_a_trace(tmp_path: Path) -> None:
    """A hard kill (SIGKILL, power loss) skips finalization; the parts folder is a trace."""
    out = tmp_path / "sim.parquet"
    source = SimSource(get_preset("a100-14b"))
    source.read_block(np.array([0.0]))  # warm the model up; nothing written yet
    from powerkit.trace.schema import TraceMeta, to_canonical
    from powerkit.trace.writing import PartsWriter

    writer = PartsWriter(out)
    for start in (0.0, 5.0):
        full = record_block(source, start)
        writer.write(to_canonical(full), TraceMeta(source="sim"))
    trace = read_trace(writer.parts_dir)
    assert trace.table().num_rows == 2 * 10 * 2


def record_block(source: SimSource, start: float) -> pl.DataFrame:
    times = start + 0.5 * np.arange(10)
    cols = source.read_block(times + 1.0)
    return pl.DataFrame(
        {
            "ts": pl.Series((1e6 * np.tile(times, 2)).astype(np.int64)).cast(
                pl.Datetime("us", "UTC")
            ),
            "host": ["sim"] * 20,
            "gpu": np.repeat([0, 1], 10),
            "power_w": cols["power_w"].ravel(),
        }
    )


def test_device_error_when_nvml_missing(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake_nvml(fail_init=True)
    with pytest.raises(DeviceError, match="NVML is not available"):
        NvmlSource()


def test_unknown_gpu_index(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake_nvml(gpus=2)
    with pytest.raises(DeviceError, match="no GPU 5"):
        NvmlSource([5])


def test_annotations_joined(tmp_path: Path, fake_nvml: Callable[..., FakeNvml]) -> None:
    fake_nvml(gpus=1)
    notes = tmp_path / "notes.jsonl"
    notes.write_text(
        json.dumps({"ts": 0, "step": 1, "phase": "rollout", "knobs": {"concurrency": 4}})
        + "\n"
        + "not json\n"
        + json.dumps({"step": 2, "phase": "train", "tokens": 1000})
        + "\n"
    )
    out = tmp_path / "run.parquet"
    record(
        NvmlSource(), RecordConfig(out=out, interval_s=0.02, duration_s=0.2, annotate_from=notes)
    )
    t = pl.from_arrow(read_trace(out).table())
    # lines without ts take effect when read (before the first flush): the latest wins
    assert t["step"].to_list()[-1] == 2
    assert t["phase"].to_list()[-1] == "train"
    assert t["concurrency"].to_list()[-1] == 4  # carried forward from the first line
    assert t["tokens"].to_list()[-1] == 1000


def test_sim_recording_is_fast_and_annotated(tmp_path: Path) -> None:
    out = tmp_path / "sim.parquet"
    result = record(
        SimSource(get_preset("a100-72b-tp4"), seed=3),
        RecordConfig(out=out, interval_s=0.5, duration_s=3600),
    )
    assert result.samples == 4 * 7200
    t = pl.from_arrow(read_trace(out).table())
    assert set(t["phase"].unique()) == {"rollout", "reward", "logprob", "train", "sync"}
    assert t["tokens"].max() > 0 and t["step"].max() >= 1
    again = tmp_path / "again.parquet"
    record(
        SimSource(get_preset("a100-72b-tp4"), seed=3),
        RecordConfig(out=again, interval_s=0.5, duration_s=3600),
    )
    assert read_trace(again).table().equals(read_trace(out).table())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_recording_finalizes_on_signal(tmp_path: Path, sig: signal.Signals) -> None:
    """The real command in its own process: a signal ends it cleanly, the file is readable."""
    import subprocess
    import sys
    import time

    out = tmp_path / "rt.parquet"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "powerkit",
            "record",
            "--backend",
            "sim",
            "--realtime",
            "--interval",
            "50ms",
            "--duration",
            "60s",
            "--flush",
            "0.5s",
            "--out",
            str(out),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    parts = out.with_name(out.name + ".parts")
    while time.monotonic() < deadline and not any(parts.glob("part-*.parquet")):
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["interrupted"] is True
    assert 0 < summary["duration_s"] < 50
    trace = read_trace(out)
    assert trace.table().num_rows == summary["samples"] > 0
    assert not parts.exists()


def test_record_into_a_dataset_folder(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    r = cli(
        "record",
        "--backend",
        "sim",
        "--duration",
        "30h",
        "--interval",
        "10s",
        "--out",
        f"{folder}/",
    )
    assert r.exit_code == 0, r.stderr
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.parquet"))
    assert files == [
        "host=sim/date=2026-01-01/part-0.parquet",
        "host=sim/date=2026-01-02/part-0.parquet",
    ]
    whole = cli.json("info", folder)
    assert whole["samples"] == 30 * 360
    day2 = cli.json("info", folder, "--from", "2026-01-02T00:00:00Z")
    assert day2["samples"] == 6 * 360
    r = cli("record", "--backend", "sim", "--duration", "1h", "--out", f"{folder}/")
    assert r.exit_code == 2 and "already holds a dataset" in r.stderr
    r = cli("info", folder, "--hosts", "gpu-node-9")
    assert r.exit_code == 2 and "no partition of the dataset matches" in r.stderr


def test_skipped_ticks_are_counted_once(tmp_path: Path, fake_nvml: Callable[..., FakeNvml]) -> None:
    """A read that stalls past two intervals skips those ticks: they are missed, not read, and
    ticks read plus ticks missed are the schedule's ticks."""
    import time

    fake_nvml(gpus=1)
    source = NvmlSource()
    original = source.read_now
    calls = []

    def stalling(elapsed: float):  # type: ignore[no-untyped-def]
        calls.append(elapsed)
        if len(calls) == 3:
            time.sleep(0.18)  # past three 50 ms intervals
        return original(elapsed)

    source.read_now = stalling  # type: ignore[method-assign]
    out = tmp_path / "run.parquet"
    result = record(source, RecordConfig(out=out, interval_s=0.05, duration_s=1.0))
    assert result.missed_ticks >= 1
    assert result.ticks == len(calls) == read_trace(out).table().num_rows
    assert result.ticks + result.missed_ticks == 20
