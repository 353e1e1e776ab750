"""Layouts fleets write, read right the first time (or refused with the way to read them).

Each file is written here the way its tool writes it; the tool is named on each test.
"""

from __future__ import annotations

import itertools
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
    units = {
        "power.draw": " [W]",
        "memory.used": " [MiB]",
        "clocks.sm": " [MHz]",
        "utilization.gpu": " [%]",
    }
    cell = {
        "index": "{g}",
        "uuid": "GPU-{g}{g}{g}{g}-fake",
        "power.draw": "{p}.00 W",
        "memory.used": "40000 MiB",
        "temperature.gpu": "{temp}",
        "clocks.sm": "{clk} MHz",
        "utilization.gpu": "{util} %",
    }
    header = ", ".join(["timestamp", *(f + units.get(f, "") for f in fields)])
    rows = [header]
    for t in range(4):
        for g in range(2):
            values = {
                "g": g,
                "p": 200 + 10 * g + t,
                "temp": 50 + g,
                "clk": 1400 + g,
                "util": 90 + g,
            }
            stamp = f"2026/01/05 10:00:{t // 2:02d}.{5 * (t % 2)}00"
            rows.append(", ".join([stamp, *(cell[f].format(**values) for f in fields)]))
    log = tmp_path / "smi.csv"
    log.write_text("\n".join(rows) + "\n")
    out = tmp_path / "x.parquet"
    r = cli("import", log, "--tz", "UTC", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert "not stored (no canonical column): memory.used" in r.stderr
    table = pq.read_table(out).sort_by([("gpu", "ascending"), ("ts", "ascending")])
    expect = {
        "temperature.gpu": ("temp_c", [50, 51]),
        "clocks.sm": ("sm_clock_mhz", [1400, 1401]),
        "utilization.gpu": ("gpu_util", [90, 91]),
    }
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
    log.write_text(
        "time,gpu_index,gpu_power_w\n"
        + "".join(f"{1767225600 + k},0,{37000 + k}\n" for k in range(10))
    )
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
    assert "--fill hold:2s integrates across every gap of this trace" in r.stdout  # (below)
    doc = cli.json(*args)
    assert doc["unintegrated_s"] == pytest.approx(24.7)
    assert doc["energy_j"] == pytest.approx(300 * (60.7 - 24.7))
    filled = cli.json(*args, "--fill", "hold:2s")
    assert filled["unintegrated_s"] == 0 and filled["energy_j"] > doc["energy_j"]
    r = cli(*args, "--fill", "hold:2s")
    assert "not integrated" not in r.stdout


def _wide_log(path: Path, names: list[str], rows: int = 40) -> list[list[float]]:
    """A pynvml logging loop (nvidia-ml-py 12.x): every second, `csv.writer.writerow([time,
    *(nvmlDeviceGetPowerUsage(h) / 1000 for h in handles)])` under a header naming the GPUs."""
    watts = [[100.0 + 50 * g + (t % 7) for t in range(rows)] for g in range(len(names))]
    lines = ["timestamp," + ",".join(names)]
    for t in range(rows):
        stamp = f"2026-01-05T10:{t // 60:02d}:{t % 60:02d}+00:00"
        lines.append(stamp + "," + ",".join(f"{watts[g][t]:.3f}" for g in range(len(names))))
    path.write_text("\n".join(lines) + "\n")
    return watts


@pytest.mark.parametrize(
    "names",
    [
        ["GPU0", "GPU1", "GPU2"],
        ["gpu_0", "gpu_1", "gpu_2"],
        ["GPU 0 [W]", "GPU 1 [W]", "GPU 2 [W]"],
        ["power.draw.0", "power.draw.1", "power.draw.2"],
    ],
)
def test_wide_files_are_read_one_gpu_per_column(cli: Cli, tmp_path: Path, names: list[str]) -> None:
    log = tmp_path / "wide.csv"
    watts = _wide_log(log, names)
    doc = cli.json("info", log)
    assert doc["source"] == "csv" and doc["gpus"] == 3 and doc["samples"] == 120
    means = {s["gpu"]: s["mean_power_w"] for s in doc["series"]}
    assert means == {g: pytest.approx(sum(w) / len(w)) for g, w in enumerate(watts)}
    # energy: each GPU's trapezoids over 1 s steps, computed here independently
    energy = sum(sum((a + b) / 2 for a, b in itertools.pairwise(w)) for w in watts)
    assert doc["energy_j"] == pytest.approx(energy)
    windows = cli.json("windows", log, "--budget", "200W", "--windows", "1s")
    over = sum(1 for w in watts for x in w if x > 200)
    assert windows["windows"][0]["violations"] == over
    assert windows["windows"][0]["positions"] == 120


def test_an_empty_power_cell_of_a_wide_file_is_no_sample_of_that_gpu(
    cli: Cli, tmp_path: Path
) -> None:
    """The logging loop of a host whose GPU 2 went away (its column written empty): the other
    GPUs' samples on those lines are read, GPU 2 is left out, and both are said."""
    log = tmp_path / "wide.csv"
    watts = _wide_log(log, ["GPU0", "GPU1", "GPU2"])
    lines = log.read_text().splitlines()
    lines = [lines[0]] + [ln.rsplit(",", 1)[0] + "," for ln in lines[1:]]
    lines[5] = lines[5].split(",")[0] + ",," + lines[5].split(",")[2] + ","  # GPU 0 empty once
    log.write_text("\n".join(lines) + "\n")
    r = cli("info", log, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["gpus"] == 2 and doc["samples"] == 79
    means = {s["gpu"]: s["mean_power_w"] for s in doc["series"]}
    assert means[1] == pytest.approx(sum(watts[1]) / 40)
    assert means[0] == pytest.approx((sum(watts[0]) - watts[0][4]) / 39)
    assert "column 'GPU2' holds no power: GPU 2 left out" in r.stderr
    assert "column 'GPU0' has 1 empty power cell(s): no sample of GPU 0" in r.stderr


def test_a_wide_file_is_read_with_a_map_of_its_power_columns(cli: Cli, tmp_path: Path) -> None:
    """A user's logger naming columns by slot: `--map power_w=A|B` (the GPU index is the
    position in the list; a unit in brackets is the column's unit)."""
    log = tmp_path / "slots.csv"
    log.write_text(
        "time,left [mW],right,temp\n"
        + "".join(f"{1767607200 + t},{250000 + t},{300 + t},50\n" for t in range(10))
    )
    doc = cli.json("info", log, "--map", "ts=time,power_w=right|left [mW]")
    means = {s["gpu"]: s["mean_power_w"] for s in doc["series"]}
    assert means == {0: pytest.approx(304.5), 1: pytest.approx(250.0045)}
    r = cli("info", log, "--map", "ts=time,gpu=temp,power_w=right|left [mW]")
    assert r.exit_code == 2 and "map no gpu column" in r.stderr
    r = cli("info", log, "--map", "ts=time,power_w=right|middle")
    assert r.exit_code == 2 and "middle" in r.stderr and "the header lacks" in r.stderr
    twice = tmp_path / "twice.csv"
    twice.write_text("timestamp,GPU0,gpu_0\n1767607200,1,2\n")
    r = cli("info", twice)
    assert r.exit_code == 2 and "name the same GPU" in r.stderr


def _dcgm_client_log(path: Path) -> None:
    """A DCGM API client (the dcgm Python bindings' field-group watcher, DCGM 3.3) writing one
    row per (GPU, field) value: field 155 is DCGM_FI_DEV_POWER_USAGE (W), 112
    DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (a bit mask); each field has its own timestamp."""
    lines = ["GPUId,TimeStampUs,Field,Values"]
    t0 = 1767607200_000000
    for t in range(60):
        for g in range(2):
            lines.append(f"{g},{t0 + t * 1_000_000 + 13 * g},155,{70 + g + (t % 2)}")
            lines.append(f"{g},{t0 + t * 1_000_000 + 400_000 + 13 * g},112,{4 if t % 3 else 0}")
    path.write_text("\n".join(lines) + "\n")


def test_long_files_keep_one_field_with_where(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "dcgm_fields.csv"
    _dcgm_client_log(log)
    r = cli("info", log)
    assert r.exit_code == 2 and "--where Field=VALUE" in r.stderr
    mapping = ("--map", "ts=TimeStampUs,gpu=GPUId,power_w=Values", "--time-unit", "us")
    r = cli("info", log, *mapping)
    assert r.exit_code == 2
    assert "column 'Field' holds 2 fields (155, 112)" in r.stderr and "--where Field" in r.stderr
    doc = cli.json("info", log, *mapping, "--where", "Field=155")
    assert doc["gpus"] == 2 and doc["samples"] == 120
    assert {s["gpu"]: s["mean_power_w"] for s in doc["series"]} == {0: 70.5, 1: 71.5}
    out = tmp_path / "power.parquet"
    r = cli("import", log, *mapping, "--where", "Field=155", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert pq.read_table(out).num_rows == 120
    assert (
        cli.json("windows", out, "--budget", "71W", "--windows", "1s")["windows"][0]["violations"]
        == 30
    )  # GPU 1 at 72 W every other second
    r = cli("info", log, *mapping, "--where", "Field=150")
    assert r.exit_code == 2 and "no row has Field=150 (column 'Field' holds 155, 112)" in r.stderr
    r = cli("info", log, *mapping, "--where", "Kind=155")
    assert r.exit_code == 2 and "no column 'Kind'" in r.stderr
    r = cli("info", out, "--where", "Field=155")
    assert r.exit_code == 2 and "applies to CSV files" in r.stderr
    # a column named twice keeps either value: both fields together repeat no time
    both = cli("info", log, *mapping, "--where", "Field=155", "--where", "Field=112", "--json")
    assert both.exit_code == 0 and json.loads(both.stdout)["samples"] == 240


@pytest.mark.parametrize(
    ("interval", "grid"),
    [
        (0.1, 0.5),
        (0.5, 0.5),
        (1.0, 1.0),
        (1.04, 1.0),
        (1.06, 2.0),
        (5.01, 5.0),
        (60.0, 60.0),
        (7200.0, 7200.0),
    ],
)
def test_the_default_grid_is_the_interval_rounded_up(interval: float, grid: float) -> None:
    from powerkit.cells.grid import default_grid_s
    from powerkit.trace.model import Trace
    from powerkit.trace.schema import TraceMeta

    assert default_grid_s(Trace(meta=TraceMeta(source="csv", interval_s=interval))) == grid


def test_coarse_logs_are_judged_on_their_own_interval(cli: Cli, tmp_path: Path) -> None:
    """A complete 5 s nvidia-smi log (`-l 5`) is complete: its coverage is 100 %, not 10 %,
    and `windows` runs without a --grid, saying which windows its interval allows."""
    rows = ["timestamp, index, power.draw [W]"]
    for k in range(720):  # one hour
        t = 5 * k
        rows.append(
            f"2026/01/05 {10 + t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}.000, 0, "
            f"{200 + 100 * (k % 2)}.00 W"
        )
    log = tmp_path / "smi5.csv"
    log.write_text("\n".join(rows) + "\n")
    doc = cli.json("info", log, "--tz", "UTC")
    assert doc["grid_s"] == 5.0 and doc["coverage"] == 1.0
    assert cli.json("info", log, "--tz", "UTC", "--grid", "0.5s")["coverage"] == pytest.approx(
        0.1, abs=0.001
    )
    r = cli("windows", log, "--tz", "UTC", "--budget", "250W", "--json")
    assert r.exit_code == 0, r.stderr
    w = json.loads(r.stdout)
    assert w["grid_s"] == 5.0 and [x["window"] for x in w["windows"]] == ["5s", "30s", "5m"]
    assert w["windows"][0]["violation_rate"] == 0.5
    assert "a 500ms window needs faster samples" in r.stderr
    fleet = cli.json("oversub", f"{log}:4", "--tz", "UTC", "--nameplate", "400W")
    assert fleet["grid_s"] == 5.0


def _amd_monitor_log(path: Path) -> None:
    """`amd-smi monitor -p -t -u -m --csv -w 1 > log.csv` (amd-smi 24.7, ROCm 6.3): the watch
    loop prints its header before every interval; `N/A` where a reading failed."""
    lines = []
    for k in range(30):
        lines.append(
            "timestamp,gpu,power_usage,hotspot_temperature,memory_temperature,gfx,"
            "gfx_clock,mem,mem_clock"
        )
        for g in range(2):
            power = "N/A" if (k, g) == (7, 1) else str(300 + 100 * g + 10 * (k % 3))
            lines.append(f"{1767607200 + k},{g},{power},55,48,99,2100,40,1300")
    path.write_text("\n".join(lines) + "\n")


def test_amd_smi_monitor_logs(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "amd_monitor.csv"
    _amd_monitor_log(log)
    r = cli("info", log, "--gpu-name", "AMD Instinct MI300X", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["source"] == "amd-smi" and doc["power_semantics"] == "amd_socket"
    assert doc["gpus"] == 2 and doc["samples"] == 59
    assert {s["gpu"]: s["mean_power_w"] for s in doc["series"]} == {
        0: 310.0,
        1: pytest.approx((sum(400 + 10 * (k % 3) for k in range(30)) - 410) / 29),
    }
    assert all(s["nameplate_w"] == 750 for s in doc["series"])
    assert "29 repeated header line(s) skipped" in r.stderr
    assert "1 power reading(s) the logger marked N/A" in r.stderr
    out = tmp_path / "amd.parquet"
    assert cli("import", log, "--out", out).exit_code == 0
    table = pq.read_table(out)
    assert set(table.column("sm_clock_mhz").to_pylist()) == {2100}
    assert set(table.column("temp_c").to_pylist()) == {55}
    budget = cli.json(
        "windows", log, "--gpu-name", "AMD Instinct MI300X", "--budget", "50%", "--windows", "1s"
    )
    assert budget["budget_w"] == 375.0


def test_amd_smi_metric_logs_integrate_the_energy_counter(cli: Cli, tmp_path: Path) -> None:
    """`amd-smi metric -p -E --csv -w 1 --file log.csv` (amd-smi 24.7): socket power and the
    energy accumulator in J; energy is the counter's rise, not the power's trapezoids."""
    lines = [
        "timestamp,gpu,socket_power,gfx_voltage,soc_voltage,mem_voltage,throttle_status,"
        "power_management,total_energy_consumption"
    ]
    counter = [5000.0, 9000.0]
    for k in range(30):
        for g in range(2):
            counter[g] += 410 + 50 * g  # what the GPU drew in the second before
            lines.append(
                f"{1767607200 + k},{g},{400 + 50 * g},N/A,N/A,N/A,UNTHROTTLED,ENABLED,"
                f"{counter[g]:.3f}"
            )
    log = tmp_path / "amd_metric.csv"
    log.write_text("\n".join(lines) + "\n")
    doc = cli.json("info", log)
    assert doc["source"] == "amd-smi" and doc["samples"] == 60
    assert doc["energy_j"] == pytest.approx(29 * 410 + 29 * 460)
    single = tmp_path / "snapshot.csv"
    single.write_text("gpu,socket_power\n0,400\n")
    r = cli("info", single)
    assert r.exit_code == 2 and "record it with --watch" in r.stderr


def _square_log(path: Path, step_s: float, seconds: float, offset_s: float = 0.15) -> None:
    """A Python logger at its own pace (`time.sleep(step)` between NVML reads): 2 GPUs, each
    switching between 100 W and 300 W every 10 s, from 0.15 s past a whole minute."""
    rows = ["t,gpu,p"]
    k = 0
    while (t := offset_s + k * step_s) < seconds:
        watts = 300 if int(t // 10) % 2 else 100
        rows += [f"{1767607200 + t:.3f},{g},{watts}" for g in range(2)]
        k += 1
    path.write_text("\n".join(rows) + "\n")


@pytest.mark.parametrize(("step", "grid"), [(0.3, "0.3s"), (0.3, None), (1.06, None)])
def test_dynamic_range_is_measured_on_clock_seconds_and_periods(
    cli: Cli, tmp_path: Path, step: float, grid: str | None
) -> None:
    log = tmp_path / "square.csv"
    _square_log(log, step, 200.0)
    args = ["utility", log, "--map", "ts=t,gpu=gpu,power_w=p", "--nameplate", "400W"]
    doc = cli.json(*args, *(["--grid", grid] if grid else []))
    minute, hour = doc["dynamic_range"]
    # whole clock minutes: [0, 60) (the cell holding the 0.15 s sample begins at 0), [60, 120)
    # and [120, 180); the last is cut at 200 s
    assert minute["resolved"] and minute["periods"] == 3 and minute["partial_periods"] == 1
    assert minute["max_w"] == pytest.approx(400.0)  # 2 x 100 W <-> 2 x 300 W
    assert not hour["resolved"] and hour["max_w"] is None
    assert "holds no whole clock hour" in hour["note"]


def test_grid_figures_cover_the_whole_trace(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "long.csv"
    _square_log(log, 0.5, 1348.0, offset_s=0.0)
    doc = cli.json("utility", log, "--map", "ts=t,gpu=gpu,power_w=p", "--nameplate", "400W")
    times = doc["figures"]["time_s"]
    assert len(times) <= 2000 and times[-1] > 1340
    site = doc["figures"]["site_w"]["site"]
    assert sum(site) / len(site) == pytest.approx(doc["site_mean_w"], rel=5e-3)  # unweighted


def test_a_grid_too_fine_for_several_series_is_one_error(cli: Cli, tmp_path: Path) -> None:
    fast, slow = tmp_path / "fast.csv", tmp_path / "slow.csv"
    _square_log(fast, 1.0, 120.0)
    _square_log(slow, 2.0, 120.0)
    mapping = ("--map", "ts=t,gpu=gpu,power_w=p", "--nameplate", "400W")
    r = cli("oversub", fast, slow, *mapping, "--grid", "0.5s")
    assert r.exit_code == 2
    line = r.stderr.strip().splitlines()[-1]
    assert "4 series are sampled more coarsely than the 500ms grid" in line
    assert "use --grid 2s or more" in line
    # following the hint works for every series; without --grid, the coarsest is the default
    assert cli.json("oversub", fast, slow, *mapping, "--grid", "2s")["grid_s"] == 2.0
    assert cli.json("oversub", fast, slow, *mapping)["grid_s"] == 2.0
    assert cli.json("utility", fast, slow, *mapping)["dt_s"] == 2.0


def test_second_means_weigh_cells_by_their_overlap() -> None:
    import numpy as np

    from powerkit.utility.metrics import second_means

    p = np.array([100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0])  # 0.3 s cells from 0.0 s
    present = np.ones(7, dtype=bool)
    first, means = second_means(p, present, 0.3, 1767607200.0)
    assert first == 1767607200 and means.size == 2  # seconds [0, 1) and [1, 2) of 2.1 s
    assert means[0] == pytest.approx(0.3 * 100 + 0.3 * 200 + 0.3 * 300 + 0.1 * 400)
    assert means[1] == pytest.approx(0.2 * 400 + 0.3 * 500 + 0.3 * 600 + 0.2 * 700)
    present[4] = False
    assert np.isnan(second_means(p, present, 0.3, 1767607200.0)[1][1])
    coarse = second_means(np.array([10.0, 20.0]), np.ones(2, dtype=bool), 5.0, 1767607200.0)
    assert coarse[1] == pytest.approx([10.0] * 5 + [20.0] * 5)  # a 5 s cell holds its value


def test_tables_never_cut_a_number(tmp_path: Path) -> None:
    """A fleet's long host names: piped, every row is one whole line; on a narrow terminal the
    name wraps and every figure stays whole."""
    import os
    import re
    import shutil
    import subprocess
    import sys

    host = "very-long-hostname-of-a-node-in-a-cluster-" + "x" * 60 + ".example.internal"
    rows = ["ts,host,gpu,power_w"] + [
        f"{1767607200 + t * 0.5},{host},{g},{300.123 + g}" for t in range(100) for g in range(2)
    ]
    log = tmp_path / "fleet.csv"
    log.write_text("\n".join(rows) + "\n")
    exe = str(Path(sys.executable).with_name("powerkit"))
    piped = subprocess.run([exe, "info", str(log)], capture_output=True, text=True, check=True)
    lines = [ln for ln in piped.stdout.splitlines() if host in ln]
    assert len(lines) == 2 and all(
        re.search(r"4\.1[34] Wh\*", ln) and "100.0%" in ln for ln in lines
    )
    assert "…" not in piped.stdout
    if shutil.which("script") is None:  # util-linux's, for a terminal
        return
    env = dict(os.environ, COLUMNS="100", TERM="xterm")
    tty = subprocess.run(
        ["script", "-qc", f"{exe} info {log}", "/dev/null"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    shown = tty.stdout.replace("\r", "")
    assert len(re.findall(r"4\.1[34] Wh\*", shown)) == 2 and "…" not in shown


def test_peaks_on_few_complete_positions_are_flagged(cli: Cli, tmp_path: Path) -> None:
    """A logger that drops 11.5 % of its 0.5 s samples at random: most cells are present, yet
    few 5-minute windows have the 90 % they need; the peaks say what they rest on."""
    import numpy as np

    rng = np.random.default_rng(7)
    keep = rng.random(7200) > 0.115
    rows = ["ts,gpu,power_w"] + [
        f"{1767607200 + 0.5 * k:.1f},0,{300 + 50 * np.sin(k / 40):.2f}"
        for k in np.flatnonzero(keep)
    ]
    log = tmp_path / "lossy.csv"
    log.write_text("\n".join(rows) + "\n")
    r = cli("oversub", log, "--nameplate", "400W", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    five = next(w for w in doc["windows"] if w["window"] == "5m")
    assert doc["coverage"] > 0.85 and five["coverage"] < 0.5
    assert "peaks rest on few complete positions" in r.stderr and "5m on" in r.stderr
    html = tmp_path / "fleet.html"
    r = cli(
        "oversub",
        log,
        "--nameplate",
        "400W",
        "--capacity",
        "80%",
        "--html",
        html,
        "--plotly-js",
        "cdn",
    )
    assert r.exit_code == 0, r.stderr
    assert "over 0.3 kW" in html.read_text()  # the terminal's over-capacity column


def test_a_small_fleet_is_shown_in_its_own_units(cli: Cli, tmp_path: Path) -> None:
    """A 5 kW fleet's swings are shown in watts, not as "0.00 MW"."""
    log = tmp_path / "small.csv"
    _square_log(log, 0.5, 600.0)
    r = cli("utility", f"{log}:6", "--map", "ts=t,gpu=gpu,power_w=p", "--nameplate", "400W")
    assert r.exit_code == 0, r.stderr
    assert "4,800.0 W nameplate" in r.stdout and "site W/s" in r.stdout and " MW" not in r.stdout


def test_members_of_different_gpus_carry_their_own_nameplates(cli: Cli, tmp_path: Path) -> None:
    a, b = tmp_path / "h100.csv", tmp_path / "a100.csv"
    _square_log(a, 0.5, 120.0)
    _square_log(b, 0.5, 120.0)
    mapping = ("--map", "ts=t,gpu=gpu,power_w=p")
    doc = cli.json("oversub", f"{a}:2@700W", f"{b}@400W", *mapping)
    assert doc["fleet_nameplate_w"] == 2 * 2 * 700 + 2 * 400  # 2 GPUs a trace
    assert doc["nameplate_w"] is None  # mixed
    both = cli.json("oversub", f"{a}@700W", b, *mapping, "--nameplate", "500W")
    assert both["fleet_nameplate_w"] == 2 * 700 + 2 * 500  # a member's own wins
    r = cli("oversub", f"{a}@80%", *mapping)
    assert r.exit_code == 2 and "PATH[:COUNT][@NAMEPLATE]" in r.stderr


def test_grid_asks_for_a_nameplate_only_where_it_is_used(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "plain.csv"
    _square_log(log, 0.5, 300.0)
    mapping = ("--map", "ts=t,gpu=gpu,power_w=p")
    doc = cli.json("utility", log, *mapping)  # ramps, ranges and bands: no nameplate needed
    assert doc["fleet_nameplate_w"] is None and doc["site_nameplate_w"] is None
    assert doc["dynamic_range"][0]["max_w"] == pytest.approx(400.0)
    for needs in (("--site-mw", "1"), ("--mitigate", "floor:50%")):
        r = cli("utility", log, *mapping, *needs)
        assert r.exit_code == 2 and "give --nameplate" in r.stderr
    scaled = cli.json("utility", log, *mapping, "--site-mw", "1", "--nameplate", "400W")
    assert scaled["replicas"] == 1250


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("timestamp,GPU40000\n2026-01-05T10:00:00Z,100\n", "GPU index 40000 out of range"),
        (
            "timestamp,GPU0,GPU1\n2026-01-05T10:00:00Z,100\n2026-01-05T10:00:01Z,1,2,3\n",
            "line 2: 2 fields, the header has 3",
        ),
        ('timestamp,GPU0\n2026-01-05T10:00:00Z,"1,5"\n', "line 2: invalid power '1,5'"),
        ("timestamp,GPU0\n2026-01-05T10:00:00Z,N/A\n", "no samples left"),
        ("timestamp,gpu,power_usage\n1767607200,0,abc\n", "line 2: invalid power 'abc'"),
        ("timestamp,gpu,power_usage\n", "no samples (empty trace)"),
        ("timestamp,gpu,power_usage\nx,0,100\n", "unrecognized timestamp format 'x'"),
        ("timestamp,gpu,socket_power\n1767607200,0,250000\n", "--power-unit mW"),
    ],
)
def test_bad_wide_and_amd_smi_logs_are_one_line(
    cli: Cli, tmp_path: Path, text: str, message: str
) -> None:
    log = tmp_path / "bad.csv"
    log.write_text(text)
    r = cli("info", log)
    assert r.exit_code == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and message in lines[-1], lines[-1]


def test_a_wide_file_of_thousands_of_gpus_stays_in_proportion(tmp_path: Path) -> None:
    """5,000 power columns x 20 rows: read in seconds and memory in proportion to the cells
    (no expression per column nested in another)."""
    from powerkit.trace import read_trace

    header = "timestamp," + ",".join(f"GPU{i}" for i in range(5000))
    rows = [f"{1767607200 + t}," + ",".join(["100"] * 5000) for t in range(20)]
    log = tmp_path / "many.csv"
    log.write_text(header + "\n" + "\n".join(rows) + "\n")
    trace = read_trace(log)
    assert len(trace.meta.gpus) == 5000 and trace.table().num_rows == 100_000
