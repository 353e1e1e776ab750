"""Layouts fleets write, read right the first time (or refused with the way to read them).

Each file is written here the way its tool writes it; the tool is named on each test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import Cli


def test_an_index_column_that_is_not_the_device(cli: Cli, tmp_path: Path) -> None:
    """A Python logger wrapping `nvidia-smi --query-gpu=index,memory.used,power.draw
    --format=csv,noheader` that writes its own `gpu` column first and the tool's `index` (here
    constant) after it: the rows of one frame are told apart by `gpu`, never averaged."""
    log = tmp_path / "wrapped.csv"
    rows = ["timestamp,gpu,index,memory.used [MiB],power.draw [W]"]
    for t in range(20):
        for g in range(8):
            rows.append(f"2026/01/05 10:00:{t:02d}.000,{g},0,1000 MiB,{100 + 25 * g}.00 W")
    log.write_text("\n".join(rows) + "\n")
    r = cli("info", log, "--tz", "UTC", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["gpus"] == 8 and doc["samples"] == 160
    assert doc["mean_power_w"] == pytest.approx(100 + 25 * 3.5)
    assert "told apart by column 'gpu'" in r.stderr and "'index' does not vary" in r.stderr


def test_rows_of_one_gpu_at_one_time_are_never_merged(cli: Cli, tmp_path: Path) -> None:
    """The same log without any column that tells the frame's rows apart."""
    log = tmp_path / "flat.csv"
    rows = ["timestamp,index,power.draw [W]"]
    for t in range(5):
        rows += [f"2026/01/05 10:00:{t:02d}.000,0,{p}.00 W" for p in (100, 300)]
    log.write_text("\n".join(rows) + "\n")
    r = cli("info", log, "--tz", "UTC")
    assert r.exit_code == 2
    assert "5 row(s) repeat a time their GPU already has in column 'index'" in r.stderr
    assert "--map" in r.stderr
    mapped = tmp_path / "m.csv"  # any CSV read with --map: the same rule
    mapped.write_text("t,g,p\n0,0,100\n0,0,300\n1,0,100\n")
    r = cli("info", mapped, "--map", "ts=t,gpu=g,power_w=p", "--start", "2026-01-05T10:00:00Z")
    assert r.exit_code == 2 and "1 sample(s) repeat a time their GPU already has" in r.stderr


@pytest.mark.parametrize(
    "fields",
    [
        ["index", "power.draw", "memory.used", "temperature.gpu"],
        ["index", "power.draw", "memory.used", "temperature.gpu", "clocks.sm"],
        ["index", "uuid", "memory.used", "power.draw", "utilization.gpu", "clocks.sm"],
    ],
)
def test_every_query_field_lands_in_its_own_column(
    cli: Cli, tmp_path: Path, fields: list[str]
) -> None:
    """`nvidia-smi --query-gpu=timestamp,FIELDS --format=csv -lms 500` (driver 535): fields
    after one powerkit does not store (memory.used) keep their own columns; uuid goes into the
    GPU metadata."""
    units = {"power.draw": " [W]", "memory.used": " [MiB]", "clocks.sm": " [MHz]",
             "utilization.gpu": " [%]"}  # fmt: skip
    cell = {"index": "{g}", "uuid": "GPU-{g}{g}{g}{g}-fake", "power.draw": "{p}.00 W",
            "memory.used": "40000 MiB", "temperature.gpu": "{temp}", "clocks.sm": "{clk} MHz",
            "utilization.gpu": "{util} %"}  # fmt: skip
    header = ", ".join(["timestamp", *(f + units.get(f, "") for f in fields)])
    rows = [header]
    for t in range(4):
        for g in range(2):
            values = {"g": g, "p": 200 + 10 * g + t, "temp": 50 + g, "clk": 1400 + g,
                      "util": 90 + g}  # fmt: skip
            stamp = f"2026/01/05 10:00:{t // 2:02d}.{5 * (t % 2)}00"
            rows.append(", ".join([stamp, *(cell[f].format(**values) for f in fields)]))
    log = tmp_path / "smi.csv"
    log.write_text("\n".join(rows) + "\n")
    out = tmp_path / "x.parquet"
    r = cli("import", log, "--tz", "UTC", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert "not stored (no canonical column): memory.used" in r.stderr
    table = pq.read_table(out).sort_by([("gpu", "ascending"), ("ts", "ascending")])
    expect = {"temperature.gpu": ("temp_c", [50, 51]), "clocks.sm": ("sm_clock_mhz", [1400, 1401]),
              "utilization.gpu": ("gpu_util", [90, 91])}  # fmt: skip
    for field in fields:
        if field in expect:
            column, per_gpu = expect[field]
            values = table.column(column).to_pylist()
            assert values == [per_gpu[0]] * 4 + [per_gpu[1]] * 4, (field, values)
    meta = json.loads(pq.read_schema(out).metadata[b"powerkit"])
    uuids = [g.get("uuid") for g in meta["gpus"]]
    assert uuids == (["GPU-0000-fake", "GPU-1111-fake"] if "uuid" in fields else [None, None])


def test_milliwatts_in_a_watts_column_suggest_the_unit(cli: Cli, tmp_path: Path) -> None:
    """nvitop's `Device.power_usage()` (milliwatts) written by a user's script to a column it
    called gpu_power_w."""
    log = tmp_path / "nvitop.csv"
    log.write_text("time,gpu_index,gpu_power_w\n" + "".join(
        f"{1767225600 + k},0,{37000 + k}\n" for k in range(10)))  # fmt: skip
    args = ("info", log, "--map", "ts=time,gpu=gpu_index,power_w=gpu_power_w")
    r = cli(*args)
    assert r.exit_code == 2 and "milliwatts? give --power-unit mW" in r.stderr
    doc = cli.json(*args, "--power-unit", "mW")
    assert doc["max_power_w"] == pytest.approx(37.009)


def test_a_window_longer_than_the_trace_says_so(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "t.parquet"
    assert (
        cli("record", "--backend", "sim", "--duration", "3m", "--out", trace, "-q").exit_code == 0
    )
    r = cli("windows", trace, "--budget", "300W", "--windows", "1s,5m")
    assert r.exit_code == 0
    assert "the trace is shorter than the window(s) 5m" in r.stderr
    assert "--fill hold" not in r.stderr


def test_time_not_integrated_is_stated(cli: Cli, tmp_path: Path) -> None:
    """A logger that stalls 1.1 s after every 10 samples at 0.2 s (a Python loop flushing to
    a slow disk): the stalls hold no energy, and the table says how much time that is."""
    rows, t = ["t,gpu,p"], 0.0
    for k in range(200):
        rows.append(f"{t:.3f},0,300")
        t += 0.2 if (k + 1) % 10 else 1.3
    log = tmp_path / "stall.csv"
    log.write_text("\n".join(rows) + "\n")
    args = ("info", log, "--map", "ts=t,gpu=gpu,power_w=p", "--start", "2026-01-05T10:00:00Z")
    r = cli(*args)
    assert r.exit_code == 0 and "40.7 % of the GPU time (24.7 s)" in r.stdout
    assert "--fill hold:DUR" in r.stdout
    doc = cli.json(*args)
    assert doc["unintegrated_s"] == pytest.approx(24.7)
    assert doc["energy_j"] == pytest.approx(300 * (60.7 - 24.7))
    filled = cli.json(*args, "--fill", "hold:2s")
    assert filled["unintegrated_s"] == 0 and filled["energy_j"] > doc["energy_j"]
    r = cli(*args, "--fill", "hold:2s")
    assert "not integrated" not in r.stdout
