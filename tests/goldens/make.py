"""Golden outputs: each command's ``--json`` document and its table on the sample data, as
the program writes them now. ``python tests/goldens/make.py`` (``make goldens``) writes them
anew, to be reviewed in the diff; tests/test_goldens.py fails when a command's output is not
its golden any more — a change of behaviour is then a change of these files, never silent.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: name -> the command line (run from the repository root); ``{oversub}`` is the oversub golden,
#: ``{tmp}`` a fresh folder for what a command writes (shown as ``TMP`` in its output)
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
    "cap": "cap sample_data/a100-72b-tp4.parquet:2 sample_data/a100-7b.parquet:4 --ratios 1,1.5,2 "
    "--policy none,uniform,polca --period 0.5s --event start=+5m,cut=20%,for=5m "
    "--breaker iec60898-1-type-c",
    "record": "record --backend sim --preset a100-7b --duration 2m --out {tmp}/r.parquet",
    "sweep": "sweep --preset a100-7b --group-size 4,8 --power-cap 250W,400W --point 2m "
    "--warmup 10s --out {tmp}/s.parquet",
    "pfi-sweep": "pfi sweep --preset h200-dense-pretrain --caps 400W,550W,700W --point 2m "
    "--warmup 10s --out {tmp}/p.parquet",
    "pfi-compute": "pfi compute {tmp}/p.parquet --bootstrap 200",
    "bloat-plan": "bloat plan {tmp}/profile.csv --stages 4 --microbatches 8 --points 4",
    "bloat-run": "bloat run --plan {tmp}/plan.json --preset a100-gpt3-pp4 --iterations 2",
    "import": "import sample_data/nvidia-smi-a100-14b.csv --tz UTC --out {tmp}/i.parquet",
    "energy": "energy sample_data/a100-7b.parquet --steps trace",
    "pilot": "pilot --oversub {oversub} --site-mw 10",
    "sweep-show": "sweep show {tmp}/s.parquet",
    "pfi-allocate": "pfi allocate --jobs {tmp}/p.parquet --workloads 3",
    "control-train": "control train --preset a100-7b --budget 280W --steps 20 --out {tmp}/pol.npz",
    "control-eval": "control eval --policy {tmp}/pol.npz --seeds 1 --horizon 10m "
    "--arms ppo,uncontrolled,static_safe",
    "control-run": "control run --policy {tmp}/pol.npz --backend sim --duration 2m",
    "cap-latency": "cap latency bench/device_h200/capstep_run2.parquet "
    "--steps bench/device_h200/capstep_run2_plan.json",
    "restore": "restore --dry-run",
    "pfi-predict": "pfi predict --train {tmp}/p.parquet --train {tmp}/moe.parquet "
    "--train {tmp}/ft.parquet",
    "bloat-profile": "bloat profile --backend sim --preset a100-gpt3-pp4 --out {tmp}/profile.csv",
    "report": "report --trace sample_data/a100-7b.parquet --oversub {oversub} --out {tmp}/r.html",
    "smoothing-show": "smoothing show",
    "top-once": "top --backend sim --once --duration 2s --interval 0.1s --windows 1s,30s",
}
#: what a command needs written first (into its ``{tmp}``), each a command line
SETUP: dict[str, list[str]] = {
    "pfi-compute": [COMMANDS["pfi-sweep"]],
    "pfi-allocate": [COMMANDS["pfi-sweep"]],
    "pfi-predict": [
        COMMANDS["pfi-sweep"],
        COMMANDS["pfi-sweep"].replace("dense-pretrain", "moe-pretrain").replace("p.p", "moe.p"),
        COMMANDS["pfi-sweep"].replace("dense-pretrain", "moe-finetune").replace("p.p", "ft.p"),
    ],
    "sweep-show": [COMMANDS["sweep"]],
    "control-eval": [COMMANDS["control-train"]],
    "control-run": [COMMANDS["control-train"]],
    "bloat-plan": ["bloat profile --backend sim --preset a100-gpt3-pp4 --out {tmp}/profile.csv"],
    "bloat-run": [
        "bloat profile --backend sim --preset a100-gpt3-pp4 --out {tmp}/profile.csv",
        "bloat plan {tmp}/profile.csv --stages 4 --microbatches 32 --points 4 "
        "--out {tmp}/plan.json",
    ],
}
#: commands with no ``--json`` (what they write is a file): their table or line alone
TEXT_ONLY = {"bloat-profile", "report"}
#: environment a command runs with (``{tmp}`` its folder): restore reads this state folder's
#: journal, empty
ENV: dict[str, dict[str, str]] = {"restore": {"POWERKIT_STATE_DIR": "{tmp}/state"}}
#: commands whose figures are the wall clock's (top samples for real time): their golden is
#: the shape of what they print, every number and time a placeholder
SHAPE_ONLY = {"top-once"}
#: significant digits a simulated or solved figure is compared to (a last-digit difference of
#: another CPU's arithmetic is not a change of behaviour)
DIGITS = 10


def run(
    args: str, *, json_out: bool, tmp: Path | None = None, env: dict[str, str] | None = None
) -> str:
    """What ``powerkit args`` prints on stdout (100 columns, as a pipe sees it)."""
    from typer.testing import CliRunner

    from powerkit.cli import app

    given = args.format(oversub=HERE / "oversub.json", tmp=tmp)
    argv = shlex.split(given) + (["--json"] if json_out else [])
    saved = os.getcwd()
    os.chdir(ROOT)
    try:
        extra = {k: v.format(tmp=tmp) for k, v in (env or {}).items()}
        result = CliRunner().invoke(
            app, argv, env={"COLUMNS": "100", **extra}, catch_exceptions=False
        )
    finally:
        os.chdir(saved)
    if result.exit_code != 0:
        raise SystemExit(f"powerkit {given}: exit {result.exit_code}: {result.stderr.strip()}")
    # (a command that only reports on stderr, as record does: what it says there)
    text = result.stdout or ("" if json_out else result.stderr)
    text = text if tmp is None else text.replace(str(tmp), "TMP")
    # (what differs by machine: the host in the cap journal's name, a page's size in bytes)
    text = text.replace(f"caps-{socket.gethostname()}.json", "caps-HOST.json")
    text = re.sub(r"\(\d+(?:\.\d+)? [kMG]?B, ", "(SIZE, ", text)
    if json_out and name_of(args) in SHAPE_ONLY:
        return json.dumps(_shape(json.loads(text)), indent=1, sort_keys=True) + "\n"
    if name_of(args) in SHAPE_ONLY:  # (column widths follow the numbers: spaces collapsed)
        text = re.sub(r"\d{4}-\d\d-\d\dT[\d:]+Z", "TIME", text)
        text = re.sub(r"[ ]+", " ", re.sub(r"\d[\d,.]*", "N", re.sub(r"[▁▂▃▄▅▆▇█]+", "~", text)))
    if json_out:
        doc = json.loads(text)
        if "figures" in doc:  # (the decimated series a figure draws: their lengths suffice)
            doc["figures"] = _lengths(doc["figures"])
        return json.dumps(_rounded(doc), indent=1, sort_keys=True) + "\n"
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"


def _rounded(value: object) -> object:
    if isinstance(value, float):
        return float(f"{value:.{DIGITS}g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return [_rounded(v) for v in value] if isinstance(value, list) else value


def _lengths(value: object) -> object:
    if isinstance(value, dict):
        return {k: _lengths(v) for k, v in value.items()}
    return len(value) if isinstance(value, list) else value


def name_of(args: str) -> str | None:
    """The golden name of a command line."""
    return next((name for name, line in COMMANDS.items() if line == args), None)


def _shape(value: object) -> object:
    """A document with every number, time and series replaced by what it is."""
    if isinstance(value, dict):
        return {k: v if k == "version" else _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, (int, float)) for v in value):
            return ["<numbers>"]
        return [_shape(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return "<number>"
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:]+Z", value):
        return "<time>"
    return value


@contextlib.contextmanager
def _gpus(name: str) -> Iterator[None]:
    """The GPUs a command reads: for ``smoothing show``, two B200s behind the fake NVML
    seam the tests use (``FakeNvml.blackwell``); else none."""
    if name != "smoothing-show":
        yield
        return
    import powerkit.telemetry.nvml as nvml
    from tests.fake_nvml import FakeNvml

    fake = FakeNvml(gpus=2, name="NVIDIA B200").blackwell()
    real, nvml.pynvml = nvml.pynvml, fake.module
    try:
        yield
    finally:
        nvml.pynvml = real


def outputs(name: str) -> dict[Path, str]:
    """The golden files of one command and what they should hold (a command that writes
    files runs in a fresh folder each time, after what it needs)."""
    args = COMMANDS[name]
    found = {}
    forms = ((".txt", False),) if name in TEXT_ONLY else ((".json", True), (".txt", False))
    for suffix, json_out in forms:
        with tempfile.TemporaryDirectory(prefix="powerkit-golden-") as tmp:
            for setup in SETUP.get(name, []):
                run(setup, json_out=False, tmp=Path(tmp))
            with _gpus(name):
                found[HERE / f"{name}{suffix}"] = run(
                    args, json_out=json_out, tmp=Path(tmp), env=ENV.get(name)
                )
    return found


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for name in COMMANDS:  # (oversub before econ: econ reads its golden)
        for path, text in outputs(name).items():
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(f"wrote {path.relative_to(ROOT)}")
