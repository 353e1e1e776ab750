"""Shared fixtures: the real-data folder, a CLI runner, the fake NVML seam."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import powerkit.telemetry.nvml as nvml_module
from powerkit.cli import app
from tests.fake_nvml import FakeNvml
from tests.promserver import free_port

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests on a real Ray cluster, a real Prometheus server or a real browser are slow:
    `make test` leaves them out here (CI runs every test; so does `make test-all`)."""
    for item in items:
        if {"cluster", "history"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _ray_cli() -> str:
    exe = Path(sys.executable).with_name("ray")
    if not exe.exists():
        if os.environ.get("CI"):
            pytest.fail("ray is missing in CI; make install installs powerkit[ray]")
        pytest.skip("ray is not installed (pip install 'powerkit[ray]')")
    return str(exe)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A head node (1 CPU) and a worker node (1 CPU) on localhost, one for the whole run; its
    address. A test
    cluster on loopback runs without Ray's token authentication (RAY_AUTH_MODE=disabled, for
    its nodes and for the commands that join it)."""
    ray = _ray_cli()
    port = free_port()
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--disable-usage-stats", "--num-cpus=1"]
    subprocess.run(
        [ray, "start", "--head", f"--port={port}", "--include-dashboard=false", *common],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    address = f"127.0.0.1:{port}"
    try:
        subprocess.run(
            [ray, "start", f"--address={address}", *common],
            check=True,
            capture_output=True,
            env=env,
            timeout=120,
        )
        yield address
    finally:
        import ray as ray_module

        if ray_module.is_initialized():  # this process joined the cluster: leave it first
            ray_module.shutdown()
        subprocess.run([ray, "stop", "--force"], capture_output=True, env=env, timeout=120)
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


@pytest.fixture(autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the cap journal (and the machine's GPU locks) of every test in a folder of its
    own (never the user's, never the machine's)."""
    folder = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("POWERKIT_STATE_DIR", str(folder))
    monkeypatch.setenv("POWERKIT_LOCK_DIR", str(folder / "locks"))
    return folder


@pytest.fixture
def realdata() -> Path:
    """Return ../shared/realdata, skipping the test when it is absent."""
    if not REALDATA.is_dir():
        pytest.skip(
            "../shared/realdata (real GPU power logs of other projects, with their SOURCES.md) "
            "is not beside this clone"
        )
    return REALDATA


class Cli:
    """Runs the real CLI in-process; stdout and stderr kept apart."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str | Path):  # type: ignore[no-untyped-def]
        return self.runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    def json(self, *args: str | Path) -> dict:  # type: ignore[type-arg]
        result = self(*args, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)


@pytest.fixture(scope="session")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small policy trained on the simulator (50 steps), once a run: for tests of what
    reads one (none writes it)."""
    out = tmp_path_factory.mktemp("policy") / "p.npz"
    r = Cli()("control", "train", "--budget", "314.6W", "--steps", "50", "--out", out)
    assert r.exit_code == 0, r.stderr
    return out


@pytest.fixture
def cli() -> Cli:
    """Return a runner for ``powerkit`` commands."""
    return Cli()


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeNvml]:
    """Return a factory that installs a FakeNvml at the NVML seam."""

    def install(**kwargs: object) -> FakeNvml:
        fake = FakeNvml(**kwargs)  # type: ignore[arg-type]
        monkeypatch.setattr(nvml_module, "pynvml", fake.module)
        return fake

    return install
