"""Every power field nvidia-smi logs, and the options every source takes applied once after
reading (trace/overrides.py): ``--power-field``, ``--gpu-name``, ``--nameplate``,
``--power-semantics``, on nvidia-smi CSV, canonical CSV, Parquet files and datasets."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from powerkit.core.errors import BadInputError
from powerkit.trace import ImportOptions, read_trace
from tests.conftest import Cli

# nvidia-smi 550+ (driver 550.54), `nvidia-smi --query-gpu=timestamp,power.draw.instant,
# clocks.current.sm --format=csv -lms 100`: the instant field alone, as a transient study logs
INSTANT_ONLY = """timestamp, power.draw.instant [W], clocks.current.sm [MHz]
2025/01/15 10:00:00.100, 250.12 W, 1980 MHz
2025/01/15 10:00:00.200, 260.50 W, 1980 MHz
2025/01/15 10:00:00.300, 455.00 W, 1980 MHz
2025/01/15 10:00:00.400, 470.20 W, 1980 MHz
"""
# `--query-gpu=timestamp,index,name,power.draw,power.draw.average,power.draw.instant`
ALL_THREE = """\
timestamp, index, name, power.draw [W], power.draw.average [W], power.draw.instant [W]
2025/01/15 10:00:00.100, 0, NVIDIA H100 80GB HBM3, 250.00 W, 240.00 W, 300.00 W
2025/01/15 10:00:00.200, 0, NVIDIA H100 80GB HBM3, 260.00 W, 245.00 W, 310.00 W
"""


def write(tmp_path: Path, text: str, name: str = "smi.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_instant_field_alone_is_power_w_and_instant(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, INSTANT_ONLY), ImportOptions(tz="UTC"))
    assert trace.table().column("power_w").to_pylist() == pytest.approx(
        [250.12, 260.5, 455.0, 470.2], rel=1e-6
    )
    assert trace.meta.power_semantics == "instant"
    assert trace.meta.extra["power_field"] == "power.draw.instant"
    assert "sm_clock_mhz" in trace.table().column_names


@pytest.mark.parametrize("field", ["power.draw.average", "power.draw"])
def test_the_average_or_draw_field_alone(tmp_path: Path, field: str) -> None:
    text = INSTANT_ONLY.replace("power.draw.instant", field)
    trace = read_trace(write(tmp_path, text), ImportOptions(tz="UTC", gpu_name="NVIDIA H100"))
    assert trace.table().column("power_w").to_pylist()[0] == pytest.approx(250.12, rel=1e-6)
    assert trace.meta.power_semantics == "average_1s"  # (H100's usage is a 1 s average)


def test_all_three_fields_kept_and_power_field_chooses(tmp_path: Path) -> None:
    path = write(tmp_path, ALL_THREE)
    trace = read_trace(path, ImportOptions(tz="UTC"))
    t = trace.table()
    assert t.column("power_w").to_pylist() == [250.0, 260.0]
    assert t.column("power_avg_w").to_pylist() == [240.0, 245.0]
    assert t.column("power_instant_w").to_pylist() == [300.0, 310.0]
    assert trace.meta.power_semantics == "average_1s"
    chosen = read_trace(path, ImportOptions(tz="UTC", power_field="instant"))
    assert chosen.table().column("power_w").to_pylist() == [300.0, 310.0]
    assert chosen.meta.power_semantics == "instant"
    assert any("power.draw is not stored" in w for w in chosen.warnings)
    average = read_trace(path, ImportOptions(tz="UTC", power_field="average"))
    assert average.table().column("power_w").to_pylist() == [240.0, 245.0]


def test_a_power_field_the_log_lacks_is_refused_naming_what_it_has(tmp_path: Path) -> None:
    path = write(tmp_path, INSTANT_ONLY)
    with pytest.raises(BadInputError, match=r"no power\.draw\.average \(it has power\.draw\.inst"):
        read_trace(path, ImportOptions(tz="UTC", power_field="average"))


def test_power_field_on_a_canonical_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(_table(instant=True), path)
    trace = read_trace(path, ImportOptions(power_field="instant"))
    assert trace.table().column("power_w").to_pylist()[:2] == [400.0, 401.0]
    assert "power_instant_w" not in trace.table().column_names
    assert trace.meta.power_semantics == "instant"
    with pytest.raises(BadInputError, match="no power_avg_w column"):
        read_trace(path, ImportOptions(power_field="average"))


def _table(*, host: str | None = None, instant: bool = False, rows: int = 20) -> pa.Table:
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    columns = {
        "ts": pa.array(
            [start + dt.timedelta(seconds=0.5 * i) for i in range(rows)], pa.timestamp("us", "UTC")
        ),
        **({"host": pa.array([host] * rows)} if host else {}),
        "gpu": pa.array([0] * rows, pa.int16()),
        "power_w": pa.array([300.0 + i for i in range(rows)]),
        **({"power_instant_w": pa.array([400.0 + i for i in range(rows)])} if instant else {}),
    }
    return pa.table(columns)


def test_a_parquet_file_without_host_is_named_by_its_file(tmp_path: Path) -> None:
    path = tmp_path / "node7.parquet"
    pq.write_table(_table(), path)
    trace = read_trace(path)
    assert set(trace.table().column("host").to_pylist()) == {"node7"}
    assert any("no host column" in w for w in trace.warnings)
    csv = tmp_path / "node7.csv"  # the same samples as a CSV: the same series
    csv.write_text(
        "ts,gpu,power_w\n" + "".join(f"{1735689600 + 0.5 * i},0,{300.0 + i}\n" for i in range(20))
    )
    assert read_trace(csv).series_runs() == trace.series_runs()


def test_options_reach_a_foreign_dataset_without_gpu_metadata(tmp_path: Path) -> None:
    """A folder of host=.../part-0.parquet files written by another tool: no GPU list in any
    footer; --nameplate and --gpu-name still reach every GPU."""
    for host in ("n000", "n001"):
        (tmp_path / f"host={host}").mkdir()
        pq.write_table(_table(host=host), tmp_path / f"host={host}" / "part-0.parquet")
    trace = read_trace(tmp_path, ImportOptions(nameplate_w=700.0))
    assert {(g.host, g.gpu, g.nameplate_w) for g in trace.meta.gpus} == {
        ("n000", 0, 700.0),
        ("n001", 0, 700.0),
    }
    named = read_trace(tmp_path, ImportOptions(gpu_name="NVIDIA H200"))
    assert {(g.name, g.nameplate_w) for g in named.meta.gpus} == {("NVIDIA H200", 700.0)}


def test_oversub_on_a_foreign_dataset_with_nameplate(tmp_path: Path, cli: Cli) -> None:
    for host in ("n000", "n001"):
        (tmp_path / f"host={host}").mkdir()
        pq.write_table(_table(host=host), tmp_path / f"host={host}" / "part-0.parquet")
    result = cli("oversub", f"{tmp_path}/", "--nameplate", "700W", "--json")
    assert result.exit_code == 0, result.stderr
    assert '"gpus": 2' in result.stdout


def test_power_semantics_given_and_checked(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path, ALL_THREE)
    trace = read_trace(path, ImportOptions(tz="UTC", power_semantics="instant"))
    assert trace.meta.power_semantics == "instant"
    result = cli("info", str(path), "--tz", "UTC", "--power-semantics", "instantaneous")
    assert result.exit_code == 2
    assert "--power-semantics 'instantaneous': one of instant, average_1s" in result.stderr


def test_an_unknown_gpu_name_is_said(tmp_path: Path) -> None:
    path = write(tmp_path, INSTANT_ONLY)
    trace = read_trace(path, ImportOptions(tz="UTC", gpu_name="Acme X1"))
    assert any("'Acme X1' is not in the bundled table" in w for w in trace.warnings)
    assert trace.meta.power_semantics == "instant"  # (the field's, not the model's)


@pytest.mark.parametrize(
    ("name", "watts"),
    [
        ("NVIDIA H20", 400),
        ("NVIDIA H200", 700),
        ("NVIDIA B200", 1000),
        ("NVIDIA GB200", 1200),
        ("AMD Instinct MI300X", 750),
        ("AMD Instinct MI325X", 1000),
        ("AMD Instinct MI355X", 1400),
    ],
)
def test_the_bundled_table_covers_current_gpus(name: str, watts: float) -> None:
    from powerkit.trace.nameplate import lookup_nameplate_w

    assert lookup_nameplate_w(name) == watts


def test_every_nameplate_row_names_its_source() -> None:
    import csv
    from importlib import resources

    text = resources.files("powerkit").joinpath("data/gpu_nameplates.csv").read_text()
    rows = list(csv.DictReader(text.splitlines()))
    assert rows and all(r["source"].strip() for r in rows)


# --- columns inferred by name and unit (trace/infer.py) ---------------------------------------


def test_a_newcomers_csv_is_read_without_map(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "timestamp,gpu,power_w\n"
        "2025-01-01T00:00:00Z,0,100\n2025-01-01T00:00:00.5Z,0,110\n2025-01-01T00:00:01Z,0,120\n",
        "mine.csv",
    )
    trace = read_trace(path)
    assert trace.table().column("power_w").to_pylist() == [100.0, 110.0, 120.0]
    assert trace.meta.extra["inferred_columns"]["ts"][0] == "timestamp"
    assert any("columns read by their names: ts=timestamp, gpu=gpu" in w for w in trace.warnings)


# rocm-smi 6.x watched into a CSV by a loop (`rocm-smi --showpower --showmaxpower --csv`, its
# `device` cells `cardN`); here with units in the header, as a user's script writes them
ROCM_STYLE = """timestamp,device,power_watts,power_cap_watts
2025-03-01 12:00:00.0,card0,402.0,750.0
2025-03-01 12:00:00.0,card1,398.0,750.0
2025-03-01 12:00:00.5,card0,650.0,750.0
2025-03-01 12:00:00.5,card1,640.0,750.0
"""


def test_device_names_and_a_power_cap_column(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, ROCM_STYLE, "rocm.csv"), ImportOptions(tz="UTC"))
    t = trace.table()
    assert sorted(set(t.column("gpu").to_pylist())) == [0, 1]
    assert "power_limit_w" in t.column_names
    assert sorted(t.column("power_w").to_pylist()) == [398.0, 402.0, 640.0, 650.0]


# rocm-smi 6.x (`rocm-smi --showpower --csv`) in a shell loop that puts the epoch before each
# line of its output (`| sed "s/^/$(date +%s.%N),/"`): the tool's rows carry device and power
# only (one field short of the loop's header, which also names the cap), and each blank line
# of the tool's output becomes a separator row holding the time alone
ROCM_LOOP = "timestamp,device,power_watts,power_cap_watts\n" + "".join(
    f"{t:.3f},card0,{300 + i:.1f}\n{t:.3f},card1,{310 + i:.1f}\n{t:.3f},\n"
    for i, t in ((i, 1733300000 + i / 2) for i in range(6))
)


def test_a_rocm_smi_loop_log_is_read_with_its_separators(tmp_path: Path) -> None:
    path = write(tmp_path, ROCM_LOOP, "rocm-loop.csv")
    assert path.read_text().splitlines()[1:4] == [
        "1733300000.000,card0,300.0",
        "1733300000.000,card1,310.0",
        "1733300000.000,",
    ]
    trace = read_trace(path)
    t = trace.table()
    assert t.num_rows == 12 and trace.bad_rows == []
    assert sorted(set(t.column("gpu").to_pylist())) == [0, 1]
    assert t.column("power_w").to_pylist()[:6] == [300.0, 301.0, 302.0, 303.0, 304.0, 305.0]
    assert "power_limit_w" not in t.column_names  # never written: no column of nulls
    assert any("6 separator row(s) (a time alone) skipped" in w for w in trace.warnings)
    assert any("power_cap_watts never written" in w for w in trace.warnings)


def test_a_short_row_among_full_rows_stays_a_bad_row(tmp_path: Path) -> None:
    text = ROCM_STYLE + "2025-03-01 12:00:01.0,card0,600.0\n2025-03-01 12:00:01.0,card1,610,750\n"
    with pytest.raises(BadInputError, match=r"line 6: 3 fields, the header has 4"):
        read_trace(write(tmp_path, text, "rocm.csv"), ImportOptions(tz="UTC"))


def test_a_power_column_never_written_is_refused(tmp_path: Path) -> None:
    text = "timestamp,device,power_watts\n1733300000,card0\n1733300000.5,card0\n"
    with pytest.raises(BadInputError, match=r"power_w column 'power_watts' is never written"):
        read_trace(write(tmp_path, text, "short.csv"))


# a loop whose `index` counts its frames (one line per GPU a frame, the GPU named in `name`)
FRAME_COUNTER = "timestamp,index,name,power\n" + "".join(
    f"2026-01-05 10:00:{i:02d}.000,{i},gpu{c},{100 + c + i}\n" for i in range(5) for c in range(4)
)


def test_an_index_that_counts_frames_is_refused_naming_the_gpu(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path, FRAME_COUNTER, "frames.csv")
    result = cli("info", str(path), "--tz", "UTC")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "column 'index' cannot be the GPU: lines 2-5 share one time and one index" in (
        result.stderr
    )
    fix = "--map ts=timestamp,gpu=name,power_w=power"
    assert fix in result.stderr
    read = cli("info", str(path), "--tz", "UTC", *fix.split(" "), "--json")
    assert read.exit_code == 0, read.stderr
    assert json.loads(read.stdout)["gpus"] == 4
    alone = "\n".join(
        ",".join(f for j, f in enumerate(line.split(",")) if j != 2)
        for line in FRAME_COUNTER.splitlines()
    )
    result = cli("info", str(write(tmp_path, alone + "\n", "f2.csv")), "--tz", "UTC")
    assert result.exit_code == 2
    assert "name the GPU's column with --map gpu=COLUMN" in result.stderr


def test_units_in_names_are_read(tmp_path: Path) -> None:
    text = "time [ms],card,power [mW]\n0,card0,100000\n500,card0,110000\n1000,card0,120000\n"
    trace = read_trace(write(tmp_path, text), ImportOptions(start="2025-01-01T00:00:00Z"))
    assert trace.table().column("power_w").to_pylist() == [100.0, 110.0, 120.0]
    assert trace.span_us()[1] - trace.span_us()[0] == 1_000_000


def test_two_candidate_power_columns_are_refused_naming_both(tmp_path: Path) -> None:
    text = "time,gpu,power_draw,board_power\n0,0,100,90\n1,0,110,95\n"
    with pytest.raises(BadInputError, match=r"'power_draw', 'board_power'.*power_w=COLUMN"):
        read_trace(write(tmp_path, text), ImportOptions(start="2025-01-01T00:00:00Z"))


def test_inference_reads_the_real_nvml_logs_as_map_does(realdata: Path) -> None:
    """The shared NVML logs (t_s or t, gpu_index, power_w): read with no --map, the same
    samples as with the --map their SOURCES.md gives."""
    for name, ts in (
        ("nvml_3xV100_budget750W_70hz.csv", "t"),
        ("nvml_1xV100_capstep_280to200W_100hz.csv", "t_s"),
    ):
        path = realdata / name
        start = "2025-01-01T00:00:00Z"
        inferred = read_trace(path, ImportOptions(start=start))
        mapped = read_trace(
            path,
            ImportOptions(
                start=start, mapping={"ts": ts, "gpu": "gpu_index", "power_w": "power_w"}
            ),
        )
        for column in ("ts", "gpu", "power_w"):
            assert inferred.table().column(column).equals(mapped.table().column(column))


def test_explain_says_how_each_column_was_read(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path, ROCM_STYLE, "rocm.csv")
    result = cli("info", str(path), "--tz", "UTC", "--explain")
    assert result.exit_code == 0, result.stderr
    told = result.stdout  # (on stdout, before the summary; on stderr with --json)
    assert "read as csv, its columns inferred from their names" in told
    assert re.search(r"power_limit_w +power_cap_watts +a power limit's name +750", told)
    assert re.search(r"gpu +device +a GPU column's name +0 +1", told)
    out = tmp_path / "r.parquet"
    result = cli("import", str(path), "--tz", "UTC", "-o", str(out), "--explain")
    assert result.exit_code == 0, result.stderr
    assert re.search(r"power_w +power_watts +a power column's name, in W +398 +650", result.stderr)
    smi = write(tmp_path, ALL_THREE, "smi.csv")
    told = cli("info", str(smi), "--tz", "UTC", "--explain", "--power-field", "instant").stdout
    assert "power_w is instant (instantaneous board power): the field power.draw.instant" in told


def test_an_unreadable_csv_is_refused_with_the_map_that_reads_it(tmp_path: Path, cli: Cli) -> None:
    text = (
        "when,node,draw,clock\n2025-01-01 00:00:00,0,250.5,1980\n2025-01-01 00:00:01,0,260.5,1980\n"
    )
    path = write(tmp_path, text, "u.csv")
    result = cli("info", str(path))
    assert result.exit_code == 2
    assert "read it with --map ts=when,gpu=node,power_w=draw" in result.stderr

    read = cli("info", str(path), "--tz", "UTC", "--map", "ts=when,gpu=node,power_w=draw")
    assert read.exit_code == 0, read.stderr


@pytest.mark.parametrize("unit", ["ns", "ms"])
@pytest.mark.parametrize("zone", ["UTC", None])
def test_a_parquet_with_times_in_another_unit(
    tmp_path: Path, cli: Cli, unit: str, zone: str | None
) -> None:
    """pandas writes zoned times as timestamp[ns, UTC]: every command reads such a file (the
    times in µs, as the canonical type holds them), and import counts its GPUs."""
    table = _table(host="n0")
    at = table.schema.get_field_index("ts")
    ts = table.column("ts").cast(pa.timestamp(unit, zone), safe=False)
    path = tmp_path / "pandas.parquet"
    pq.write_table(table.set_column(at, "ts", ts), path)
    got = read_trace(path).table().column("ts")
    assert got.type == pa.timestamp("us", zone)
    assert got.cast(pa.int64()).to_pylist() == table.column("ts").cast(pa.int64()).to_pylist()
    for argv in (["info", path], ["windows", path, "--budget", "310W"]):
        r = cli(*argv)
        assert r.exit_code == 0, r.stderr
    r = cli("import", path, "--out", tmp_path / "out.parquet", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["gpus"] == 1, r.stderr


def test_a_csv_of_power_without_times_is_refused_saying_so(tmp_path: Path, cli: Cli) -> None:
    """A CSV whose power column is found by name but which has no column of times: the line
    says so (no --map reads it); the power column is never offered as the times, even when its
    numbers happen to increase."""
    for text in ("power_w\n100\n110\n", "gpu,power\n0,100\n0,110\n"):
        result = cli("info", str(write(tmp_path, text, "p.csv")))
        assert result.exit_code == 2
        assert "has power in" in result.stderr and "no column of times" in result.stderr
        assert "--map" not in result.stderr
    result = cli("info", str(write(tmp_path, "watts,temp\n100,50\n110,51\n", "w.csv")))
    assert result.exit_code == 2 and "read it with --map ts=temp,power_w=watts" in result.stderr


def test_a_phase_or_step_file_given_as_a_log_names_the_command_that_reads_it(
    tmp_path: Path, cli: Cli
) -> None:
    """A workload's phase file (Timestamp, Phase, Runtime (s), …) or a CSV of step starts given
    where a power log goes: the line names `energy --phases` / `--steps` instead of a --map
    that would take its run times as power; a column whose name gives a unit other than power's
    is never offered as power."""
    phases = write(
        tmp_path,
        "Timestamp,Phase,Runtime (s),GPU Energy (uJ),Output Token Limit\n"
        "1711725415.39,tokenizer,0.47,11509000,32\n1711725415.86,load,27.09,932979000,32\n",
        "phases.csv",
    )
    result = cli("info", str(phases))
    assert result.exit_code == 2 and f"energy TRACE --phases {phases}" in result.stderr
    assert "power_w=Runtime" not in result.stderr
    steps = write(tmp_path, "step,start\n1,2026-01-01T00:00:00Z\n2,2026-01-01T00:00:01Z\n", "s.csv")
    result = cli("info", str(steps))
    assert result.exit_code == 2 and f"energy TRACE --steps {steps}" in result.stderr
    timed = write(
        tmp_path,
        "when,runtime (s),draw\n2026-01-01 00:00:00,0.5,250\n2026-01-01 00:00:01,1.5,260\n",
        "t.csv",
    )
    result = cli("info", str(timed))
    assert result.exit_code == 2 and "power_w=draw" in result.stderr
