"""The README's tour runs as written: every non-GPU line, in order, in an empty folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Shorter runs of the same commands, so that the tour fits the test budget.
SHORTER = {
    "--point 60m --warmup 2m --repeats 3": "--point 5m --warmup 30s --repeats 1",
    "--steps 500": "--steps 50",
    "--seeds 5": "--seeds 1 --horizon 20m",
    "--point 10m --repeats 3": "--point 5m --repeats 2",
    "--draws 200": "--draws 20",
    "--workloads 500": "--workloads 50",
}


def tour_commands() -> list[str]:
    """Return the tour's shell lines: continuations joined, GPU lines left out."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## A tour of the commands", 1)[1].split("```\n", 2)[1]
    lines = re.sub(r"\\\n\s*", " ", block).splitlines()
    skip = ("[GPU]", "[server]")
    return [ln for ln in lines if not any(mark in ln for mark in skip)]


def test_every_line_that_needs_a_gpu_says_so() -> None:
    """A line that reads or sets real GPUs is marked [GPU] (the tour runs the rest, so an
    unmarked one would block there), and a recording of real GPUs has a --duration (without
    it, it runs until Ctrl-C)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## A tour of the commands", 1)[1].split("```\n", 2)[1]
    for line in re.sub(r"\\\n\s*", " ", block).splitlines():
        if line.startswith("#") or not line.strip():
            continue
        real = re.search(r"--backend (nvml|amdsmi|cmd)\b", line) or re.match(
            r"powerkit (top|smoothing)\b(?!.*--backend sim)", line
        )
        if real:
            assert "[GPU]" in line, line
        if line.startswith("powerkit record") and "--backend sim" not in line:
            assert "--duration" in line, line


def test_the_tour_names_every_command_and_marks_gpu_lines() -> None:
    lines = tour_commands()
    for long in SHORTER:
        assert any(long in ln for ln in lines), f"the tour no longer has {long!r}"
    text = (ROOT / "README.md").read_text()
    assert text.count("[GPU]") >= 3


@pytest.mark.slow
def test_the_tour_runs_in_an_empty_folder(tmp_path: Path) -> None:
    script = "\n".join(tour_commands())
    for long, short in SHORTER.items():
        script = script.replace(long, short)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-x", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for made in (
        "7b.parquet",
        "fleet.parquet",
        "run.parquet",
        "sweep.html",
        "policy.npz",
        "eval.html",
        "curves.csv",
        "fleet.json",
        "cap.json",
        "pilot.md",
        "report.html",
    ):
        assert (tmp_path / made).exists(), made
    assert "Traceback" not in result.stderr
