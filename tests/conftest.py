"""Shared fixtures: the real-data folder, a CLI runner, the fake NVML seam."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

import powerkit.telemetry.nvml as nvml_module
from powerkit.cli import app
from tests.fake_nvml import FakeNvml

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"


@pytest.fixture(autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the cap journal of every test in a folder of its own (never the user's)."""
    folder = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("POWERKIT_STATE_DIR", str(folder))
    return folder


@pytest.fixture
def realdata() -> Path:
    """Return ../shared/realdata, skipping the test when it is absent."""
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
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


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small policy trained on the simulator (50 steps): for tests of what reads one."""
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
