"""`powerkit smoothing`: Blackwell power smoothing read and set through the NVML seam, journaled,
and put back by `powerkit restore`; refused with one line where the GPU lacks it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import powerkit.actuation.journal as journal
from tests.conftest import Cli
from tests.fake_nvml import FakeNvml


def _blackwell(fake_nvml: Callable[..., FakeNvml], gpus: int = 2, **kw: Any) -> FakeNvml:
    return fake_nvml(gpus=gpus, name="NVIDIA B200", **kw).blackwell()


def test_show_reads_the_state_and_says_where_there_is_none(
    cli: Cli, fake_nvml: Callable[..., FakeNvml]
) -> None:
    _blackwell(fake_nvml)
    doc = cli.json("smoothing", "show")
    assert doc["gpus"][1]["smoothing"] == {
        "enabled": False,
        "profile": 0,
        "ramp_up_w_per_s": 250.0,
        "ramp_down_w_per_s": 100.0,
        "floor_pct": 60.0,
    }
    assert doc["gpus"][0]["power_profiles"] == ["max_p"]
    text = cli("smoothing", "show", "--gpus", "0").stdout
    assert "off, profile 0, ramp up 250 W/s, down 100 W/s, floor 60 % TGP" in " ".join(text.split())
    fake_nvml(gpus=1)  # an H100: neither
    shown = cli("smoothing", "show").stdout
    assert "not supported" in shown and "power profiles" not in shown


def test_set_is_journaled_and_restore_puts_the_first_original_back(
    cli: Cli, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake = _blackwell(fake_nvml)
    doc = cli.json("smoothing", "set", "--ramp-up", "500", "--ramp-down", "40", "--floor", "75")
    assert doc["changed"] and doc["gpus"][0]["was"]["ramp_up_w_per_s"] == 250.0
    assert fake.smoothing is not None
    assert fake.smoothing[0] == {
        "enabled": True,
        "profile": 0,
        "profiles": [[500_000.0, 40_000.0, 75.0]],
    }
    entries = journal.read_entries()
    assert [(e.kind, e.gpu) for e in entries] == [(journal.SMOOTHING, 0), (journal.SMOOTHING, 1)]
    assert entries[0].settings == {
        "enabled": False,
        "profile": 0,
        "ramp_up_w_per_s": 250.0,
        "ramp_down_w_per_s": 100.0,
        "floor_pct": 60.0,
    }
    # a second set keeps the first original; --ramp-down alone keeps the rest
    assert cli("smoothing", "set", "--ramp-down", "20", "--gpus", "0").exit_code == 0
    assert fake.smoothing[0]["profiles"][0] == [500_000.0, 20_000.0, 75.0]
    assert journal.read_entries()[0].settings["ramp_down_w_per_s"] == 100.0  # type: ignore[index]
    # (the set ran in this process, which still runs: --all, as after a reused pid)
    assert "would put back its power smoothing" in cli("restore", "--all", "--dry-run").stdout
    done = cli.json("restore", "--all")
    assert {r["kind"] for r in done["restored"]} == {journal.SMOOTHING}
    assert [s["profiles"][0] for s in fake.smoothing] == [[250_000.0, 100_000.0, 60.0]] * 2
    assert not any(s["enabled"] for s in fake.smoothing)
    assert journal.read_entries() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--floor", "120"], "--floor 120: from 0 to 100 (% of TGP)"),
        (["--ramp-up", "-5"], "--ramp-up -5: a finite rate from 0 (W/s)"),
        (["--ramp-down", "nan"], "--ramp-down nan"),
        (["--gpus", "7"], "no GPU 7"),
    ],
)
def test_bad_settings_are_one_line_and_change_nothing(
    cli: Cli, fake_nvml: Callable[..., FakeNvml], args: list[str], message: str
) -> None:
    fake = _blackwell(fake_nvml)
    r = cli("smoothing", "set", *args)
    assert r.exit_code == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert fake.smoothing is not None and not fake.smoothing[0]["enabled"]
    assert journal.read_entries() == []


def test_refused_where_the_gpu_or_driver_lacks_it(
    cli: Cli, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake_nvml(gpus=1)
    r = cli("smoothing", "set", "--ramp-up", "100")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "has no power smoothing: it needs a Blackwell GPU and driver 570" in r.stderr
    assert journal.read_entries() == []


def test_not_permitted_is_one_line_and_the_journal_keeps_the_original(
    cli: Cli, fake_nvml: Callable[..., FakeNvml]
) -> None:
    _blackwell(fake_nvml, gpus=1, permit_limits=False)
    r = cli("smoothing", "set", "--floor", "50")
    assert r.exit_code == 2 and "setting power smoothing is not permitted" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert [e.kind for e in journal.read_entries()] == [journal.SMOOTHING]  # restore's to undo


def test_set_says_what_a_killed_run_left_changed(
    cli: Cli, fake_nvml: Callable[..., FakeNvml], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep killed with GPU 0's limit changed: `smoothing set` on it warns, naming the
    power limit and `powerkit restore`."""
    from tests.actuation.test_restore import killed_sweep

    _blackwell(fake_nvml)
    killed_sweep(monkeypatch, 500)
    r = cli("smoothing", "set", "--floor", "70")
    assert r.exit_code == 0, r.stderr
    assert "GPU 0: its power limit was left changed by pid" in r.stderr
    assert "`powerkit restore` does" in r.stderr


def test_a_held_gpu_names_the_change_its_holder_made(
    cli: Cli, fake_nvml: Callable[..., FakeNvml]
) -> None:
    """Another live process holds GPU 0's power smoothing: a cap-setting run is refused with
    the holder's change named as it is (not as an SM clock lock)."""
    import os
    import subprocess
    import sys

    _blackwell(fake_nvml)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path = journal.journal_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        start = journal._start_time(holder.pid)
        entry = journal.CapEntry(holder.pid, 0, None, 0.0, 0.0, journal.SMOOTHING, "x", start)
        journal._write(path, [entry])
        with pytest.raises(journal.GpuHeldError, match="which set its power smoothing"):
            journal.claim([(0, None)], lambda index: 700.0)
    finally:
        holder.kill()
        holder.wait()
    assert os.path.exists(path)
