"""The Ray engine gives the local engine's answers, on a real local Ray cluster (a head and a
worker node on localhost), over a multi-file dataset with gaps — real logs among its hosts."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"
H100 = REALDATA / "smi_8xH100_gpt350m_train_ckpt10_100ms.csv"
RTX = REALDATA / "smi_1xRTX4090_vlm_eval_1s_gaps.csv"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two simulated hosts (a day and a bit: two date partitions each) and, where the shared
    real logs are there, the 8xH100 log (102 gaps) and the RTX 4090 log (86 gaps)."""
    from typer.testing import CliRunner

    from powerkit.cli import app

    work = tmp_path_factory.mktemp("engine")
    runner = CliRunner()
    inputs = []
    for k in (1, 2):
        out = work / f"sim{k}.parquet"
        r = runner.invoke(
            app,
            [
                "record",
                "--backend",
                "sim",
                "--preset",
                "a100-7b",
                "--duration",
                "26h",
                "--interval",
                "5s",
                "--host",
                f"node-{k}",
                "--seed",
                str(k),
                "--out",
                str(out),
                "--quiet",
            ],
        )
        assert r.exit_code == 0, r.output
        inputs.append(str(out))
    real = [str(p) for p in (H100, RTX) if p.exists()]
    folder = work / "fleet"
    r = runner.invoke(app, ["import", *inputs, *real, "--nameplate", "400W", "--out", f"{folder}/"])
    assert r.exit_code == 0, r.output
    return folder


def close(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON documents: integers and strings exactly, floats within 1e-9 relative."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (path, a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


def commands(folder: Path, steps: Path, alloc: Path) -> list[list[str]]:
    return [
        ["jobs", str(folder), "--allocations", str(alloc), "--intensity", "300g/kWh"],
        ["windows", str(folder), "--budget", "250W", "--windows", "30s,5m", "--grid", "5s"],
        [
            "windows",
            str(folder),
            "--budget",
            "60%",
            "--windows",
            "30s",
            "--grid",
            "5s",
            "--scope",
            "sum",
            "--from",
            "2026-01-01T12:00:00Z",
        ],
        ["info", str(folder)],
        ["info", str(folder), "--by", "phase", "--hosts", "node-1,node-2"],
        ["energy", str(folder), "--steps", str(steps), "--wait-below", "150W"],
        ["carbon", "--trace", str(folder), "--region", "US"],
        [
            "oversub",
            str(folder),
            "--grid",
            "5s",
            "--compose",
            "random",
            "--draws",
            "20",
            "--windows",
            "30s,5m",
            "--seed",
            "3",
        ],
    ]


def test_every_engine_command_matches_the_local_engine(
    cli: Cli, cluster: str, dataset: Path, tmp_path: Path
) -> None:
    steps = tmp_path / "steps.csv"
    steps.write_text(
        "step,start\n0,2025-07-26T23:55:00Z\n1,2026-01-01T05:00:00Z\n"
        "2,2026-01-01T23:00:00Z\n3,2026-01-02T01:00:00Z\n"
    )
    alloc = tmp_path / "alloc.csv"  # two jobs, one across midnight (two date partitions)
    alloc.write_text(
        "job,host,gpus,start,end,account\na,node-1,0,2026-01-01T03:00:00Z,2026-01-01T09:30:00Z,x\n"
        "b,node-2,0,2026-01-01T20:00:00Z,2026-01-02T01:15:00Z,y\n"
    )
    assert len(list(dataset.rglob("*.parquet"))) >= 4
    for argv in commands(dataset, steps, alloc):
        local = cli.json(*argv)
        remote = cli.json(*argv, "--engine", "ray", "--address", cluster)
        close(local, remote, " ".join(argv[:1]))


def test_a_killed_worker_changes_nothing(cli: Cli, cluster: str, tmp_path: Path) -> None:
    """Twelve units; a worker executing a task is SIGKILLed mid-job; Ray runs the task again
    and the answer is the local engine's."""
    from typer.testing import CliRunner

    from powerkit.cli import app

    runner = CliRunner()
    parts = []
    for k in range(12):
        out = tmp_path / f"h{k}.parquet"
        r = runner.invoke(
            app,
            [
                "record",
                "--backend",
                "sim",
                "--duration",
                "8h",
                "--interval",
                "0.5s",
                "--host",
                f"h{k:02d}",
                "--seed",
                str(k),
                "--out",
                str(out),
                "--quiet",
            ],
        )
        assert r.exit_code == 0, r.output
        parts.append(str(out))
    folder = tmp_path / "fleet"
    assert runner.invoke(app, ["import", *parts, "--out", f"{folder}/"]).exit_code == 0
    argv = ["windows", str(folder), "--budget", "250W", "--windows", "0.5s,30s,5m"]
    expected = cli.json(*argv)
    killed: list[int] = []
    done = threading.Event()

    def killer() -> None:
        while not done.is_set() and not killed:
            found = subprocess.run(
                ["pgrep", "-f", "ray::_run_unit"], capture_output=True, text=True
            ).stdout.split()
            if found:
                os.kill(int(found[0]), signal.SIGKILL)
                killed.append(int(found[0]))
            time.sleep(0.01)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        got = cli.json(*argv, "--engine", "ray", "--address", cluster)
    finally:
        done.set()
        thread.join()
    assert killed, "no task was caught running"
    close(expected, got)


def test_ray_engine_refusals(cli: Cli, tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("ts,power_w\n2026-01-01T00:00:00Z,100\n2026-01-01T00:00:01Z,110\n")
    r = cli("info", csv, "--engine", "ray")
    assert r.exit_code == 2 and "--engine ray reads Parquet files" in r.stderr
    r = cli("info", csv, "--engine", "spark")
    assert r.exit_code == 2 and "--engine 'spark': one of local, ray" in r.stderr
    r = cli("info", csv, "--address", "auto")
    assert r.exit_code == 2 and "--address goes with --engine ray" in r.stderr


def test_without_ray_installed_it_says_how(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    out = tmp_path / "t.parquet"
    assert cli("record", "--backend", "sim", "--duration", "1m", "--out", out).exit_code == 0
    monkeypatch.setattr(builtins, "__import__", no_ray)
    r = cli("info", out, "--engine", "ray")
    assert r.exit_code == 2 and "pip install 'powerkit[ray]'" in r.stderr
