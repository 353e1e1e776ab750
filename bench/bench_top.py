"""Benchmark of `powerkit top`'s own cost: CPU per second of wall time at 0.5 s on 8 GPUs
(printed figures, no assertions; the target is 5 % of one core).

Eight fake NVML GPUs (the test fake without its per-call checks, so that what is measured is
powerkit's work, not the fake's) are read at 0.5 s for ``SECONDS`` of wall time, three ways:
the recorder alone, keeping nothing (the baseline: what reading the GPUs costs); a top session
(the recorder feeding the window state: 1 s, 30 s, 5 m); and the session with the view built
and rendered to an off-screen terminal at every tick, as the live view does. CPU is the
process's (all threads), over the same wall time.
"""

from __future__ import annotations

import io
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

import powerkit.telemetry.nvml as nvml_module  # noqa: E402
from powerkit.cli.top import view  # noqa: E402
from powerkit.core.units import PowerSpec  # noqa: E402
from powerkit.telemetry.nvml import NvmlSource  # noqa: E402
from powerkit.telemetry.recorder import RecordConfig, record  # noqa: E402
from powerkit.top.session import TopSession  # noqa: E402
from tests.fake_nvml import FakeNvml  # noqa: E402

SECONDS, INTERVAL = 30.0, 0.5


def cpu_share(run: object) -> float:
    """Process CPU seconds per wall second while ``run()`` runs."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    run()  # type: ignore[operator]
    return (time.process_time() - cpu0) / (time.perf_counter() - wall0)


def recorder_alone() -> None:
    record(NvmlSource(), RecordConfig(out=None, interval_s=INTERVAL, duration_s=SECONDS))


def session(render: bool) -> None:
    s = TopSession.of_source(
        NvmlSource(), [1.0, 30.0, 300.0], PowerSpec(watts=150.0), INTERVAL, SECONDS
    )
    s.start()
    screen = Console(file=io.StringIO(), width=200, force_terminal=True)
    stop = threading.Event()
    while not s.done.wait(INTERVAL):
        if render:
            screen.print(view(s.snapshot("gpu")))
            screen.file = io.StringIO()
    stop.set()
    s.finish()


def main() -> None:
    fake = FakeNvml(gpus=8, autospec=False)
    nvml_module.pynvml = fake.module  # type: ignore[assignment]
    runs = [
        ("recorder alone (baseline)", recorder_alone),
        ("top: windows state", lambda: session(False)),
        ("top: state + view at each tick", lambda: session(True)),
    ]
    for name, run in runs:
        share = cpu_share(run)
        print(
            f"{name:32s}: {100 * share:.2f} % of one core (8 GPUs, {INTERVAL:g} s, {SECONDS:g} s)"
        )


if __name__ == "__main__":
    main()
