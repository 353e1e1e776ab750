"""Golden outputs: each command's ``--json`` document and its table on the sample data, as
the program writes them now. ``python tests/goldens/make.py`` (``make goldens``) writes them
anew, to be reviewed in the diff; tests/test_goldens.py fails when a command's output is not
its golden any more — a change of behaviour is then a change of these files, never silent.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: name -> the command line (run from the repository root); ``{oversub}`` is the oversub golden
COMMANDS: dict[str, str] = {
    "info": "info sample_data/a100-72b-tp4.parquet",
    "info-smi": "info sample_data/nvidia-smi-a100-14b.csv --tz UTC",
    "windows": "windows sample_data/a100-72b-tp4.parquet --budget 237.5W --windows 0.5s,30s,5m",
    "windows-sum": "windows sample_data/a100-7b.parquet --budget 300W --scope sum --mode tumbling",
    "oversub": "oversub sample_data/a100-72b-tp4.parquet:2 sample_data/a100-7b.parquet:4 "
    "--compose random --draws 20 --capacity 60%",
    "utility": "utility sample_data/a100-72b-tp4.parquet:64 --site-mw 5 --spec swings-pct",
    "econ": "econ --oversub {oversub} --gpus 4096 --gpu-tdp 700W --pue 1.2 --price 0.08/kWh",
    "carbon": "carbon --trace sample_data/a100-7b.parquet --region germany",
}


def run(args: str, *, json_out: bool) -> str:
    """What ``powerkit args`` prints on stdout (100 columns, as a pipe sees it)."""
    from typer.testing import CliRunner

    from powerkit.cli import app

    argv = shlex.split(args.format(oversub=HERE / "oversub.json")) + (
        ["--json"] if json_out else []
    )
    saved = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(app, argv, env={"COLUMNS": "100"}, catch_exceptions=False)
    finally:
        os.chdir(saved)
    if result.exit_code != 0:
        raise SystemExit(f"powerkit {args}: exit {result.exit_code}: {result.stderr.strip()}")
    if json_out:
        doc = json.loads(result.stdout)
        if "figures" in doc:  # (the decimated series a figure draws: their lengths suffice)
            doc["figures"] = _lengths(doc["figures"])
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"
    return "\n".join(line.rstrip() for line in result.stdout.strip("\n").splitlines()) + "\n"


def _lengths(value: object) -> object:
    if isinstance(value, dict):
        return {k: _lengths(v) for k, v in value.items()}
    return len(value) if isinstance(value, list) else value


def outputs(name: str) -> dict[Path, str]:
    """The golden files of one command and what they should hold."""
    args = COMMANDS[name]
    return {HERE / f"{name}.json": run(args, json_out=True),
            HERE / f"{name}.txt": run(args, json_out=False)}  # fmt: skip


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for name in COMMANDS:  # (oversub before econ: econ reads its golden)
        for path, text in outputs(name).items():
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(f"wrote {path.relative_to(ROOT)}")
