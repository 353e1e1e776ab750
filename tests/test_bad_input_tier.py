"""The broad tier of bad input: every command's file inputs fed every kind of broken file, and
its options fed out-of-range values, wrong types and wrong encodings.

Each case must end with exit code 2 and one ``error:`` line (no traceback, no ``internal
error``), write nothing, and never be accepted silently. The cases are generated from two
tables — the hostile files, and where each command takes a file — plus a table of option
values, so that a new input is covered by adding one row.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Cli

# ---- hostile files ---------------------------------------------------------------------------


def _nested_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


HOSTILE: dict[str, Callable[[Path], Path]] = {}


def hostile(name: str) -> Callable[[Callable[[Path], bytes | None]], None]:
    """Register a hostile file: the function returns its bytes (None: made otherwise)."""

    def register(fn: Callable[[Path], bytes | None]) -> None:
        def make(folder: Path) -> Path:
            path = folder / f"hostile-{name}"
            data = fn(path)
            if data is not None:
                path.write_bytes(data)
            return path

        HOSTILE[name] = make

    return register


hostile("empty")(lambda p: b"")
hostile("binary")(lambda p: bytes(range(256)) * 64)
hostile("nul-text")(lambda p: b"timestamp,power\x00\n1,2\n")
hostile("utf16-garbage")(lambda p: "\ufeffnot { a [ valid input\n".encode("utf-16"))
hostile("latin1")(lambda p: "caf\xe9,\xff\xfe\n1,2\n".encode("latin-1"))
hostile("huge-field")(lambda p: b"a," + b"x" * 200_000 + b"\n1,2\n")
hostile("nested-json")(lambda p: _nested_json(100_000))
hostile("nested-toml")(lambda p: b"a = " + b"[" * 5_000 + b"]" * 5_000 + b"\n")
hostile("truncated-json")(lambda p: b'{"windows": [{"window": "1s", "peak_fraction": 0.')
hostile("json-scalar")(lambda p: b"42\n")
hostile("json-nan")(lambda p: b'{"windows": NaN, "gpus": Infinity}')
hostile("other-kind")(lambda p: b'{"kind": "powerkit info", "version": 1, "samples": 3}')
hostile("newer-version")(lambda p: b'{"kind": "powerkit windows", "version": 99, "windows": []}')
hostile("fake-parquet")(lambda p: b"PAR1" + b"\x00" * 100 + b"PAR1")
hostile("negative-epoch")(lambda p: b"ts,gpu,power_w\n-1e12,0,100\n-1e12,0,120\n")
hostile("missing")(lambda p: None)


@hostile("folder")
def _folder(path: Path) -> None:
    path.mkdir()


@hostile("fifo")
def _fifo(path: Path) -> None:
    os.mkfifo(path)


@hostile("dangling-link")
def _link(path: Path) -> None:
    path.symlink_to(path.parent / "nowhere")


# ---- where each command takes a file ---------------------------------------------------------

#: good Slurm records (the sample's), where another file of the same command is the hostile one
SACCT = Path(__file__).resolve().parents[1] / "sample_data" / "sacct.txt"

# (label, argv with {F} for the hostile file, {T} for a good trace, {O} for an output path)
FILE_INPUTS: list[tuple[str, list[str]]] = [
    ("info", ["info", "{F}"]),
    ("info --sensor-check", ["info", "{F}", "--sensor-check"]),
    ("windows", ["windows", "{F}", "--budget", "300W"]),
    ("energy", ["energy", "{F}", "--steps", "trace"]),
    ("energy --steps", ["energy", "{T}", "--steps", "{F}"]),
    ("energy --phases", ["energy", "{T}", "--phases", "{F}"]),
    ("oversub", ["oversub", "{F}:2"]),
    ("cap", ["cap", "{F}:2", "--limit", "50%"]),
    ("cap --jobs", ["cap", "{T}:2", "--limit", "50%", "--jobs", "{F}"]),
    ("cap --breaker", ["cap", "{T}:2", "--limit", "50%", "--breaker", "{F}"]),
    ("cap --limit-csv", ["cap", "{T}:2", "--limit-csv", "{F}"]),
    ("cap latency", ["cap", "latency", "{F}", "--steps", "{F}"]),
    ("cap latency --steps", ["cap", "latency", "{T}", "--steps", "{F}"]),
    ("utility", ["utility", "{F}:2", "--site-mw", "1"]),
    ("utility --spec", ["utility", "{T}:2", "--site-mw", "1", "--spec", "{F}"]),
    (
        "utility event",
        ["utility", "event", "{F}", "--at", "+1m", "--duration", "1m", "--commit", "5%"],
    ),
    (
        "utility event --baseline csv",
        [
            "utility",
            "event",
            "{T}",
            "--at",
            "+5m",
            "--duration",
            "1m",
            "--commit",
            "5%",
            "--baseline",
            "csv:{F}",
        ],
    ),
    ("import", ["import", "{F}", "--out", "{O}"]),
    ("import --map", ["import", "{F}", "--map", "ts=ts,power_w=power_w", "--out", "{O}"]),
    ("import --map wide", ["import", "{F}", "--map", "ts=ts,power_w=a|b", "--out", "{O}"]),
    ("import --where", ["import", "{F}", "--where", "Field=155", "--out", "{O}"]),
    ("carbon --trace", ["carbon", "--trace", "{F}", "--region", "germany"]),
    ("carbon --intensity-csv", ["carbon", "--trace", "{T}", "--intensity-csv", "{F}"]),
    ("jobs", ["jobs", "{F}", "--allocations", "{F}"]),
    ("jobs --sacct", ["jobs", "{T}", "--sacct", "{F}"]),
    ("jobs --scontrol", ["jobs", "{T}", "--sacct", str(SACCT), "--scontrol", "{F}"]),
    ("jobs --allocations", ["jobs", "{T}", "--allocations", "{F}"]),
    ("jobs --intensity-csv", ["jobs", "{T}", "--by-label", "pod", "--intensity-csv", "{F}"]),
    ("econ --oversub", ["econ", "--oversub", "{F}", "--gpus", "10", "--gpu-tdp", "700W"]),
    ("econ --config", ["econ", "--config", "{F}"]),
    (
        "econ --cap",
        ["econ", "--oversub", "{J}", "--cap", "{F}", "--gpus", "10", "--gpu-tdp", "700W"],
    ),
    ("pilot --oversub", ["pilot", "--oversub", "{F}", "--site-mw", "20"]),
    ("report --trace", ["report", "--trace", "{F}", "--out", "{O}"]),
    ("report --windows", ["report", "--windows", "{F}", "--out", "{O}"]),
    ("report --oversub", ["report", "--oversub", "{F}", "--out", "{O}"]),
    ("report --control", ["report", "--control", "{F}", "--out", "{O}"]),
    ("report --allocation", ["report", "--allocation", "{F}", "--out", "{O}"]),
    ("report --bloat", ["report", "--bloat", "{F}", "--out", "{O}"]),
    ("report --utility", ["report", "--utility", "{F}", "--out", "{O}"]),
    ("report --cap", ["report", "--cap", "{F}", "--out", "{O}"]),
    ("report --econ", ["report", "--econ", "{F}", "--out", "{O}"]),
    ("report --carbon", ["report", "--carbon", "{F}", "--out", "{O}"]),
    ("report --pfi", ["report", "--pfi", "{F}", "--out", "{O}"]),
    ("report --sweep", ["report", "--sweep", "{F}", "--out", "{O}"]),
    ("bloat plan", ["bloat", "plan", "{F}", "--stages", "4", "--microbatches", "4"]),
    ("bloat run --plan", ["bloat", "run", "--plan", "{F}", "--preset", "a100-gpt3-pp4"]),
    ("sweep show", ["sweep", "show", "{F}"]),
    ("pfi compute", ["pfi", "compute", "{F}"]),
    ("pfi predict --train", ["pfi", "predict", "--train", "{F}", "--features", "dram_active"]),
    ("pfi allocate --jobs", ["pfi", "allocate", "--jobs", "{F}", "--cut", "10%"]),
    ("control eval --policy", ["control", "eval", "--policy", "{F}"]),
    ("control run --policy", ["control", "run", "--policy", "{F}", "--backend", "sim"]),
    (
        "control train --trace",
        [
            "control",
            "train",
            "--env",
            "trace",
            "--trace",
            "{F}",
            "--response",
            "{F}",
            "--budget",
            "300W",
            "--out",
            "{O}",
        ],
    ),
]

# Files some readers take as they are: a name that only one reader would refuse for another
# reason is still refused, but a few (a TOML reader given JSON that happens to be TOML) are
# not bad input for that reader. None are: every pair is expected to be refused.
ACCEPTABLE: set[tuple[str, str]] = set()


@pytest.fixture(scope="module")
def good_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("good")
    out = folder / "t.parquet"
    r = Cli()("record", "--backend", "sim", "--duration", "10m", "--out", out, "-q")
    assert r.exit_code == 0, r.stderr
    return out


def assert_clean_refusal(r: object, label: str) -> None:
    err = r.stderr  # type: ignore[attr-defined]
    code = r.exit_code  # type: ignore[attr-defined]
    assert code == 2, f"{label}: exit {code}, stderr {err[-400:]!r}"
    assert "Traceback" not in err and "internal error" not in err, f"{label}: {err[-400:]}"
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error:"), f"{label}: {err[-400:]}"
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, f"{label}: {err[-400:]}"


CASES = [(kind, label, argv) for label, argv in FILE_INPUTS for kind in HOSTILE]


@pytest.mark.parametrize(
    ("kind", "label", "argv"), CASES, ids=[f"{label}-{kind}" for kind, label, _ in CASES]
)
def test_every_file_input_refuses_every_hostile_file(
    cli: Cli,
    tmp_path: Path,
    good_trace: Path,
    fleet_doc: Path,
    kind: str,
    label: str,
    argv: list[str],
) -> None:
    if (label, kind) in ACCEPTABLE:
        pytest.skip("a valid input for this reader")
    bad = HOSTILE[kind](tmp_path)
    out = tmp_path / "out" / "o.file"
    args = [
        a.replace("{F}", str(bad))
        .replace("{T}", str(good_trace))
        .replace("{O}", str(out))
        .replace("{J}", str(fleet_doc))
        for a in argv
    ]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    r = cli(*args)
    assert_clean_refusal(r, f"{label} <- {kind}")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


# ---- options: out of range, wrong types --------------------------------------------------------

OPTIONS: list[tuple[str, list[str]]] = [
    ("budget nan", ["windows", "{T}", "--budget", "nanW"]),
    ("budget inf", ["windows", "{T}", "--budget", "infW"]),
    ("budget negative", ["windows", "{T}", "--budget", "-5W"]),
    ("budget 150%", ["windows", "{T}", "--budget", "150%"]),
    ("budget text", ["windows", "{T}", "--budget", "lots"]),
    ("window 0.7s", ["windows", "{T}", "--budget", "300W", "--windows", "0.7s"]),
    ("window 0", ["windows", "{T}", "--budget", "300W", "--windows", "0s"]),
    ("window empty", ["windows", "{T}", "--budget", "300W", "--windows", ","]),
    ("grid 0", ["windows", "{T}", "--budget", "300W", "--grid", "0s"]),
    ("grid nan", ["windows", "{T}", "--budget", "300W", "--grid", "nans"]),
    ("fill negative", ["windows", "{T}", "--budget", "300W", "--fill", "hold:-1s"]),
    ("fill unknown", ["windows", "{T}", "--budget", "300W", "--fill", "cubic:1s"]),
    ("from negative epoch", ["info", "{T}", "--from", "-1e12"]),
    ("from year 30000", ["info", "{T}", "--from", "30000-01-01T00:00:00Z"]),
    ("to before from", ["info", "{T}", "--from", "+5m", "--to", "+1m"]),
    ("max-power percent", ["info", "{T}", "--max-power", "50%"]),
    ("max-power tiny", ["info", "{T}", "--max-power", "1W"]),
    ("power-unit kV", ["info", "{T}", "--power-unit", "kV"]),
    ("time-unit weeks", ["info", "{T}", "--time-unit", "weeks"]),
    ("tz unknown", ["info", "{T}", "--tz", "Mars/Olympus"]),
    ("hosts empty", ["info", "{T}", "--hosts", ","]),
    ("where without value", ["info", "{T}", "--where", "Field"]),
    ("where empty value", ["info", "{T}", "--where", "Field="]),
    ("where empty column", ["info", "{T}", "--where", "=155"]),
    ("where on parquet", ["info", "{T}", "--where", "host=node-0"]),
    ("hosts absent", ["info", "{T}", "--hosts", "nobody"]),
    ("engine unknown", ["info", "{T}", "--engine", "spark"]),
    ("address empty", ["info", "{T}", "--engine", "ray", "--address", ""]),
    ("address bad port", ["info", "{T}", "--engine", "ray", "--address", "host:port"]),
    ("address without ray", ["info", "{T}", "--address", "auto"]),
    (
        "record start negative",
        ["record", "--backend", "sim", "--duration", "1m", "--start", "-1e12", "--out", "{O}"],
    ),
    (
        "record interval 1ms",
        ["record", "--backend", "sim", "--duration", "1m", "--interval", "1ms", "--out", "{O}"],
    ),
    ("record duration nan", ["record", "--backend", "sim", "--duration", "nanm", "--out", "{O}"]),
    (
        "record power-cap 150%",
        ["record", "--backend", "sim", "--duration", "1m", "--power-cap", "150%", "--out", "{O}"],
    ),
    ("sweep cap 150%", ["sweep", "--preset", "a100-7b", "--power-cap", "150%", "--out", "{O}"]),
    ("sweep group 0", ["sweep", "--preset", "a100-7b", "--group-size", "0", "--out", "{O}"]),
    (
        "sweep repeats 0",
        ["sweep", "--preset", "a100-7b", "--group-size", "4,8", "--repeats", "0", "--out", "{O}"],
    ),
    (
        "pfi caps 150%",
        ["pfi", "sweep", "--preset", "h200-dense-pretrain", "--caps", "150%", "--out", "{O}"],
    ),
    ("oversub draws 0", ["oversub", "{T}:2", "--draws", "0"]),
    ("cap limit 150%", ["cap", "{T}:2", "--limit", "150%"]),
    ("cap limit text", ["cap", "{T}:2", "--limit", "lots"]),
    ("cap ratios below 1", ["cap", "{T}:2", "--ratios", "0.5,2"]),
    ("cap ratios nan", ["cap", "{T}:2", "--ratios", "nan"]),
    ("cap period 0.3s", ["cap", "{T}:2", "--limit", "50%", "--period", "0.3s"]),
    ("cap latency negative", ["cap", "{T}:2", "--limit", "50%", "--latency", "-1s"]),
    ("cap policy unknown", ["cap", "{T}:2", "--limit", "50%", "--policy", "fastest"]),
    ("cap assign no job", ["cap", "{T}:2", "--limit", "50%", "--assign", "x"]),
    ("cap event no cut", ["cap", "{T}:2", "--event", "start=+1m,for=1m"]),
    ("cap event cut 100%", ["cap", "{T}:2", "--event", "start=+1m,cut=100%,for=1m"]),
    ("cap event after the end", ["cap", "{T}:2", "--event", "start=+100h,cut=10%,for=1m"]),
    ("cap classes 7", ["cap", "{T}:2", "--limit", "50%", "--classes", "a=7"]),
    (
        "record drift unknown",
        ["record", "--backend", "sim", "--duration", "1m", "--drift", "wild", "--out", "{O}"],
    ),
    (
        "record drift nvml",
        ["record", "--backend", "nvml", "--drift", "grpo", "--duration", "1m", "--out", "{O}"],
    ),
    (
        "record sensor unknown",
        ["record", "--backend", "sim", "--duration", "1m", "--sensor", "meter", "--out", "{O}"],
    ),
    (
        "record sensor nvml",
        ["record", "--backend", "nvml", "--sensor", "instant", "--duration", "1m", "--out", "{O}"],
    ),
    (
        "record truth-out realtime",
        ["record", "--backend", "sim", "--realtime", "--truth-out", "{O}.t", "--out", "{O}"],
    ),
    (
        "record truth-out is out",
        ["record", "--backend", "sim", "--duration", "1m", "--truth-out", "{O}", "--out", "{O}"],
    ),
    (
        "record truth-out exists",
        ["record", "--backend", "sim", "--duration", "1m", "--truth-out", "{T}", "--out", "{O}"],
    ),
    ("cap limit and schedule", ["cap", "{T}:2", "--limit", "50%", "--limit-csv", "{T}"]),
    ("cap breaker unknown", ["cap", "{T}:2", "--limit", "50%", "--breaker", "fuse-9000"]),
    ("oversub count 0", ["oversub", "{T}:0"]),
    ("oversub count text", ["oversub", "{T}:many"]),
    ("oversub margin negative", ["oversub", "{T}:2", "--margin", "-5%"]),
    ("oversub capacity 150%", ["oversub", "{T}:2", "--capacity", "150%"]),
    (
        "econ pue nan",
        ["econ", "--oversub", "{J}", "--gpus", "10", "--gpu-tdp", "700W", "--pue", "nan"],
    ),
    (
        "econ price inf",
        ["econ", "--oversub", "{J}", "--gpus", "10", "--gpu-tdp", "700W", "--price", "inf/kWh"],
    ),
    ("econ gpus 0", ["econ", "--oversub", "{J}", "--gpus", "0", "--gpu-tdp", "700W"]),
    (
        "econ gpu-hour without cap",
        ["econ", "--oversub", "{J}", "--gpus", "10", "--gpu-tdp", "700W", "--gpu-hour", "2"],
    ),
    ("carbon region unknown", ["carbon", "--trace", "{T}", "--region", "atlantis"]),
    ("carbon intensity negative", ["carbon", "--trace", "{T}", "--intensity", "-5"]),
    ("utility site nan", ["utility", "{T}:2", "--site-mw", "nan"]),
    ("utility site 0", ["utility", "{T}:2", "--site-mw", "0"]),
    ("utility mitigate unknown", ["utility", "{T}:2", "--site-mw", "1", "--mitigate", "magic:5%"]),
    ("energy wait-below 150%", ["energy", "{T}", "--steps", "trace", "--wait-below", "150%"]),
    ("energy wait-util text", ["energy", "{T}", "--steps", "trace", "--wait-util", "lots"]),
    (
        "control train steps 0",
        ["control", "train", "--budget", "300W", "--steps", "0", "--out", "{O}"],
    ),
    ("control train budget 150%", ["control", "train", "--budget", "150%", "--out", "{O}"]),
    (
        "control train period group size",
        ["control", "train", "--budget", "300W", "--period", "30s", "--out", "{O}"],
    ),
    (
        "control train period 0.1s",
        [
            "control",
            "train",
            "--budget",
            "130W",
            "--preset",
            "a100-72b-tp4-gen",
            "--knob",
            "concurrency",
            "--period",
            "0.1s",
            "--out",
            "{O}",
        ],
    ),
    (
        "control train target 0",
        ["control", "train", "--budget", "300W", "--target", "0%", "--out", "{O}"],
    ),
    (
        "bloat plan stages 1e9",
        ["bloat", "plan", "{P}", "--stages", "1000000000", "--microbatches", "4"],
    ),
    (
        "bloat plan microbatches 1e9",
        ["bloat", "plan", "{P}", "--stages", "4", "--microbatches", "1000000000"],
    ),
    (
        "bloat plan idle nan",
        ["bloat", "plan", "{P}", "--stages", "4", "--microbatches", "4", "--idle-power", "nanW"],
    ),
    (
        "pilot engineer-weeks inf",
        ["pilot", "--oversub", "{J}", "--site-mw", "20", "--engineer-weeks", "inf"],
    ),
    (
        "pilot meter nan",
        ["pilot", "--oversub", "{J}", "--site-mw", "20", "--meter-per-rack", "nan"],
    ),
    ("pilot site negative", ["pilot", "--oversub", "{J}", "--site-mw", "-20"]),
    (
        "control run hard-periods -1",
        [
            "control",
            "run",
            "--policy",
            "{Y}",
            "--backend",
            "sim",
            "--hard-periods",
            "-1",
            "--duration",
            "1m",
        ],
    ),
    (
        "control eval horizon 1s",
        ["control", "eval", "--policy", "{Y}", "--horizon", "1s", "--seeds", "1"],
    ),
    ("control eval arms empty", ["control", "eval", "--policy", "{Y}", "--arms", ""]),
    ("record backend cmd", ["record", "--backend", "cmd", "--duration", "1m", "--out", "{O}"]),
    ("sweep backend nvml", ["sweep", "--backend", "nvml", "--concurrency", "1,2", "--out", "{O}"]),
    (
        "pfi sweep backend live",
        ["pfi", "sweep", "--backend", "live", "--caps", "200W,300W", "--out", "{O}"],
    ),
    (
        "pfi sweep backend nvml no tokens",
        ["pfi", "sweep", "--backend", "nvml", "--caps", "200W,300W", "--out", "{O}"],
    ),
    ("control run backend live", ["control", "run", "--policy", "{Y}", "--backend", "live"]),
    ("utility compose staggered", ["utility", "{T}:2", "--compose", "staggered"]),
    ("sweep ladder zero", ["sweep", "--concurrency", "0,8", "--out", "{O}"]),
    (
        "bloat plan straggler inf",
        ["bloat", "plan", "{P}", "--stages", "4", "--microbatches", "4", "--straggler", "inf"],
    ),
    ("control eval arms unknown", ["control", "eval", "--policy", "{Y}", "--arms", "magic"]),
    ("out onto input", ["import", "{T}", "--out", "{T}", "--force"]),
    ("out unwritable", ["import", "{T}", "--out", "/proc/x.parquet"]),
    ("out is a folder", ["import", "{T}", "--out", "{D}"]),
]


@pytest.fixture(scope="module")
def fleet_doc(tmp_path_factory: pytest.TempPathFactory, good_trace: Path) -> Path:
    folder = tmp_path_factory.mktemp("fleet")
    r = Cli()("oversub", f"{good_trace}:2", "--json")
    assert r.exit_code == 0, r.stderr
    path = folder / "fleet.json"
    path.write_text(r.stdout)
    return path


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("profile")
    out = folder / "p.csv"
    r = Cli()("bloat", "profile", "--backend", "sim", "--preset", "a100-gpt3-pp4", "--out", out)
    assert r.exit_code == 0, r.stderr
    return out


@pytest.mark.parametrize(("label", "argv"), OPTIONS, ids=[label for label, _ in OPTIONS])
def test_every_bad_option_value_is_refused(
    cli: Cli,
    tmp_path: Path,
    good_trace: Path,
    fleet_doc: Path,
    profile: Path,
    policy: Path,
    label: str,
    argv: list[str],
) -> None:
    out = tmp_path / "o.parquet"
    folder = tmp_path / "d"
    folder.mkdir()
    swap = {
        "{T}": str(good_trace),
        "{O}": str(out),
        "{J}": str(fleet_doc),
        "{P}": str(profile),
        "{D}": str(folder),
        "{Y}": str(policy),
    }
    args = []
    for a in argv:
        for key, value in swap.items():
            a = a.replace(key, value)
        args.append(a)
    kept = good_trace.read_bytes()
    r = cli(*args)
    assert_clean_refusal(r, label)
    assert not out.exists() and good_trace.read_bytes() == kept
    # the line names what was wrong: an option given, or a value given (a member, a file)
    line = r.stderr.strip().splitlines()[-1]
    flags = [a for a in argv if a.startswith("--")]
    values = [a for a in args[1:] if not a.startswith("--") and len(a) > 2 and a not in argv[:2]]
    assert any(f in line for f in flags) or any(v in line for v in values), f"{label}: {line}"


def test_the_tier_is_broad() -> None:
    """The tier's size, as the closing note reports it (and a guard against shrinking)."""
    assert len(CASES) >= 500 and len(OPTIONS) >= 60
    json.dumps({"file_cases": len(CASES), "option_cases": len(OPTIONS)})
