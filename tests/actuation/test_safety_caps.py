"""No GPU stays capped, and no run restores another's limit: real processes, one fake NVML
whose state (limits, clock locks) lives in a file and so outlives any process, as a real
GPU's settings do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from powerkit.actuation import journal

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
import powerkit.telemetry.nvml as nvml
from tests.fake_nvml import FakeNvml
fake = FakeNvml(gpus=2, shared=Path({state!r}))
nvml.pynvml = fake.module
from powerkit.cli import app
app(sys.argv[1:], prog_name="powerkit")
"""


def powerkit(state: Path, *args: str) -> subprocess.Popen[str]:
    """Start ``powerkit ARGS`` on the shared fake GPUs."""
    code = _CHILD.format(root=str(ROOT), state=str(state))
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def limits(state: Path) -> list[int]:
    return list(json.loads(state.read_text())["limits_mw"])


def locks(state: Path) -> list[int | None]:
    return list(json.loads(state.read_text())["locked_mhz"])


def sweep(state: Path, tmp: Path, name: str, axis: str, values: str) -> subprocess.Popen[str]:
    run = f"{sys.executable} -c 'import time; time.sleep(30)'"
    out = str(tmp / f"{name}.parquet")
    return powerkit(
        state,
        "sweep",
        "--backend",
        "cmd",
        "--run",
        run,
        axis,
        values,
        "--point",
        "20s",
        "--warmup",
        "0s",
        "--out",
        out,
    )


def wait_for(check, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.parametrize(
    ("axis", "first", "second"),
    [("--power-cap", "300W", "450W"), ("--gpu-frequency", "1200", "1500")],
)
def test_a_second_run_on_held_gpus_is_refused(
    tmp_path: Path, axis: str, first: str, second: str
) -> None:
    state = tmp_path / "gpus.json"
    a = sweep(state, tmp_path, "a", axis, first)
    try:
        if axis == "--power-cap":
            wait_for(lambda: state.exists() and limits(state) == [300_000, 300_000])
        else:
            wait_for(lambda: state.exists() and locks(state) == [1200, 1200])
        b = sweep(state, tmp_path, "b", axis, second)
        _, err = b.communicate(timeout=60)
        assert b.returncode == 2, err
        assert f"is held by pid {a.pid}" in err and "sweep --backend cmd" in err
        assert len(err.strip().splitlines()) == 1
        if axis == "--power-cap":  # untouched by the refused run
            assert limits(state) == [300_000, 300_000]
        else:
            assert locks(state) == [1200, 1200]
    finally:
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=30)
    # the first run died holding the GPUs: a new run takes them over and, ending cleanly,
    # restores the true originals (700 W, unlocked), not what the killed run left
    assert [e.pid for e in journal.read_entries()] == [a.pid, a.pid]
    c = sweep(state, tmp_path, "c", axis, second)
    if axis == "--power-cap":
        wait_for(lambda: limits(state) == [450_000, 450_000])
    else:
        wait_for(lambda: locks(state) == [1500, 1500])
    c.send_signal(signal.SIGTERM)
    _, err = c.communicate(timeout=60)
    assert "interrupted" in err  # (its point had no samples yet: nothing to write, exit 2)
    assert limits(state) == [700_000, 700_000] and locks(state) == [None, None]
    assert journal.read_entries() == []


def test_restore_after_two_kills_puts_back_the_first_original(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    a = sweep(state, tmp_path, "a", "--power-cap", "300W")
    wait_for(lambda: state.exists() and limits(state) == [300_000, 300_000])
    a.send_signal(signal.SIGKILL)
    a.wait(timeout=30)
    b = sweep(state, tmp_path, "b", "--power-cap", "450W")
    wait_for(lambda: limits(state) == [450_000, 450_000])
    b.send_signal(signal.SIGKILL)
    b.wait(timeout=30)
    entries = journal.read_entries()
    assert [(e.pid, e.original_w) for e in entries] == [(b.pid, 700.0), (b.pid, 700.0)]
    r = powerkit(state, "restore", "--json")
    out, err = r.communicate(timeout=60)
    assert r.returncode == 0, err
    assert [e["original_w"] for e in json.loads(out)["restored"]] == [700.0, 700.0]
    assert limits(state) == [700_000, 700_000] and journal.read_entries() == []


def test_a_reused_pid_does_not_hold_a_gpu(tmp_path: Path) -> None:
    """An entry whose pid now belongs to another process (same pid, other start time)."""
    entry = journal.CapEntry(
        os.getppid(), 0, "GPU-fake-0", 700.0, 0.0, journal.LIMIT, "powerkit sweep", started=1
    )
    journal.journal_path().parent.mkdir(parents=True, exist_ok=True)
    journal.journal_path().write_text(json.dumps({"entries": [entry.__dict__]}))
    assert not journal.alive(entry.pid, entry.started)
    assert journal.stale() == [entry]
