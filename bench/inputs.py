"""Large benchmark inputs, generated once into bench_out/ and reused by later runs."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench_out"


def cached_input(name: str, make: Callable[[Path], None]) -> Path:
    """Return bench_out/``name``, made by ``make(path)`` (and timed) when it is not there yet."""
    OUT.mkdir(exist_ok=True)
    path = OUT / name
    if not path.exists():
        t0 = time.perf_counter()
        make(path)
        print(
            f"(generated {name}: {path.stat().st_size / 1e6:.0f} MB in "
            f"{time.perf_counter() - t0:.1f} s)"
        )
    return path


# A small process between a bench and what it measures: Linux carries a process's peak RSS
# over exec (ru_maxrss starts from the memory of the process that forked it), so a command
# started straight from a bench that has grown (a generated input, a fetched baseline) would
# report the bench's own peak whenever that is the higher one.
_LAUNCHER = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump([usage.ru_maxrss, os.waitstatus_to_exitcode(status)], f)
"""


@dataclass(frozen=True)
class Measured:
    """A command's wall time, its own peak RSS, exit code and output."""

    wall_s: float
    peak_mb: float
    code: int
    stdout: str
    stderr: str


def run_measured(args: list[str], *, cwd: Path = ROOT) -> Measured:
    """Run ``args`` in a fresh process (through :data:`_LAUNCHER`) and measure it."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "rusage.json"
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-S", "-c", _LAUNCHER, str(report), *args],
            capture_output=True,
            text=True,
            cwd=cwd,
        )
        wall = time.perf_counter() - t0
        peak_kb, code = json.loads(report.read_text()) if report.exists() else (0, out.returncode)
    return Measured(wall, peak_kb / 1024, code, out.stdout, out.stderr)


def canonical_schema(meta: Any, index: list[tuple[str, int, int]]) -> pa.Schema:
    """The Arrow schema of a generated canonical trace: ts, host, gpu, power_w, with the
    trace's metadata (``meta``: a TraceMeta) and its series index in the footer."""
    from powerkit.trace.schema import INDEX_KEY, METADATA_KEY

    return pa.schema(
        [
            ("ts", pa.timestamp("us", tz="UTC")),
            ("host", pa.string()),
            ("gpu", pa.int16()),
            ("power_w", pa.float32()),
        ]
    ).with_metadata({METADATA_KEY: meta.to_json().encode(), INDEX_KEY: json.dumps(index).encode()})
