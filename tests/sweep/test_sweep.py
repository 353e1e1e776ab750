"""powerkit sweep: plan, backends (sim, cmd, live), authority math, caps restored, CLI."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import powerkit.actuation.journal as journal
from powerkit.actuation.caps import LockedClocks, PowerCaps
from powerkit.actuation.knobs import KnobChannel, Knobs
from powerkit.core.errors import BadInputError, NotPermittedError
from powerkit.sim import get_preset
from powerkit.sweep.authority import analyse
from powerkit.sweep.backends import CmdBackend, LiveBackend, PointRun, SimBackend
from powerkit.sweep.plan import plan_points
from powerkit.sweep.runner import SweepConfig, SweepData, read_sweep, run_sweep, write_sweep
from powerkit.telemetry.nvml import NvmlSource
from powerkit.telemetry.recorder import stop_on_signals
from tests.conftest import Cli
from tests.fake_nvml import FakeNvml


def test_plan_is_randomized_seeded_and_complete() -> None:
    axes = {"group_size": [4.0, 8.0], "concurrency": [1.0, 2.0, 4.0]}
    a = plan_points(axes, repeats=3, seed=1)
    assert len(a) == 18 and [p.order for p in a] == list(range(18))
    assert sorted((p.setting, p.repeat) for p in a) == [(s, r) for s in range(6) for r in range(3)]
    assert [p.setting for p in a] != sorted(p.setting for p in a)  # not in grid order
    assert a == plan_points(axes, repeats=3, seed=1)
    assert a != plan_points(axes, repeats=3, seed=2)
    assert {(p.group_size, p.concurrency) for p in a} == {(g, c) for g in (4, 8) for c in (1, 2, 4)}


def constructed(
    powers: dict[tuple[int, int], list[float]],
    tokens: dict[tuple[int, int], float],
    durations: dict[tuple[int, int], float] | None = None,
) -> SweepData:
    """A sweep whose run at (group, conc) has constant power per repeat, as given."""
    groups = sorted({g for g, _ in powers})
    concs = sorted({c for _, c in powers})
    axes = {"group_size": [float(g) for g in groups], "concurrency": [float(c) for c in concs]}
    data = SweepData(
        SweepConfig(axes=axes),
        "sim",
        None,
        400.0,
        2,
        {"group_size": 8, "concurrency": 4, "power_cap_w": None},
    )
    repeats = len(next(iter(powers.values())))
    for p in plan_points(axes, repeats, seed=0):
        key = (p.group_size, p.concurrency)
        level = powers[key][p.repeat]
        run = PointRun(
            p,
            0.0,
            np.arange(10.0),
            np.full((2, 10), level),
            tokens[key],
            (durations or {}).get(key),
        )
        data.runs.append(run)
    return data


def test_authority_math_on_a_constructed_table() -> None:
    powers = {
        (4, 2): [100, 100],
        (8, 2): [100, 100],
        (16, 2): [100, 100],
        (4, 4): [150, 152],
        (8, 4): [160, 158],
        (16, 4): [200, 200],
        (4, 8): [150, 150],
        (8, 8): [180, 180],
        (16, 8): [190, 190],
    }
    tokens = {k: 10.0 * k[1] + k[0] for k in powers}
    report = analyse(constructed(powers, tokens))
    by_knob = {a.knob: a for a in report.authority}
    g = by_knob["group_size"]  # concurrency held at its default, 4
    assert g.fixed == {"concurrency": 4}
    assert g.mean_power_w == [151.0, 159.0, 200.0]
    assert g.swing == pytest.approx((200 - 151) / 200)
    assert g.swing_nameplate == pytest.approx((200 - 151) / 400)
    assert g.throughput_ratio == pytest.approx(56 / 44)
    assert g.verdict == "occupancy"
    lo, hi = g.swing_ci
    assert lo <= g.swing <= hi and hi - lo < 0.05
    c = by_knob["concurrency"]  # group size held at its default, 8
    assert c.fixed == {"group_size": 8} and c.mean_power_w == [100.0, 159.0, 180.0]
    row = next(r for r in report.points if (r.group_size, r.concurrency) == (4, 4))
    assert row.mean_power_w == 151.0 and row.mean_power_w_std == pytest.approx(
        np.std([150, 152], ddof=1)
    )
    assert row.j_per_token == pytest.approx(151 * 2 / 44)
    assert row.wh_per_1k_tokens == pytest.approx(151 * 2 / 44 * 1000 / 3600)
    assert row.repeats == 2


def test_verdicts_volume_and_none() -> None:
    flat = {(4, 4): [100.0], (8, 4): [101.0], (16, 4): [102.0]}
    tokens = dict.fromkeys(flat, 50.0)
    longer = analyse(constructed(flat, tokens, {(4, 4): 10.0, (8, 4): 20.0, (16, 4): 40.0}))
    assert longer.authority[0].verdict == "volume"
    assert longer.authority[0].swing_ci is None  # one repeat: no interval
    same = analyse(constructed(flat, tokens, dict.fromkeys(flat, 10.0)))
    assert same.authority[0].verdict == "none"


def test_sim_sweep_shows_the_mechanism() -> None:
    config = SweepConfig(
        axes={"group_size": [4.0, 16.0], "concurrency": [1.0, 8.0]},
        warmup_s=60,
        point_s=2400,
        repeats=2,
    )
    tp4 = {
        a.knob: a
        for a in analyse(run_sweep(SimBackend(get_preset("a100-72b-tp4")), config)).authority
    }
    assert tp4["group_size"].swing <= 0.05 and tp4["group_size"].verdict != "occupancy"
    assert 0.15 <= tp4["concurrency"].swing <= 0.25 and tp4["concurrency"].verdict == "occupancy"
    one = {
        a.knob: a for a in analyse(run_sweep(SimBackend(get_preset("a100-7b")), config)).authority
    }
    assert one["group_size"].swing > 0.2 and one["group_size"].verdict == "occupancy"


def test_sim_cap_axis_clips_and_slows() -> None:
    config = SweepConfig(axes={"power_cap_w": [250.0, 400.0]}, warmup_s=60, point_s=1200)
    report = analyse(run_sweep(SimBackend(get_preset("a100-7b")), config))
    capped, free = sorted(report.points, key=lambda r: r.power_cap_w)
    assert capped.p95_power_w < free.p95_power_w and capped.tokens_per_s < free.tokens_per_s


WORKLOAD = """
import json, sys, time
group, conc = int(sys.argv[1]), int(sys.argv[2])
if group == 3:
    sys.exit(3)             # a failing point
t0 = time.time()
while time.time() - t0 < 0.6:
    sum(range(10000))       # burn a little CPU
if conc == 9:
    print("done, but no JSON")
else:
    print(json.dumps({"tokens": 1000 * group * conc, "seconds": time.time() - t0}))
"""


def test_cmd_backend_runs_each_point_and_reports_failures(
    tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake_nvml(gpus=1)
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    backend = CmdBackend(f"{sys.executable} {script} {{group_size}} {{concurrency}}", NvmlSource())
    config = SweepConfig(
        axes={"group_size": [2.0, 3.0], "concurrency": [1.0, 9.0]},
        warmup_s=0.1,
        point_s=5,
        interval_s=0.05,
    )
    data = run_sweep(backend, config)
    runs = {(r.point.group_size, r.point.concurrency): r for r in data.runs}
    assert runs[(2, 1)].error is None and runs[(2, 1)].power_w.size > 0
    assert runs[(2, 1)].tokens_per_s == pytest.approx(2000 / runs[(2, 1)].duration_s, rel=1e-6)
    assert runs[(3, 1)].error.startswith("exit code 3")
    assert "no JSON line" in runs[(2, 9)].error
    report = analyse(data)
    assert len(report.failures) == 3
    ok = next(p for p in report.points if (p.group_size, p.concurrency) == (2, 1))
    assert ok.repeats == 1 and ok.tokens_per_s > 0
    out = tmp_path / "s.parquet"
    write_sweep(data, out, "h")
    again = analyse(read_sweep(out))
    assert again.points == report.points


def test_cmd_placeholder_without_value(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake_nvml(gpus=1)
    backend = CmdBackend("echo {power_cap_w}", NvmlSource())
    data = run_sweep(backend, SweepConfig(axes={"concurrency": [1.0]}, warmup_s=0, point_s=1))
    assert "placeholder" in data.runs[0].error


def test_live_backend_drives_a_running_workload(
    tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake_nvml(gpus=2)
    channel_path, tokens = tmp_path / "knobs.json", tmp_path / "tokens.jsonl"
    seen: list[int] = []
    done = threading.Event()

    def workload() -> None:  # polls the channel; makes tokens at a rate set by concurrency
        knobs, total, last = Knobs(channel_path), 0.0, time.time()
        while not done.is_set():
            if knobs.poll():
                seen.append(knobs.get("concurrency"))
            now = time.time()
            total += 100 * (knobs.get("concurrency") or 0) * (now - last)
            last = now
            with tokens.open("a") as fh:
                fh.write(json.dumps({"ts": now, "tokens": total}) + "\n")
            time.sleep(0.02)

    thread = threading.Thread(target=workload)
    thread.start()
    try:
        backend = LiveBackend(KnobChannel(channel_path), NvmlSource(), tokens)
        config = SweepConfig(
            axes={"concurrency": [2.0, 8.0]}, warmup_s=0.2, point_s=0.6, interval_s=0.05, seed=3
        )
        report = analyse(run_sweep(backend, config))
    finally:
        done.set()
        thread.join()
    assert sorted(seen) == [2, 8]
    rates = {p.concurrency: p.tokens_per_s for p in report.points}
    assert rates[8] / rates[2] == pytest.approx(4, rel=0.25)
    assert json.loads(channel_path.read_text())["version"] == 2


def test_caps_restored_after_an_exception(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake = fake_nvml(gpus=2)
    source = NvmlSource()
    with pytest.raises(RuntimeError), PowerCaps(source.gpus) as caps:
        caps.set(300.0)
        assert fake.limits_mw == [300_000, 300_000]
        raise RuntimeError("the sweep failed")
    assert fake.limits_mw == [700_000, 700_000]


def test_caps_restored_on_sigterm(tmp_path: Path, fake_nvml: Callable[..., FakeNvml]) -> None:
    fake = fake_nvml(gpus=1)
    source = NvmlSource()
    backend = CmdBackend(f'{sys.executable} -c "import time; time.sleep(30)"', source)
    config = SweepConfig(axes={"power_cap_w": [250.0, 300.0]}, warmup_s=0.1, point_s=20)
    stop = threading.Event()
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    t0 = time.monotonic()
    with stop_on_signals(stop), PowerCaps(source.gpus) as caps:
        data = run_sweep(backend, config, caps=caps, stop=stop)
        assert fake.limits_mw[0] in (250_000, 300_000)  # a cap was in force during the point
    timer.cancel()
    assert time.monotonic() - t0 < 15 and data.interrupted
    assert fake.limits_mw == [700_000]


def test_locked_clocks_per_point_and_reset_on_exit(
    tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake = fake_nvml(gpus=2)
    source = NvmlSource()
    seen, script = tmp_path / "seen.txt", tmp_path / "clocked.py"
    script.write_text(
        "import json, sys\n"
        f"open({str(seen)!r}, 'a').write(sys.argv[1] + '\\n')\n"
        "print(json.dumps({'tokens': 10, 'seconds': 1}))\n"
    )
    cmd = f"{sys.executable} {script} {{gpu_frequency_mhz}}"
    backend = CmdBackend(cmd, source)
    config = SweepConfig(
        axes={"gpu_frequency_mhz": [1980.0, 1200.0]}, warmup_s=0, point_s=0.3, interval_s=0.05
    )
    with pytest.raises(BadInputError, match="locked clocks"):
        run_sweep(backend, config)
    locks: list[int | None] = []
    with LockedClocks(source.gpus) as clocks:
        assert [e.kind for e in journal.read_entries()] == ["locked_clocks"] * 2
        original = clocks.set
        clocks.set = lambda mhz: (original(mhz), locks.append(fake.locked_mhz[0]))  # type: ignore[method-assign]
        data = run_sweep(backend, config, clocks=clocks)
        with pytest.raises(BadInputError, match="outside GPU 0's supported SM clocks 345-1980"):
            clocks.set(2100)
    assert sorted(locks) == [1200, 1980]
    assert fake.locked_mhz == [None, None] and journal.read_entries() == []
    assert sorted(float(x) for x in seen.read_text().split()) == [1200.0, 1980.0]
    assert {r.point.gpu_frequency_mhz for r in data.runs} == {1200.0, 1980.0}
    out = tmp_path / "f.parquet"
    write_sweep(data, out, "h")
    assert {r.point.gpu_frequency_mhz for r in read_sweep(out).runs} == {1200.0, 1980.0}


def test_locked_clocks_not_permitted(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake_nvml(gpus=1, permit_limits=False)
    source = NvmlSource()
    with (
        pytest.raises(NotPermittedError, match="locking GPU clocks"),
        LockedClocks(source.gpus) as clocks,
    ):
        clocks.set(1200)


def test_sim_frequency_axis_lowers_power_and_throughput(cli: Cli, tmp_path: Path) -> None:
    doc = cli.json(
        "sweep",
        "--backend",
        "sim",
        "--preset",
        "a100-7b",
        "--gpu-frequency",
        "1410,1110,810",
        "--point",
        "60s",
        "--warmup",
        "10s",
        "--out",
        str(tmp_path / "f.parquet"),
    )
    by_f = {p["gpu_frequency_mhz"]: p for p in doc["points"]}
    powers = [by_f[f]["mean_power_w"] for f in (1410, 1110, 810)]
    rates = [by_f[f]["tokens_per_s"] for f in (1410, 1110, 810)]
    assert powers[0] > powers[1] > powers[2] and rates[0] > rates[1] > rates[2]
    assert by_f[810]["j_per_token"] < by_f[1410]["j_per_token"]  # lower clocks: fewer J/token
    r = cli(
        "sweep",
        "--backend",
        "sim",
        "--preset",
        "a100-7b",
        "--gpu-frequency",
        "3000",
        "--out",
        str(tmp_path / "g.parquet"),
    )
    assert r.exit_code == 2 and "3000 MHz is outside" in r.stderr


def test_caps_not_permitted(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake_nvml(gpus=1, permit_limits=False)
    source = NvmlSource()
    with pytest.raises(NotPermittedError, match="run as root"), PowerCaps(source.gpus) as caps:
        caps.set(300.0)


def test_cli_sweep_json_show_and_html(cli: Cli, tmp_path: Path) -> None:
    out, html = tmp_path / "sweep.parquet", tmp_path / "sweep.html"
    doc = cli.json(
        "sweep",
        "--backend",
        "sim",
        "--preset",
        "a100-72b-tp4",
        "--group-size",
        "4,16",
        "--concurrency",
        "1,8",
        "--point",
        "20m",
        "--warmup",
        "1m",
        "--repeats",
        "2",
        "--out",
        out,
        "--html",
        html,
    )
    assert set(doc) >= {"points", "authority", "nameplate_w", "backend", "preset"}
    assert doc["backend"] == "sim" and doc["preset"] == "a100-72b-tp4" and doc["nameplate_w"] == 400
    point = doc["points"][0]
    assert set(point) >= {
        "group_size",
        "concurrency",
        "power_cap_w",
        "mean_power_w",
        "p95_power_w",
        "max_power_w",
        "tokens_per_s",
        "j_per_token",
        "repeats",
    }
    assert point["power_cap_w"] is None and point["repeats"] == 2
    auth = {a["knob"]: a for a in doc["authority"]}
    assert set(auth["concurrency"]) >= {
        "knob",
        "swing",
        "swing_ci",
        "swing_nameplate",
        "throughput_ratio",
        "verdict",
    }
    assert auth["concurrency"]["verdict"] == "occupancy"
    assert cli.json("sweep", "show", out)["points"] == doc["points"]
    assert "Pareto front" in html.read_text()


def test_cli_sweep_bad_inputs(cli: Cli, tmp_path: Path) -> None:
    r = cli("sweep", "--group-size", "4,8")
    assert r.exit_code == 2 and "--out is needed" in r.stderr
    r = cli("sweep", "--out", tmp_path / "s.parquet")
    assert r.exit_code == 2 and "nothing to sweep" in r.stderr
    r = cli("sweep", "--out", tmp_path / "s.parquet", "--group-size", "4,x")
    assert r.exit_code == 2 and "whole numbers" in r.stderr
    r = cli("sweep", "--backend", "cmd", "--out", tmp_path / "s.parquet", "--concurrency", "1")
    assert r.exit_code == 2 and "--run" in r.stderr
    r = cli("sweep", "show", tmp_path / "missing.parquet")
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_a_killed_sweep_keeps_its_finished_points_and_resumes(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL in the middle of a sweep: the finished points are on disk, --resume runs only
    the rest, and the result equals a sweep that was never interrupted."""
    import os
    import signal
    import subprocess
    import sys

    from powerkit.sweep.runner import checkpoint_path, read_sweep

    out = tmp_path / "s.parquet"
    args = [
        "sweep",
        "--preset",
        "a100-7b",
        "--group-size",
        "4,8,16",
        "--concurrency",
        "2,8",
        "--point",
        "2m",
        "--warmup",
        "10s",
        "--seed",
        "3",
    ]
    # A real process, killed by SIGKILL when its fourth point starts (no handler runs).
    script = (
        "import os, signal, sys\n"
        "from powerkit.sweep import backends\n"
        "real, count = backends.SimBackend.run, [0]\n"
        "def run(self, *a, **k):\n"
        "    count[0] += 1\n"
        "    if count[0] == 4:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(self, *a, **k)\n"
        "backends.SimBackend.run = run\n"
        "from powerkit.cli import main\n"
        "sys.argv = ['powerkit', *sys.argv[1:]]\n"
        "main()\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", script, *args, "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not out.exists()  # out is written only once every point has run
    partial = read_sweep(checkpoint_path(out))
    assert partial.interrupted and len(partial.runs) == 3
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".powerkit-tmp")]
    r = cli(*args, "--out", out)
    assert r.exit_code == 2 and "an unfinished sweep into" in r.stderr and "--resume" in r.stderr
    r = cli("sweep", "show", checkpoint_path(out))
    assert r.exit_code == 0 and "an unfinished sweep (3 run(s) stored)" in r.stderr
    r = cli("pfi", "compute", checkpoint_path(out))
    assert r.exit_code == 2 and "an unfinished sweep" in r.stderr
    r = cli(*args[:-2], "--seed", "4", "--out", out, "--resume")
    assert r.exit_code == 2 and "seed differ" in r.stderr
    resumed = cli(*args, "--out", out, "--resume", "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert "resuming" not in resumed.stdout
    straight = tmp_path / "straight.parquet"
    assert cli(*args, "--out", straight, "--json").exit_code == 0
    a, b = read_sweep(out), read_sweep(straight)
    assert not a.interrupted and len(a.runs) == len(b.runs) == 6
    for x, y in zip(a.runs, b.runs, strict=True):
        assert x.point == y.point and np.array_equal(x.power_w, y.power_w)
    r = cli(*args, "--out", out, "--resume")
    assert r.exit_code == 2 and "finished sweep" in r.stderr


def test_a_sweep_job_runs_from_python_and_resumes(tmp_path: Path) -> None:
    """The library job the commands share: stored as it goes, told through callbacks; a
    finished sweep is not resumed (nothing is left to run) and stays as it was."""
    import contextlib

    from powerkit.sweep.job import SweepCallbacks, run_and_store, sweep_config
    from powerkit.sweep.runner import read_sweep

    config = sweep_config(warmup="1m", point="5m", interval="1s", cooldown="0s", repeats=1, seed=0)
    config.axes = {"concurrency": [1.0, 8.0]}
    told: list[str] = []
    points: list[int] = []

    @contextlib.contextmanager
    def progress(total: int):  # type: ignore[no-untyped-def]
        points.append(total)
        yield lambda result, count: told.append(f"{result.point.order + 1}/{count}")

    out = tmp_path / "s.parquet"
    callbacks = SweepCallbacks(progress=progress, info=told.append, warning=told.append)
    assert (
        run_and_store(SimBackend(get_preset("a100-7b")), config, None, out, callbacks=callbacks)
        == out
    )
    assert points == [2] and told == ["1/2", "2/2"]
    assert len(read_sweep(out).runs) == 2
    before = out.read_bytes()
    with pytest.raises(BadInputError, match="is a finished sweep"):
        run_and_store(
            SimBackend(get_preset("a100-7b")), config, None, out, resume=True, callbacks=callbacks
        )
    assert out.read_bytes() == before
