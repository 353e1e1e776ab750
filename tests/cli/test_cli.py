"""The real CLI: user commands, their JSON fields and exit codes; one test per bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.fake_nvml import FakeNvml


def test_help_lists_commands(cli: Cli) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    for command in ("record", "import", "info"):
        assert command in result.stdout


def test_record_sim_then_info(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "7b.parquet"
    summary = cli.json(
        "record",
        "--backend",
        "sim",
        "--preset",
        "a100-7b",
        "--duration",
        "10m",
        "--interval",
        "0.5s",
        "--out",
        out,
    )
    assert summary["samples"] == 1200 and summary["gpus"] == 1
    info = cli.json("info", out)
    assert info["gpus"] == 1
    assert info["samples"] == 1200
    assert info["span_s"] == pytest.approx(599.5)
    s = info["series"][0]
    assert set(s) >= {"host", "gpu", "samples", "mean_power_w", "max_power_w", "energy_j"}
    assert s["energy_source"] == "counter"
    assert 150 < s["mean_power_w"] < 350
    assert s["nameplate_w"] == 400
    assert info["metadata"]["preset"] == "a100-7b"
    # the energy counter and the trapezoid of power agree on a simulated trace
    trapezoid = s["mean_power_w"] * info["span_s"]
    assert s["energy_j"] == pytest.approx(trapezoid, rel=0.05)


def test_record_interval_100ms_multi_gpu(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "tp8.parquet"
    summary = cli.json(
        "record",
        "--backend",
        "sim",
        "--preset",
        "h200-70b-tp8",
        "--duration",
        "1m",
        "--interval",
        "100ms",
        "--out",
        out,
    )
    assert summary["samples"] == 8 * 600
    info = cli.json("info", out)
    assert info["gpus"] == 8
    assert info["interval_median_s"] == pytest.approx(0.1)


def test_record_nvml_with_fake(
    cli: Cli, tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake_nvml(gpus=3)
    out = tmp_path / "run.parquet"
    summary = cli.json(
        "record",
        "--backend",
        "nvml",
        "--gpus",
        "0,2",
        "--interval",
        "20ms",
        "--duration",
        "200ms",
        "--out",
        out,
        "--quiet",
    )
    assert summary["gpus"] == 2
    info = cli.json("info", out)
    assert [s["gpu"] for s in info["series"]] == [0, 2]
    assert info["metadata"]["power_semantics"] == "instant"


def test_record_nvml_without_driver(
    cli: Cli, tmp_path: Path, fake_nvml: Callable[..., FakeNvml]
) -> None:
    fake_nvml(fail_init=True)
    result = cli("record", "--backend", "nvml", "--duration", "1s", "--out", tmp_path / "x.parquet")
    assert result.exit_code == 2
    assert "NVML is not available" in result.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_import_then_info(cli: Cli, tmp_path: Path) -> None:
    src = tmp_path / "smi.csv"
    src.write_text(
        "timestamp, index, power.draw [W]\n2024/04/05 06:17:19.635, 0, 58.67 W\n"
        "2024/04/05 06:17:20.135, 0, 60.00 W\n2024"
    )
    out = tmp_path / "fleet.parquet"
    result = cli("import", src, "--out", out, "--tz", "America/Chicago", "--host", "n1")
    assert result.exit_code == 0, result.stderr
    assert "truncated final line" in result.stderr
    info = cli.json("info", out)
    assert info["samples"] == 2
    assert info["series"][0]["host"] == "n1"
    assert info["metadata"]["tz"] == "America/Chicago"
    assert info["start"] == "2024-04-05T11:17:19.635000Z"


def test_import_refuses_to_overwrite(cli: Cli, tmp_path: Path) -> None:
    src = tmp_path / "c.csv"
    src.write_text("ts,gpu,power_w\n1767225600,0,10\n")
    out = tmp_path / "out.parquet"
    out.write_text("precious")
    result = cli("import", src, "--out", out)
    assert result.exit_code == 2
    assert "already exists" in result.stderr
    assert out.read_text() == "precious"
    assert cli("import", src, "--out", out, "--force").exit_code == 0


def test_json_goes_alone_to_stdout(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "a.parquet"
    result = cli("record", "--backend", "sim", "--duration", "30s", "--out", out, "--json")
    json.loads(result.stdout)  # nothing else on stdout
    result = cli("info", out, "--json")
    json.loads(result.stdout)


# One test per row of the bad-input convention: exit code 2 and one line naming the problem.
def one_line_error(result) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_bad_missing_file(cli: Cli, tmp_path: Path) -> None:
    line = one_line_error(cli("info", tmp_path / "nope.parquet"))
    assert "nope.parquet: no such file" in line


def test_bad_unknown_format(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just some words\n")
    assert "unknown format" in one_line_error(cli("info", path))


def test_bad_unparsable_row(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "smi.csv"
    path.write_text(
        "timestamp, power.draw [W]\n2024/04/05 06:17:19.635, 58.67 W\n"
        "garbage, 60 W\n2024/04/05 06:17:20.635, 58.67 W\n"
    )
    line = one_line_error(cli("import", path, "--out", tmp_path / "o.parquet"))
    assert "smi.csv: line 3: unparsable timestamp 'garbage'" in line
    ok = cli("import", path, "--out", tmp_path / "o.parquet", "--skip-bad-rows")
    assert ok.exit_code == 0


@pytest.mark.parametrize("value", ["nan", "-5.0"])
def test_bad_nan_or_negative_power(cli: Cli, tmp_path: Path, value: str) -> None:
    path = tmp_path / "c.csv"
    path.write_text(f"ts,gpu,power_w\n1767225600,0,10\n1767225601,0,{value}\n")
    line = one_line_error(cli("info", path))
    assert "invalid power" in line


def test_bad_empty_trace(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("ts,gpu,power_w\n")
    assert "empty" in one_line_error(cli("info", path))


def test_bad_unit(cli: Cli, tmp_path: Path) -> None:
    line = one_line_error(
        cli("record", "--backend", "sim", "--duration", "10 mins", "--out", tmp_path / "x.parquet")
    )
    assert "'10 mins'" in line
    line = one_line_error(
        cli(
            "record",
            "--backend",
            "sim",
            "--duration",
            "1m",
            "--interval",
            "0.5",
            "--out",
            tmp_path / "x.parquet",
        )
    )
    assert "add a unit" in line
    line = one_line_error(
        cli(
            "record",
            "--backend",
            "sim",
            "--duration",
            "1m",
            "--power-cap",
            "300V",
            "--out",
            tmp_path / "x.parquet",
        )
    )
    assert "300V" in line


def test_bad_preset_and_options(cli: Cli, tmp_path: Path) -> None:
    assert "unknown preset" in one_line_error(
        cli(
            "record",
            "--backend",
            "sim",
            "--preset",
            "zz",
            "--duration",
            "1m",
            "--out",
            tmp_path / "x.parquet",
        )
    )
    assert "--duration is needed" in one_line_error(
        cli("record", "--backend", "sim", "--out", tmp_path / "x.parquet")
    )


def test_the_command_line_loads_no_analysis_at_start_up() -> None:
    """`powerkit --help` must stay instant: importing the CLI loads no heavy module."""
    import subprocess
    import sys

    code = (
        "import sys, powerkit.cli\n"
        "heavy = ('scipy', 'plotly', 'polars', 'duckdb', 'pyarrow', 'numpy', 'powerkit.sim',\n"
        "         'powerkit.control', 'powerkit.analysis', 'powerkit.report')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or\n"
        "             any(m == h or m.startswith(h + '.') for h in heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_short_options_and_completion(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("-V")
    assert r.exit_code == 0 and r.stdout.startswith("powerkit ")
    r = cli("-h")
    assert r.exit_code == 0 and "--install-completion" in r.stdout and "windows" in r.stdout
