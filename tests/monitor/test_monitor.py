"""powerkit.Monitor against the fake NVML (and the simulator in a child process for SIGTERM).

The fake's energy counter rises by exactly 50 J per GPU at every read, whenever it happens:
a window measured by the counter holds 50 J for each reading taken inside it after its
start (the sampler's, the nested windows' edges and its own end).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from powerkit.core.errors import BadInputError
from powerkit.monitor.session import Monitor, MonitorError, _measure, _Meter
from powerkit.trace.parquet import read_parquet_trace
from tests.conftest import Cli
from tests.fake_nvml import FakeNvml

ROOT = Path(__file__).resolve().parents[2]


def test_a_window_by_the_counter_holds_every_reading_inside_it(
    fake_nvml: Callable[..., FakeNvml], tmp_path: Path
) -> None:
    fake_nvml(gpus=2)
    with Monitor(interval="50ms", out=tmp_path / "run.parquet") as mon, mon.window("step", 3000):
        time.sleep(0.3)
    (m,) = mon.measurements
    assert m.method == "counter" and m.coverage == 1.0 and m.samples >= 3
    assert m.energy_j == {0: 50.0 * (m.samples + 1), 1: 50.0 * (m.samples + 1)}
    assert m.total_energy_j == 2 * 50.0 * (m.samples + 1)
    assert m.tokens_per_j == pytest.approx(3000 / m.total_energy_j)
    assert 0.3 <= m.time_s < 0.5
    trace = read_parquet_trace(tmp_path / "run.parquet")
    totals = trace.meta.extra["monitor"]["windows"]  # type: ignore[index]
    assert totals == {"step": {"windows": 1, "time_s": m.time_s, "energy_j": m.total_energy_j}}
    assert mon.totals == totals


def test_windows_nest_and_overlap(fake_nvml: Callable[..., FakeNvml], tmp_path: Path) -> None:
    fake_nvml(gpus=1)
    with Monitor(interval="50ms") as mon:
        mon.begin_window("outer")
        mon.begin_window("a")
        time.sleep(0.12)
        mon.begin_window("b")  # overlaps a
        time.sleep(0.12)
        a = mon.end_window("a")
        time.sleep(0.12)
        b = mon.end_window("b")
        outer = mon.end_window("outer")
        with pytest.raises(MonitorError, match="'b' is not open"):
            mon.end_window("b")
        mon.begin_window("c")
        with pytest.raises(MonitorError, match="'c' is already open"):
            mon.begin_window("c")
    assert [m.name for m in mon.measurements] == ["a", "b", "outer"]
    assert outer.start_epoch_s < a.start_epoch_s < b.start_epoch_s
    assert a.start_epoch_s + a.time_s < b.start_epoch_s + b.time_s
    assert outer.time_s > max(a.time_s, b.time_s)
    # a holds its samples, b's start and its own end; outer: its samples, 4 inner edges, its end
    assert a.energy_j[0] == 50.0 * (a.samples + 2)
    assert b.energy_j[0] == 50.0 * (b.samples + 2)
    assert outer.energy_j[0] == 50.0 * (outer.samples + 4 + 1)


def test_without_a_counter_the_trapezoid_and_a_window_shorter_than_the_interval(
    fake_nvml: Callable[..., FakeNvml],
) -> None:
    """The fake draws 100-149 W (GPU 0): a window's trapezoid is its time at that power; a
    10 ms window between two 1 s ticks is its two edges' trapezoid."""
    fake_nvml(gpus=1, energy=False)
    with Monitor(interval="1s") as mon:
        time.sleep(0.2)  # (past the first tick, the next a second away)
        with mon.window("short"):
            time.sleep(0.01)
        with mon.window("long"):
            time.sleep(0.25)
    short, long = mon.measurements
    for m in (short, long):
        assert m.method == "trapezoid" and m.coverage == pytest.approx(1.0)
        assert 100 * m.time_s <= m.energy_j[0] <= 150 * m.time_s
    assert short.samples == 0 and short.time_s < 0.5


def test_the_arithmetic_of_a_window() -> None:
    """Constant 100 W read at 0, 0.1, 0.2 and an edge at 0.25: 25 J; a hole of more than five
    intervals is not integrated (coverage); a counter with a hole gives way to the trapezoid."""

    def window(times: list[float], counters: list[float], edges: tuple[int, int] = (0, -1)):  # type: ignore[no-untyped-def]
        meter, marks = _Meter(1, 0.1), []
        for k, (t, c) in enumerate(zip(times, counters, strict=True)):
            reading = {"power_w": np.array([100.0]), "energy_j": np.array([c])}
            meter.add(1e9 + t, reading, edge=k in (0, len(times) - 1))
            marks.append(meter.mark())
        return _measure("w", marks[edges[0]], marks[edges[1]], None, [0])

    nan = float("nan")
    m = window([0.0, 0.1, 0.2, 0.25], [nan] * 4)
    assert m.energy_j[0] == pytest.approx(25.0) and m.method == "trapezoid" and m.samples == 2
    m = window([0.0, 0.1, 1.0, 1.1], [nan] * 4)
    assert m.energy_j[0] == pytest.approx(20.0) and m.coverage == pytest.approx(0.2 / 1.1)
    m = window([0.0, 0.1, 0.2, 0.25], [5.0, 15.0, nan, 40.0])
    assert m.method == "trapezoid" and m.energy_j[0] == pytest.approx(25.0)
    m = window([0.0, 0.1, 0.2, 0.25], [5.0, 15.0, 30.0, 40.0])
    assert m.method == "counter" and m.energy_j[0] == 35.0 and m.coverage == 1.0
    # a window opened after the hole has a whole counter again
    m = window([0.0, 0.1, 0.2, 0.25], [5.0, nan, 30.0, 40.0], edges=(2, 3))
    assert m.method == "counter" and m.energy_j[0] == 10.0


def test_an_error_in_the_loop_stops_the_sampler_and_finalizes_the_file(
    fake_nvml: Callable[..., FakeNvml], tmp_path: Path
) -> None:
    fake_nvml(gpus=1)
    out = tmp_path / "run.parquet"
    with (
        pytest.raises(ZeroDivisionError),
        Monitor(interval="50ms", out=out) as mon,
        mon.window("w"),
    ):
        # until the sampler has read twice (a fixed sleep lost ticks on a loaded machine)
        deadline = time.monotonic() + 10
        while mon._source is not None and mon._source.meter.samples < 2:
            assert time.monotonic() < deadline, "the sampler read fewer than 2 times in 10 s"
            time.sleep(0.01)
        _ = 1 / 0
    assert mon.measurements == [] and mon.result is not None and mon.result.samples >= 2
    assert read_parquet_trace(out).extent()[2] == mon.result.samples
    assert not (tmp_path / "run.parquet.parts").exists()


def test_a_failing_sampler_surfaces_at_the_next_call(
    fake_nvml: Callable[..., FakeNvml],
) -> None:
    import pynvml

    fake = fake_nvml(gpus=1)
    mon = Monitor(interval="20ms").start()
    try:
        mon.begin_window("w")
        fake.module.nvmlDeviceGetPowerUsage.side_effect = pynvml.NVMLError_GpuIsLost()
        time.sleep(0.3)
        with pytest.raises(MonitorError, match="sampler failed"):
            mon.end_window("w")
        with pytest.raises(MonitorError, match="sampler failed"):
            mon.step(tokens=1)
    finally:
        mon.close()


def test_steps_become_the_trace_s_annotations(
    fake_nvml: Callable[..., FakeNvml], tmp_path: Path
) -> None:
    fake_nvml(gpus=1)
    out = tmp_path / "run.parquet"
    with Monitor(interval="20ms", out=out) as mon:
        for _ in range(3):
            time.sleep(0.1)
            mon.step(tokens=500)
        time.sleep(0.1)
    table = read_parquet_trace(out).table()
    steps = table.column("step").to_pylist()
    # step 1 from the start, then one more at each step(): the 4th is the one under way
    assert None not in steps and sorted(set(steps)) == [1, 2, 3, 4]
    assert max(t for t in table.column("tokens").to_pylist() if t is not None) == 1500


def test_n_steps_in_n_steps_out_with_their_energy(tmp_path: Path, cli: Cli) -> None:
    """The simulator measured by the Monitor's windows around 12 steps, and the same run
    read back by `energy --steps trace`: 12 steps numbered 1-12, the same tokens, each
    energy within what one interval at each edge can hold (a boundary is the first sample
    after the step's own edge)."""
    out = tmp_path / "run.parquet"
    with Monitor(backend="sim", interval="20ms", out=out, preset="a100-7b") as mon:
        for i in range(12):
            with mon.window("step", tokens=100 + i):
                time.sleep(0.08 + 0.01 * (i % 3))
            mon.step(tokens=100 + i)
        measured = [m for m in mon.measurements if m.name == "step"]
    doc = cli.json("energy", out, "--steps", "trace")
    steps = doc["steps"]
    assert [s["step"] for s in steps] == list(range(1, 13))
    assert [s["tokens"] for s in steps] == [100 + i for i in range(12)]
    peak = cli.json("info", out)["max_power_w"] * cli.json("info", out)["gpus"]
    for step, m in zip(steps, measured, strict=True):
        assert step["energy_j"] == pytest.approx(m.total_energy_j, abs=2 * 0.02 * peak)
        assert step["duration_s"] == pytest.approx(m.time_s, abs=2 * 0.02 + 0.005)


def test_bad_options_are_one_line(fake_nvml: Callable[..., FakeNvml], tmp_path: Path) -> None:
    fake_nvml(gpus=1)
    with pytest.raises(BadInputError, match="nvml, amdsmi or sim"):
        Monitor(backend="amd")
    with pytest.raises(BadInputError, match="file:PATH"):
        Monitor(knobs="knobs.json")
    with pytest.raises(BadInputError, match=r"^interval '1ms': from 10ms to 1h$"):
        Monitor(interval="1ms")  # (its own parameter named, not record's flag)
    (tmp_path / "kept.parquet").write_bytes(b"mine")
    with pytest.raises(BadInputError, match="exists"):
        Monitor(out=tmp_path / "kept.parquet").start()
    assert (tmp_path / "kept.parquet").read_bytes() == b"mine"
    with pytest.raises(MonitorError, match="not started"):
        Monitor().begin_window("w")


def test_the_knob_channel_reads_what_control_run_writes(
    fake_nvml: Callable[..., FakeNvml], tmp_path: Path
) -> None:
    from powerkit.actuation.knobs import KnobChannel

    fake_nvml(gpus=1)
    path = tmp_path / "knobs.json"
    channel = KnobChannel(path)
    try:
        with Monitor(interval="50ms", knobs=f"file:{path}") as mon:
            assert mon.knobs is not None and not mon.knobs.poll()
            channel.write({"concurrency": 4})
            assert mon.knobs.poll() and mon.knobs.get("concurrency") == 4
    finally:
        channel.close()


CHILD = """
import sys, time
from powerkit.monitor.session import Monitor
mon = Monitor(backend="sim", interval="50ms", out=sys.argv[1]).start()
mon.begin_window("forever")
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def test_sigterm_finalizes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "run.parquet"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(out)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 128 + signal.SIGTERM
    assert read_parquet_trace(out).extent()[2] >= 3
    assert not (tmp_path / "run.parquet.parts").exists()


def test_every_command_reads_what_it_writes(
    fake_nvml: Callable[..., FakeNvml], tmp_path: Path, cli: Cli
) -> None:
    """Steps into `energy --steps trace`, the trace into `windows`; a dataset folder; sync()
    called at every edge."""
    fake_nvml(gpus=2)
    out = tmp_path / "run.parquet"
    edges = []
    with Monitor(interval="20ms", out=out, sync=lambda: edges.append(1)) as mon:
        for _ in range(3):
            with mon.window("step", tokens=100):
                time.sleep(0.1)
            mon.step(tokens=100)
        time.sleep(0.05)
    assert len(edges) == 6
    doc = cli.json("energy", out, "--steps", "trace")
    assert [s["step"] for s in doc["steps"]][:2] == [1, 2] and doc["steps"][0]["tokens"] == 100
    assert cli("windows", out, "--budget", "200W").exit_code == 0
    folder = tmp_path / "ds/"
    with Monitor(interval="20ms", out=f"{folder}/") as mon:
        time.sleep(0.1)
    assert read_parquet_trace(folder).extent()[2] >= 4


def test_the_monitor_serves_its_metrics(fake_nvml: Callable[..., FakeNvml]) -> None:
    import socket
    import urllib.request

    fake_nvml(gpus=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Monitor(interval="50ms", serve_metrics=f"127.0.0.1:{port}") as mon:
        time.sleep(0.3)
        assert mon.metrics_url == f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(mon.metrics_url, timeout=5) as page:
            assert "powerkit_gpu_power_watts" in page.read().decode()
    with socket.socket() as busy:  # a port in use: refused at start, the GPUs let go
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(BadInputError):
            Monitor(serve_metrics=f"127.0.0.1:{busy.getsockname()[1]}").start()


def test_a_failing_sampler_surfaces_on_leaving_the_block(
    fake_nvml: Callable[..., FakeNvml],
) -> None:
    import pynvml

    fake = fake_nvml(gpus=1)
    with pytest.raises(MonitorError, match="sampler failed"), Monitor(interval="20ms"):
        fake.module.nvmlDeviceGetPowerUsage.side_effect = pynvml.NVMLError_GpuIsLost()
        time.sleep(0.3)


def test_the_docs_list_every_argument() -> None:
    """docs/monitor.md's table names every argument Monitor takes."""
    import inspect

    text = (ROOT / "docs" / "monitor.md").read_text()
    names = [n for n in inspect.signature(Monitor.__init__).parameters if n != "self"]
    assert [n for n in names if f"| `{n}` |" not in text] == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"interval": float("inf")}, "interval inf: a positive number of seconds"),
        ({"interval": -0.1}, "interval -0.1: a positive number of seconds"),
        ({"interval": [1]}, "interval \\[1\\]: a duration"),
        ({"interval": 0.001}, "from 10ms to 1h"),
        ({"interval": 7200}, "from 10ms to 1h"),
        ({"seed": -1}, "seed -1: a whole number from 0"),
        ({"seed": 1.5}, "seed 1.5: a whole number from 0"),
        ({"sync": 5}, "sync 5: give a function to call"),
        ({"flush": "soon"}, "soon"),
        ({"sensor": "meter"}, "sensor 'meter': one of instant, average_1s"),
    ],
)
def test_wrong_arguments_are_powerkit_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        Monitor(backend="sim", **options)  # type: ignore[arg-type]


def test_the_simulated_job_read_through_a_sensor(tmp_path: Path, cli: Cli) -> None:
    """Monitor(backend="sim", sensor=…) records what that sensor reads, and says which."""
    out = tmp_path / "m.parquet"
    with Monitor(backend="sim", interval="50ms", out=out, sensor="a100-power.draw") as mon:
        for _ in range(3):
            time.sleep(0.2)
            mon.step()
    info = cli.json("info", out)
    assert info["power_semantics"] == "a100-power.draw"
    assert info["metadata"]["sensor"]["name"] == "a100-power.draw"


def test_an_interval_in_seconds(tmp_path: Path) -> None:
    assert Monitor(backend="sim", interval=0.1).interval_s == 0.1


@pytest.mark.parametrize("tokens", [float("inf"), float("nan"), -5, 2.5, True, "7"])
def test_tokens_are_a_whole_number_from_0(
    fake_nvml: Callable[..., FakeNvml], tmp_path: Path, tokens: object
) -> None:
    fake_nvml(gpus=1)
    with Monitor(interval="50ms", out=tmp_path / "run.parquet") as mon:
        with pytest.raises(MonitorError, match="a whole number from 0"):
            mon.step(tokens=tokens)  # type: ignore[arg-type]
        assert mon.step(tokens=3.0) == 1  # type: ignore[arg-type]


def test_nothing_is_measured_after_close(
    fake_nvml: Callable[..., FakeNvml], tmp_path: Path
) -> None:
    fake_nvml(gpus=1)
    mon = Monitor(interval="50ms", out=tmp_path / "run.parquet").start()
    mon.close()
    for use in (lambda: mon.step(), lambda: mon.begin_window("w"), lambda: mon.end_window("w")):
        with pytest.raises(MonitorError, match="closed"):
            use()


def test_a_knob_file_that_is_a_pipe_or_huge_is_never_read_whole(tmp_path: Path) -> None:
    from powerkit.actuation.knobs import Knobs

    pipe = tmp_path / "knobs.fifo"
    os.mkfifo(pipe)
    knobs = Knobs(pipe)
    assert knobs.poll() is False and "not a regular file" in (knobs.error or "")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2 << 20))
    knobs = Knobs(big)
    assert knobs.poll() is False and knobs.error is not None
