"""dmon logs, DCGM exporter scrapes, canonical CSV and Parquet (file and folder)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from powerkit.core.errors import BadInputError
from powerkit.trace import ImportOptions, detect_format, read_trace, write_trace
from powerkit.trace.schema import METADATA_KEY, TraceMeta

DMON_DT = """#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk
#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %    MHz    MHz
 20240101   12:00:00      0    312     55      -     98     40      0      0   2619   1980
 20240101   12:00:00      1    305     54      -     97     41      0      0   2619   1980
 20240101   12:00:01      0    688     57      -    100     45      0      0   2619   1980
 20240101   12:00:01      1    120     54      -     10      5      0      0   2619    210
#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk
#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %    MHz    MHz
 20240101   12:00:02      0    300     57      -     98     40      0      0   2619   1980
 20240101   12:00:02      1    299     54      -     97     41      0      0   2619   1980
"""


def test_dmon_with_dates(tmp_path: Path) -> None:
    path = tmp_path / "dmon.log"
    path.write_text(DMON_DT)
    assert detect_format(path) == "dmon"
    trace = read_trace(path, ImportOptions(gpu_name="NVIDIA H100 80GB HBM3"))
    t = trace.table()
    assert t.num_rows == 6
    assert t.column("gpu").to_pylist() == [0, 0, 0, 1, 1, 1]
    assert t.column("power_w").to_pylist() == [312, 688, 300, 305, 120, 299]
    assert t.column("sm_clock_mhz").to_pylist()[4] == 210
    assert str(t.column("ts")[1].as_py()) == "2024-01-01 12:00:01+00:00"
    assert trace.meta.nameplate_w() == 700


def test_dmon_without_times(tmp_path: Path) -> None:
    text = (
        "# gpu    pwr  gtemp\n# Idx      W      C\n    0     43     34\n    1     44     35\n"
        "    0     50     34\n    1     51     35\n"
    )
    path = tmp_path / "dmon.log"
    path.write_text(text)
    trace = read_trace(path, ImportOptions(start="2024-05-01T00:00:00", interval_s=2.0))
    ts = [x.as_py().isoformat() for x in trace.table().column("ts")]
    assert ts[:2] == ["2024-05-01T00:00:00+00:00", "2024-05-01T00:00:02+00:00"]
    assert any("no time columns" in w for w in trace.warnings)


def test_dmon_without_power_column(tmp_path: Path) -> None:
    path = tmp_path / "dmon.log"
    path.write_text("# gpu     sm    mem\n# Idx      %      %\n    0     98     40\n")
    with pytest.raises(BadInputError, match="no pwr column"):
        read_trace(path)


DCGM = """# TIMESTAMP 1700000000.0
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node7"} 512.25
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node7"} 98.5
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",Hostname="node7"} 1000000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-b",Hostname="node7"} 2000000
DCGM_FI_PROF_DRAM_ACTIVE{gpu="0",UUID="GPU-a",Hostname="node7"} 0.42
# TIMESTAMP 1700000001.0
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node7"} 520.75
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node7"} 99.0
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",Hostname="node7"} 1000516
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-b",Hostname="node7"} 2000099
"""


def test_dcgm_scrapes(tmp_path: Path) -> None:
    path = tmp_path / "scrape.prom"
    path.write_text(DCGM)
    assert detect_format(path) == "dcgm"
    trace = read_trace(path)
    t = pl.from_arrow(trace.table())
    assert t.height == 4
    assert t["host"].unique().to_list() == ["node7"]
    assert t.filter(pl.col("gpu") == 0)["power_w"].to_list() == [512.25, 520.75]
    assert t.filter(pl.col("gpu") == 0)["energy_j"].to_list() == [1000.0, 1000.516]
    assert t.filter(pl.col("gpu") == 0)["dram_active"].to_list()[0] == pytest.approx(0.42)
    assert trace.meta.nameplate_w() == 700
    assert t["ts"][1].timestamp() == 1700000001.0


def test_dcgm_without_timestamps_spaced_by_interval(tmp_path: Path) -> None:
    scrape = 'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 100\nDCGM_FI_DEV_POWER_USAGE{gpu="1"} 200\n'
    path = tmp_path / "scrape.txt"
    path.write_text(scrape * 3)
    trace = read_trace(path, ImportOptions(interval_s=15.0, host="h1"))
    t = pl.from_arrow(trace.table())
    assert t.height == 6
    times = t.filter(pl.col("gpu") == 1)["ts"].dt.epoch("s").to_list()
    assert times == [0, 15, 30]
    assert t["host"].unique().to_list() == ["h1"]


def test_dcgm_with_sample_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "scrape.txt"
    path.write_text(
        'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 100 1700000000500\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 110 1700000001000\n'
    )
    t = read_trace(path).table()
    assert [x.as_py().timestamp() for x in t.column("ts")] == [1700000000.5, 1700000001.0]


def test_dcgm_openmetrics_scrapes(tmp_path: Path) -> None:
    """OpenMetrics: timestamps in seconds, each scrape ends with # EOF; a broken exposition is
    one bad row (the whole exposition) with --skip-bad-rows, one error line without."""
    good = (
        "# TYPE DCGM_FI_DEV_POWER_USAGE_INSTANT gauge\n"
        'DCGM_FI_DEV_POWER_USAGE_INSTANT{gpu="0",Hostname="n1"} 300.5 1700000000.25\n'
        'DCGM_FI_DEV_POWER_USAGE_INSTANT{gpu="1",Hostname="n1"} 200 1700000000.25\n'
        "# EOF\n"
    )
    second = good.replace("300.5", "310").replace("1700000000.25", "1700000001.25")
    path = tmp_path / "scrape.om"
    path.write_text(good + second)
    t = pl.from_arrow(read_trace(path).table())
    assert t.filter(pl.col("gpu") == 0)["power_w"].to_list() == [300.5, 310.0]
    assert t["ts"].dt.epoch("ms").unique().sort().to_list() == [1700000000250, 1700000001250]
    broken = good + second.replace('gpu="1"', 'gpu="1",}').replace(
        "# TYPE", "# TYPE x gauge\n# TYPE"
    )
    path.write_text(broken)
    with pytest.raises(BadInputError, match=r"line 5: not an OpenMetrics exposition"):
        read_trace(path)
    t = pl.from_arrow(read_trace(path, ImportOptions(skip_bad_rows=True)).table())
    assert t.height == 2


def test_dcgm_text_lines_parsed_by_prometheus_client(tmp_path: Path) -> None:
    path = tmp_path / "scrape.txt"
    path.write_text(
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",note="a \\"quoted\\" b"} 1.5e2 1700000000500\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0" 160 1700000001000\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 170 1700000002000\n'
    )
    with pytest.raises(BadInputError, match=r"line 2: not a Prometheus sample line"):
        read_trace(path)
    t = read_trace(path, ImportOptions(skip_bad_rows=True)).table()
    assert t.column("power_w").to_pylist() == [150.0, 170.0]


def test_canonical_csv(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text(
        "ts,host,gpu,power_w,phase,step\n"
        "2026-01-01T00:00:00Z,a,0,100.5,rollout,1\n"
        "2026-01-01T00:00:00.5Z,a,0,101.5,train,1\n"
        "1767225601,a,1,99,train,2\n"[:-26]
        + "\n"
    )
    trace = read_trace(path)
    t = trace.table()
    assert t.column("power_w").to_pylist() == [100.5, 101.5]
    assert t.column("phase").to_pylist() == ["rollout", "train"]
    assert t.column("step").to_pylist() == [1, 1]


def test_canonical_csv_epoch_seconds(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("ts,gpu,power_w\n1767225600,0,10\n1767225600.5,0,11\n")
    t = read_trace(path, ImportOptions(host="x")).table()
    assert t.column("ts")[1].as_py().timestamp() == 1767225600.5
    assert t.column("host").to_pylist() == ["x", "x"]


def test_parquet_file_and_hive_folder(tmp_path: Path) -> None:
    trace = read_trace(_csv(tmp_path))
    write_trace(trace.table(), trace.meta, tmp_path / "one.parquet")
    back = read_trace(tmp_path / "one.parquet")
    assert back.table().equals(trace.table())
    assert back.meta.source == "csv"
    schema = pq.read_schema(tmp_path / "one.parquet")
    assert TraceMeta.from_json(schema.metadata[METADATA_KEY]).source == "csv"
    folder = tmp_path / "fleet"
    for host in ("a", "b"):
        table = trace.table().set_column(1, "host", [[host] * trace.table().num_rows])
        write_trace(table, trace.meta, folder / f"host={host}" / "date=2026-01-01" / "p.parquet")
    both = read_trace(folder)
    assert both.table().num_rows == 2 * trace.table().num_rows
    assert sorted(set(both.table().column("host").to_pylist())) == ["a", "b"]


def _csv(tmp_path: Path) -> Path:
    path = tmp_path / "c.csv"
    path.write_text("ts,gpu,power_w\n1767225600,0,10\n1767225601,0,11\n")
    return path


def test_unknown_and_empty_inputs(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hello world\nthis is not a trace\n")
    with pytest.raises(BadInputError, match="unknown format"):
        read_trace(tmp_path / "x.txt")
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(BadInputError, match="empty"):
        read_trace(tmp_path / "e.csv")
    with pytest.raises(BadInputError, match="no such file"):
        read_trace(tmp_path / "missing.csv")
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01\x02")
    with pytest.raises(BadInputError, match="unknown format"):
        read_trace(tmp_path / "bin.dat")
