"""The cap journal and `powerkit restore`: limits come back even after a kill no handler sees."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import powerkit.actuation.journal as journal
from powerkit.actuation.caps import LockedClocks, PowerCaps
from powerkit.telemetry.nvml import NvmlGpu, nvml_session
from tests.conftest import Cli
from tests.fake_nvml import FakeNvml


def dead_pid() -> int:
    """Return the pid of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def killed_sweep(monkeypatch: pytest.MonkeyPatch, watts: float) -> None:
    """A sweep that set its caps and then died without running any handler (as on SIGKILL):
    the caps are entered, a cap is set, and the process never reaches __exit__."""
    pid = dead_pid()
    with monkeypatch.context() as m, nvml_session():
        m.setattr(journal.os, "getpid", lambda: pid)
        caps = PowerCaps([NvmlGpu(0), NvmlGpu(1)])
        caps.__enter__()
        caps.set(watts)


def test_restore_puts_back_limits_a_killed_sweep_left(
    cli: Cli,
    fake_nvml: Callable[..., FakeNvml],
    monkeypatch: pytest.MonkeyPatch,
    _state_dir: Path,
) -> None:
    fake = fake_nvml(gpus=2)
    killed_sweep(monkeypatch, 500)
    fake_nvml_state = fake.limits_mw
    assert fake_nvml_state == [500_000, 500_000]
    entries = journal.read_entries()
    assert [(e.gpu, e.original_w) for e in entries] == [(0, 700.0), (1, 700.0)]
    dry = cli.json("restore", "--dry-run")
    assert len(dry["restored"]) == 2 and fake.limits_mw == [500_000, 500_000]
    done = cli.json("restore")
    assert [r["original_w"] for r in done["restored"]] == [700.0, 700.0]
    assert fake.limits_mw == [700_000, 700_000]
    assert journal.read_entries() == []
    r = cli("restore")
    assert r.exit_code == 0 and "nothing to restore" in r.stderr


def test_a_live_runs_entries_are_kept(cli: Cli, fake_nvml: Callable[..., FakeNvml]) -> None:
    fake = fake_nvml(gpus=1)
    with nvml_session():
        caps = PowerCaps([NvmlGpu(0)])
        caps.__enter__()
        caps.set(400)
        out = cli.json("restore")  # this process is alive: its limits are its own business
        assert out["restored"] == [] and "still runs" in out["kept"][0]["why"]
        assert fake.limits_mw == [400_000]
        caps.__exit__(None, None, None)
    assert fake.limits_mw == [700_000] and journal.read_entries() == []


def test_the_next_sweep_adopts_and_restores_a_left_limit(
    cli: Cli, fake_nvml: Callable[..., FakeNvml], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = fake_nvml(gpus=2)
    killed_sweep(monkeypatch, 450)
    with nvml_session():
        with PowerCaps([NvmlGpu(0), NvmlGpu(1)]) as caps:
            assert [e.original_w for e in caps.adopted] == [700.0, 700.0]
            caps.set(300)
        assert fake.limits_mw == [700_000, 700_000]  # the true original, not the 450 W left
    assert journal.read_entries() == []
    assert json.dumps([]) == "[]"


def test_a_malformed_journal_is_one_line(cli: Cli, _state_dir: Path) -> None:
    journal.journal_path().write_text("{broken")
    r = cli("restore")
    assert r.exit_code == 2 and "unreadable cap journal" in r.stderr


def test_restore_unlocks_clocks_a_killed_sweep_left(
    cli: Cli, fake_nvml: Callable[..., FakeNvml], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = fake_nvml(gpus=2)
    pid = dead_pid()
    with monkeypatch.context() as m, nvml_session():
        m.setattr(journal.os, "getpid", lambda: pid)
        clocks = LockedClocks([NvmlGpu(0), NvmlGpu(1)])
        clocks.__enter__()
        clocks.set(1200)  # and the process dies: no __exit__
    assert fake.locked_mhz == [1200, 1200]
    assert [e.kind for e in journal.read_entries()] == ["locked_clocks"] * 2
    out = cli("restore")
    assert out.exit_code == 0 and "reset its locked clocks" in out.stdout
    assert fake.locked_mhz == [None, None] and journal.read_entries() == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"original_w": 5.0}, "outside GPU 0's power-limit range"),
        ({"original_w": -100.0}, "original_w -100.0 is not valid"),
        ({"original_w": 1e12}, "original_w 1000000000000.0 is not valid"),
        ({"original_w": "650"}, "original_w '650' is not valid"),
        ({"original_w": None}, "original_w None is not valid"),
        ({"original_w": float("nan")}, "original_w nan is not valid"),
        ({"kind": "bogus"}, "kind 'bogus' is not valid"),
        ({"pid": "1"}, "pid '1' is not valid"),
        ({"extra": 1}, "unknown field 'extra'"),
    ],
)
def test_a_tampered_entry_is_never_applied_and_the_rest_are_restored(
    cli: Cli,
    fake_nvml: Callable[..., FakeNvml],
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, object],
    problem: str,
) -> None:
    """An entry whose limit is outside the GPU's range, or of the wrong type or kind, is
    never set on the GPU; the entries after it are still restored; the bad one is named."""
    fake = fake_nvml(gpus=2)
    killed_sweep(monkeypatch, 500)
    path = journal.journal_path()
    raw = json.loads(path.read_text())
    raw["entries"][0].update(change)
    path.write_text(json.dumps(raw))
    r = cli("restore", "--json")
    done = json.loads(r.stdout)
    assert r.exit_code == (2 if done["invalid"] else 0), r.stderr
    assert fake.limits_mw[0] == 500_000  # GPU 0: the tampered entry, never applied
    assert fake.limits_mw[1] == 700_000  # GPU 1: restored
    said = json.dumps(done["kept"]) + json.dumps(done["invalid"])
    assert problem in said, said
    if done["invalid"]:
        assert "not applied, left: entry 1" in r.stderr and len(r.stderr.splitlines()) == 1
        with nvml_session(), pytest.raises(journal.BadInputError, match="entry 1 is not valid"):
            PowerCaps([NvmlGpu(0)]).__enter__()  # a run never rewrites a journal it cannot read


def test_two_journals_never_set_one_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _state_dir: Path
) -> None:
    """Two runs with different journals (sudo with and without -H): the second is refused by
    the machine's lock on the GPU, naming the first; once the first ends, the GPU is free."""
    locks = _state_dir / "locks"
    code = (
        "import sys, time\n"
        "import powerkit.actuation.journal as j\n"
        "j.claim([(0, 'GPU-shared')], lambda i: 700.0)\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**__import__("os").environ, "POWERKIT_STATE_DIR": str(tmp_path / "home-a")}
    env["POWERKIT_LOCK_DIR"] = str(locks)
    first = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "held"
        monkeypatch.setenv("POWERKIT_STATE_DIR", str(tmp_path / "home-b"))  # another journal
        with pytest.raises(journal.GpuHeldError, match=f"held by pid {first.pid}"):
            journal.claim([(0, "GPU-shared")], lambda i: 700.0)
        assert journal.read_entries() == []  # nothing written to the second journal
    finally:
        first.kill()
        first.wait()
    journal.claim([(0, "GPU-shared")], lambda i: 700.0)  # the lock went with its process
    journal.remove_entries()
