"""Bad input, table-driven: every trace-reading command x every broken kind of file, and options
out of range. Each case must end with exit code 2, one line on stderr, no traceback, and the
input files unchanged."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from powerkit.trace.schema import METADATA_KEY
from tests.conftest import Cli

EPOCH = 1_767_225_600


def _good_rows(n: int = 40) -> list[str]:
    return [f"{EPOCH + 0.5 * i:.1f},0,{100 + i % 5}" for i in range(n)]


def _csv(path: Path, body: list[str], header: str = "ts,gpu,power_w") -> Path:
    path.write_text("\n".join([header, *body]) + "\n")
    return path


def _parquet(path: Path, columns: dict[str, pa.Array], metadata: bytes | None = None) -> Path:
    table = pa.table(columns)
    if metadata is not None:
        table = table.replace_schema_metadata({METADATA_KEY: metadata})
    pq.write_table(table, path)
    return path


def _good_parquet_in(folder: Path, name: bytes) -> Path:
    folder.mkdir()
    n = 40
    written = _parquet(
        folder / "part.parquet",
        {
            "ts": pa.array([(EPOCH + i) * 1_000_000 for i in range(n)], pa.timestamp("us", "UTC")),
            "host": pa.array(["h"] * n),
            "gpu": pa.array([0] * n, pa.int16()),
            "power_w": pa.array([100.0] * n, pa.float32()),
        },
    )
    written.rename(folder / os.fsdecode(name))  # (Arrow cannot write such a name itself)
    return folder


def _ts(n: int) -> pa.Array:
    return pa.array((EPOCH + 0.5 * np.arange(n)) * 1e6, pa.int64()).cast(pa.timestamp("us", "UTC"))


# name -> builder(tmp) -> path of a broken trace
BROKEN: dict[str, Callable[[Path], Path]] = {
    "missing": lambda d: d / "none.csv",
    "empty": lambda d: _write(d / "empty.csv", b""),
    "binary": lambda d: _write(d / "bin.csv", bytes(range(256)) * 4),
    "folder-without-parquet": lambda d: _mkdir(d / "folder"),
    "header-only": lambda d: _csv(d / "h.csv", []),
    "negative-power": lambda d: _csv(d / "neg.csv", [*_good_rows(), f"{EPOCH + 30},0,-5"]),
    "nan-power": lambda d: _csv(d / "nan.csv", [*_good_rows(), f"{EPOCH + 30},0,nan"]),
    "inf-power": lambda d: _csv(d / "inf.csv", [*_good_rows(), f"{EPOCH + 30},0,inf"]),
    "overflow-power": lambda d: _csv(d / "big.csv", [*_good_rows(), f"{EPOCH + 30},0,1e39"]),
    "kw-text-power": lambda d: _csv(d / "kw.csv", [*_good_rows(), f"{EPOCH + 30},0,100 kV"]),
    "text-gpu": lambda d: _csv(d / "gpu.csv", [*_good_rows(), f"{EPOCH + 30},one,100"]),
    "huge-gpu": lambda d: _csv(d / "gpu2.csv", [*_good_rows(), f"{EPOCH + 30},70000,100"]),
    "merged-line": lambda d: _csv(d / "merged.csv", [*_good_rows(), f"{EPOCH + 30},0,100,7"]),
    "bad-time": lambda d: _csv(d / "time.csv", [*_good_rows(), "yesterday,0,100"]),
    "markup-name": lambda d: _csv(d / "x[bold]y[red].csv", ["soon,0,100"]),
    # a good log whose name is not UTF-8 (the file system allows it; the readers cannot take it)
    "name-not-utf8": lambda d: _csv(d / os.fsdecode(b"log\xff.csv"), _good_rows()),
    "folder-holding-a-name-not-utf8": lambda d: _good_parquet_in(d / "ds", b"part\xff.parquet"),
    # a loop's frame counter where the GPU would be: four rows a time, one index each time
    "frame-counter-gpu": lambda d: _csv(
        d / "frames.csv",
        [f"{EPOCH + i},{i},{100 + c}" for i in range(10) for c in range(4)],
        "timestamp,index,power",
    ),
    # every row one field short of the header, and the missing field is the power
    "power-never-written": lambda d: _csv(
        d / "short.csv", [f"{EPOCH + i},card0" for i in range(10)], "timestamp,device,power_watts"
    ),
    # a clock-event reasons cell that is neither hex nor a whole number (not read as unknown)
    "bad-reasons": lambda d: _csv(
        d / "reasons.csv",
        [*(f"{r},0x4" for r in _good_rows()), f"{EPOCH + 30},0,100,0xZZ", f"{EPOCH + 31},0,100,4"],
        "ts,gpu,power_w,clock_event_reasons",
    ),
    "fractional-reasons": lambda d: _parquet(
        d / "fracreasons.parquet",
        {
            "ts": _ts(4),
            "host": pa.array(["h"] * 4),
            "gpu": pa.array([0] * 4, pa.int16()),
            "power_w": pa.array([1.0] * 4, pa.float32()),
            "clock_event_reasons": pa.array([4.0, 4.5, 0.0, 1.0]),
        },
    ),
    "parquet-no-energy-text-power": lambda d: _parquet(
        d / "textpower.parquet",
        {
            "ts": _ts(4),
            "host": pa.array(["h"] * 4),
            "gpu": pa.array([0] * 4, pa.int16()),
            "power_w": pa.array(["1", "2", "x", "4"]),
        },
    ),
    "parquet-null-host": lambda d: _parquet(
        d / "nullhost.parquet",
        {
            "ts": _ts(4),
            "host": pa.array(["h", None, "h", "h"]),
            "gpu": pa.array([0] * 4, pa.int16()),
            "power_w": pa.array([1.0] * 4, pa.float32()),
        },
    ),
    "parquet-huge-gpu": lambda d: _parquet(
        d / "hugegpu.parquet",
        {
            "ts": _ts(4),
            "host": pa.array(["h"] * 4),
            "gpu": pa.array([0, 70000, 0, 0], pa.int64()),
            "power_w": pa.array([1.0] * 4, pa.float32()),
        },
    ),
    "parquet-bad-metadata": lambda d: _parquet(
        d / "badmeta.parquet",
        {
            "ts": _ts(4),
            "host": pa.array(["h"] * 4),
            "gpu": pa.array([0] * 4, pa.int16()),
            "power_w": pa.array([1.0] * 4, pa.float32()),
        },
        metadata=b"{not json",
    ),
    "parquet-inf-power": lambda d: _parquet(
        d / "infpower.parquet",
        {
            "ts": _ts(4),
            "host": pa.array(["h"] * 4),
            "gpu": pa.array([0] * 4, pa.int16()),
            "power_w": pa.array([1.0, float("inf"), 1.0, 1.0], pa.float32()),
        },
    ),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _mkdir(path: Path) -> Path:
    path.mkdir()
    (path / "notes.txt").write_text("not a trace")
    return path


# command -> argv builder for a trace path (other inputs made in the test's folder)
COMMANDS: dict[str, Callable[[Path, Path], list[str | Path]]] = {
    "info": lambda t, d: ["info", t],
    "info-json": lambda t, d: ["info", t, "--json"],
    "windows": lambda t, d: ["windows", t, "--budget", "300W", "--windows", "0.5s,5s"],
    "windows-sum": lambda t, d: ["windows", t, "--budget", "300W", "--scope", "sum"],
    "oversub": lambda t, d: ["oversub", f"{t}:2", "--nameplate", "400W", "--windows", "0.5s"],
    "carbon": lambda t, d: ["carbon", "--trace", t, "--intensity", "300g/kWh"],
    "report": lambda t, d: ["report", "--trace", t, "--out", d / "r.html"],
    "import": lambda t, d: ["import", t, "--out", d / "out.parquet"],
}


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_one_line_exit_2(result, folder: Path, before: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert result.exit_code == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(errors) == 1, result.stderr
    assert result.stdout == "" or "{" not in result.stdout
    after = _snapshot(folder)
    assert {k: v for k, v in after.items() if k in before} == before  # inputs unchanged


@pytest.mark.parametrize("kind", sorted(BROKEN))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_refuses_every_broken_trace(
    cli: Cli, tmp_path: Path, kind: str, command: str
) -> None:
    trace = BROKEN[kind](tmp_path)
    before = _snapshot(tmp_path)
    result = cli(*COMMANDS[command](trace, tmp_path))
    assert_one_line_exit_2(result, tmp_path, before)
    assert not (tmp_path / "out.parquet").exists() and not (tmp_path / "r.html").exists()


def test_power_units_in_cells_are_read_not_dropped(cli: Cli, tmp_path: Path) -> None:
    path = _csv(
        tmp_path / "units.csv",
        [f"{EPOCH},0,0.1 kW", f"{EPOCH + 1},0,100000 mW", f"{EPOCH + 2},0,100 W"],
    )
    info = cli.json("info", path)
    assert info["min_power_w"] == info["max_power_w"] == pytest.approx(100.0)


def test_skip_bad_rows_counts_the_overflowing_and_non_finite(cli: Cli, tmp_path: Path) -> None:
    rows = [*_good_rows(), f"{EPOCH + 30},0,1e39", f"{EPOCH + 31},0,inf", f"{EPOCH + 32},0,nan"]
    info = cli.json("info", _csv(tmp_path / "x.csv", rows), "--skip-bad-rows")
    assert info["bad_rows"]["count"] == 3 and info["samples"] == 40
    carbon = cli.json(
        "carbon", "--trace", tmp_path / "x.csv", "--intensity", "300g/kWh", "--skip-bad-rows"
    )
    assert carbon["energy_kwh"] > 0


# ---- options out of range ----------------------------------------------------------------

TRACE_OPTIONS: list[tuple[str, ...]] = [
    ("windows", "{t}", "--budget", "-0W"),
    ("windows", "{t}", "--budget", "0W"),
    ("windows", "{t}", "--budget", "nanW"),
    ("windows", "{t}", "--budget", "300W", "--grid", "1us"),
    ("windows", "{t}", "--budget", "300W", "--grid", "1us", "--scope", "sum"),
    ("windows", "{t}", "--budget", "300W", "--windows", "0s"),
    ("windows", "{t}", "--budget", "300W", "--gpus-per-frame", "0"),
    ("windows", "{t}", "--budget", "300W", "--fill", "hold:-1s"),
    ("windows", "{t}", "--budget", "300W", "--mode", "sliding"),
    ("info", "{t}", "--nameplate", "0W"),
    ("info", "{t}", "--grid", "0s"),
    ("info", "{t}", "--grid", "1e30s"),
    ("windows", "{t}", "--budget", "300W", "--grid", "1e30s"),
    ("windows", "{t}", "--budget", "300W", "--grid", "2d", "--scope", "sum"),
    ("info", "{t}", "--tz", "Mars/Olympus"),
    ("info", "{t}", "--time-unit", "fortnights"),
    ("info", "{t}", "--from", "+1h"),
    ("oversub", "{t}", "--nameplate", "0W"),
    ("oversub", "{t}", "--capacity", "0W"),
    ("oversub", "{t}", "--capacity", "-5%"),
    ("oversub", "{t}", "--margin", "-5%"),
    ("oversub", "{t}", "--draws", "0"),
    ("oversub", "{t}", "--grid", "1us"),
    ("carbon", "--trace", "{t}", "--intensity", "1e400g/kWh"),
    ("carbon", "--trace", "{t}", "--intensity", "-1g/kWh"),
    ("carbon", "--trace", "{t}", "--region", "atlantis"),
    ("econ", "--oversub", "{t}", "--gpus", "10", "--gpu-tdp", "700W"),
]


@pytest.mark.parametrize("argv", TRACE_OPTIONS, ids=lambda a: " ".join(a).replace("{t}", "T"))
def test_options_out_of_range_are_refused(cli: Cli, tmp_path: Path, argv: tuple[str, ...]) -> None:
    trace = _csv(tmp_path / "t.csv", _good_rows(200))
    before = _snapshot(tmp_path)
    result = cli(*(str(trace) if a == "{t}" else a for a in argv))
    assert_one_line_exit_2(result, tmp_path, before)


def test_unexpected_errors_are_one_line_exit_1(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import powerkit.cli.info as info_cli

    def boom(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(info_cli, "run_info", boom)
    trace = _csv(tmp_path / "t.csv", _good_rows())
    result = cli("info", trace)
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("internal error: ZeroDivisionError: a bug")
    assert "--debug" in result.stderr and "Traceback" not in result.stderr
    with pytest.raises(ZeroDivisionError):
        cli("--debug", "info", trace)


def test_json_inputs_that_are_folders_or_binary(cli: Cli, tmp_path: Path) -> None:
    folder = _mkdir(tmp_path / "dir")
    binary = _write(tmp_path / "b.json", b"\x00\xff" * 10)
    for path in (folder, binary):
        before = _snapshot(tmp_path)
        r = cli("econ", "--oversub", path, "--gpus", "10", "--gpu-tdp", "700W")
        assert_one_line_exit_2(r, tmp_path, before)
        r = cli("report", "--windows", path, "--out", tmp_path / "r.html")
        assert_one_line_exit_2(r, tmp_path, before)
    json.dumps({})


# ---- options of the other commands ----------------------------------------------------------

OTHER_OPTIONS: list[tuple[str, ...]] = [
    ("record", "--backend", "sim", "--seed", "-1", "--duration", "1m", "--out", "{d}/r.parquet"),
    (
        "record",
        "--backend",
        "sim",
        "--group-size",
        "0",
        "--duration",
        "1m",
        "--out",
        "{d}/r.parquet",
    ),
    (
        "record",
        "--backend",
        "sim",
        "--concurrency",
        "0",
        "--duration",
        "1m",
        "--out",
        "{d}/r.parquet",
    ),
    (
        "record",
        "--backend",
        "sim",
        "--start",
        "9999-12-31T23:59:59Z",
        "--duration",
        "1m",
        "--out",
        "{d}/r.parquet",
    ),
    ("record", "--backend", "sim", "--start", "-5", "--duration", "1m", "--out", "{d}/r.parquet"),
    ("record", "--backend", "sim", "--duration", "1m", "--out", "{d}"),
    ("record", "--backend", "sim", "--duration", "1m", "--out", "/proc/powerkit.parquet"),
    ("record", "--backend", "sim", "--duration", "1m", "--out", "{d}/" + "x" * 300 + ".parquet"),
    ("record", "--backend", "sim", "--duration", "1m", "--out", "{d}/t.csv/r.parquet"),
    ("sweep", "--group-size", "99999999999", "--point", "1m", "--out", "{d}/s.parquet"),
    ("sweep", "--group-size", "0", "--point", "1m", "--out", "{d}/s.parquet"),
    ("control", "train", "--budget", "0W", "--out", "{d}/p.npz"),
    ("control", "train", "--budget", "300W", "--w-tokens", "nan", "--out", "{d}/p.npz"),
    ("control", "train", "--budget", "300W", "--target", "150%", "--out", "{d}/p.npz"),
    ("control", "train", "--budget", "300W", "--steps", "0", "--out", "{d}/p.npz"),
    ("control", "eval", "--policy", "{d}/t.csv"),
    ("control", "eval", "--policy", "{d}/empty.npz"),
    ("pfi", "compute", "{d}/jobs.csv", "--bootstrap", "-1"),
    ("pfi", "allocate", "--jobs", "{d}/jobs.csv", "--size-spread", "inf"),
    ("pfi", "allocate", "--jobs", "{d}/jobs.csv", "--workloads", "0"),
    (
        "econ",
        "--oversub",
        "{d}/fleet.json",
        "--gpus",
        "10",
        "--gpu-tdp",
        "700W",
        "--margin",
        "150%",
    ),
    (
        "econ",
        "--oversub",
        "{d}/fleet.json",
        "--gpus",
        "10",
        "--gpu-tdp",
        "700W",
        "--utilization",
        "0%",
    ),
    ("econ", "--oversub", "{d}/fleet.json", "--gpus", "0", "--gpu-tdp", "700W"),
    (
        "pilot",
        "--oversub",
        "{d}/fleet.json",
        "--site-mw",
        "20",
        "--pue",
        "nan",
        "--out",
        "{d}/p.md",
    ),
    ("pilot", "--oversub", "{d}/fleet.json", "--site-mw", "-1", "--out", "{d}/p.md"),
    ("pilot", "--oversub", "{d}/fleet.json", "--site-mw", "1e300", "--out", "{d}/p.md"),
    ("utility", "{d}/t.csv", "--site-mw", "inf", "--nameplate", "400W"),
    *(
        (
            "utility",
            "event",
            "{d}/t.csv",
            "--at",
            "+50s",
            "--duration",
            "20s",
            "--interval",
            "10s",
            "--commit",
            "25%",
            "--baseline",
            "before:20s",
            "--site-mw",
            site,
            "--nameplate",
            "400W",
        )
        for site in ("-5", "inf", "0")
    ),
    ("oversub", "{d}/t.csv:99999999999999", "--nameplate", "400W", "--windows", "0.5s"),
    ("cap", "{d}/t.csv", "--limit", "300W", "--nameplate", "400W", "--period", "1e30s"),
    ("cap", "{d}/t.csv", "--limit", "300W", "--nameplate", "400W", "--latency", "1e30s"),
]


@pytest.fixture
def inputs(tmp_path: Path, cli: Cli) -> Path:
    """A folder with a small trace, a jobs table, an oversub result and an empty policy."""
    _csv(tmp_path / "t.csv", _good_rows(200))
    (tmp_path / "empty.npz").write_bytes(b"")
    jobs = [
        "job,cap_w,power_w,tokens_per_s",
        "a,,700,100",
        "a,500,520,95",
        "a,300,320,70",
        "b,,700,100",
        "b,500,500,80",
        "b,300,300,50",
    ]
    (tmp_path / "jobs.csv").write_text("\n".join(jobs) + "\n")
    r = cli(
        "oversub", tmp_path / "t.csv:4", "--nameplate", "400W", "--windows", "0.5s,5s", "--json"
    )
    assert r.exit_code == 0, r.stderr
    (tmp_path / "fleet.json").write_text(r.stdout)
    return tmp_path


@pytest.mark.parametrize("argv", OTHER_OPTIONS, ids=lambda a: " ".join(a)[:60])
def test_other_options_out_of_range_are_refused(
    cli: Cli, inputs: Path, argv: tuple[str, ...]
) -> None:
    before = _snapshot(inputs)
    result = cli(*(a.replace("{d}", str(inputs)) for a in argv))
    assert_one_line_exit_2(result, inputs, before)
    assert not (inputs / "r.parquet").exists() and not (inputs / "p.npz").exists()


SMI_HEADER = "timestamp, index, power.draw [W]"


def _smi(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join([SMI_HEADER, *rows]) + "\n")
    return path


def _smi_rows(n: int = 40) -> list[str]:
    return [
        f"2026/01/01 00:00:{i // 2:02d}.{5 * (i % 2)}00, 0, {100 + i % 5:.2f} W" for i in range(n)
    ]


def test_smi_power_units_in_cells(cli: Cli, tmp_path: Path) -> None:
    """'100 kW' or '100 mW' was read as 100 W; a cell whose unit contradicts the header's
    ``power.draw [W]`` is a bad row (never converted in silence)."""
    rows = _smi_rows()
    rows[6] = rows[6].replace("101.00 W", "0.101 kW")
    rows[7] = rows[7].replace("102.00 W", "102000 mW")
    assert "kW" in rows[6] and "mW" in rows[7]
    r = cli("info", _smi(tmp_path / "u.csv", rows), "--tz", "UTC")
    assert (
        r.exit_code == 2
        and "line 8: power cell '0.101 kW' contradicts the header's unit [W]" in r.stderr
    )
    info = cli.json("info", tmp_path / "u.csv", "--tz", "UTC", "--skip-bad-rows")
    assert info["samples"] == len(rows) - 2  # the two rows dropped
    assert info["max_power_w"] == pytest.approx(104.0) and info["min_power_w"] == pytest.approx(100)
    rows[6], rows[7] = _smi_rows()[6], _smi_rows()[7]
    rows[8] = rows[8].replace("103.00 W", "103 kV")
    before = _snapshot(tmp_path)
    r = cli("info", _smi(tmp_path / "v.csv", rows), "--tz", "UTC")
    assert_one_line_exit_2(r, tmp_path, before | _snapshot(tmp_path))
    assert "line 10" in r.stderr


def test_smi_non_numeric_index_is_a_bad_row_not_a_gpu(cli: Cli, tmp_path: Path) -> None:
    rows = _smi_rows()
    rows[10] = rows[10].replace(", 0, ", ", zero, ")
    path = _smi(tmp_path / "i.csv", rows)
    before = _snapshot(tmp_path)
    r = cli("info", path, "--tz", "UTC")
    assert_one_line_exit_2(r, tmp_path, before)
    assert "line 12: unparsable GPU index 'zero'" in r.stderr
    info = cli.json("info", path, "--tz", "UTC", "--skip-bad-rows")
    assert info["gpus"] == 1 and info["samples"] == 39


@pytest.mark.parametrize("delay_s", [0.05, 0.3, 1.0])
def test_ctrl_c_at_any_moment_is_never_a_traceback(tmp_path: Path, delay_s: float) -> None:
    """SIGINT while the command line loads, while record starts, or while it records.

    The delay counts from the moment the interpreter runs its first line (it says "up"): a
    SIGINT before that, or in the few milliseconds until the console script's first line has
    imported powerkit._entry (an import that loads nothing else), reaches Python itself.
    """
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[1]
    program = (
        "import sys; sys.stdout.write('up\\n'); sys.stdout.flush(); "
        "from powerkit._entry import main; main()"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            program,
            "record",
            "--backend",
            "sim",
            "--realtime",
            "--duration",
            "30s",
            "--interval",
            "0.1s",
            "--out",
            str(tmp_path / "r.parquet"),
            "--quiet",
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert proc.returncode in (0, 130), (proc.returncode, err)


def test_a_name_that_is_not_utf8_is_named_by_its_bytes_and_the_advice_reads_it(
    cli: Cli, tmp_path: Path
) -> None:
    """A name the file system allows but the readers and writers cannot take (not UTF-8):
    one line showing its bytes as \\xNN, never Python's \\udcNN; for an input, the link it
    advises reads the log; for an output, nothing is written."""
    log = _csv(tmp_path / os.fsdecode(b"log\xff.csv"), _good_rows())
    refused = cli("info", log)
    assert refused.exit_code == 2
    assert "log\\xff.csv: the name is not UTF-8" in refused.stderr
    assert "\\udc" not in refused.stderr and "ln -s $'" in refused.stderr
    (tmp_path / "renamed.csv").symlink_to(log)  # what the line advises
    assert cli("info", tmp_path / "renamed.csv", "--json").exit_code == 0
    missing = cli("windows", tmp_path / os.fsdecode(b"gone\xfe.parquet"), "--budget", "300W")
    assert missing.exit_code == 2 and "gone\\xfe.parquet" in missing.stderr
    good = _csv(tmp_path / "good.csv", _good_rows())
    for argv in (
        ["import", good, "--out", tmp_path / os.fsdecode(b"out\xff.parquet")],
        ["report", "--trace", good, "--out", tmp_path / os.fsdecode(b"r\xff.html")],
        [
            "record",
            "--backend",
            "sim",
            "--duration",
            "2s",
            "--out",
            tmp_path / os.fsdecode(b"rec\xff.parquet"),
        ],
    ):
        done = cli(*argv)
        assert done.exit_code == 2, done.stderr
        assert "the name is not UTF-8" in done.stderr and "give a name in UTF-8" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [log.name, "renamed.csv", "good.csv"]
    )
