"""Headerless logs whose cells carry their units (an NVML profiler's output): read by the
cells' units, the profiler's ``#`` comment lines before and after the data skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from powerkit.core.errors import BadInputError
from powerkit.trace import ImportOptions, read_trace
from powerkit.trace.reader import detect_format
from tests.conftest import Cli

# as an NVML sampling profiler prints it (tab-separated, a comment header and footer)
PROFILE = """# nvml-power-profiler: device 0, NVIDIA H100 80GB HBM3, every 5 ms
# time\tpower\ttemperature
0.00000 ms\t164.68100 W\t68 C
5.19739 ms\t170.00000 W\t68 C
10.40000 ms\t250.50000 W\t69 C
15.60000 ms\t251.00000 W\t69 C
# 4 samples
"""


def write(tmp_path: Path, text: str, name: str = "prof.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_read_by_the_cells_units(tmp_path: Path) -> None:
    path = write(tmp_path, PROFILE)
    assert detect_format(path) == "unit-cells"
    trace = read_trace(path, ImportOptions(start="2025-01-01T00:00:00Z"))
    t = trace.table()
    assert t.column("power_w").to_pylist() == pytest.approx([164.681, 170.0, 250.5, 251.0])
    assert t.column("temp_c").to_pylist() == [68.0, 68.0, 69.0, 69.0]
    lo, hi = trace.span_us()
    assert hi - lo == 15_600
    assert set(t.column("host").to_pylist()) == {"prof"}


def test_commas_and_milliwatts(tmp_path: Path) -> None:
    text = "1735689600.0 s, 164681 mW\n1735689600.5 s, 170000 mW\n1735689601.0 s, 180000 mW\n"
    trace = read_trace(write(tmp_path, text, "p.csv"))
    assert trace.table().column("power_w").to_pylist() == pytest.approx([164.681, 170.0, 180.0])
    assert not any("offsets" in w for w in trace.warnings)  # (epoch times)


def test_offsets_without_a_start_are_said(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, PROFILE))
    assert any("the times are offsets" in w and "start" in w for w in trace.warnings)


def test_a_cell_in_another_unit_is_a_bad_row_naming_its_line(tmp_path: Path) -> None:
    text = PROFILE.replace("10.40000 ms\t250.50000 W", "10.40000 ms\t250.50000 mV")
    with pytest.raises(BadInputError, match=r"line 5: cell '250.50000 mV': expected a number in W"):
        read_trace(write(tmp_path, text))
    trace = read_trace(write(tmp_path, text), ImportOptions(skip_bad_rows=True))
    assert trace.table().num_rows == 3 and [n for n, _ in trace.bad_rows] == [5]


def test_two_power_cells_are_refused(tmp_path: Path) -> None:
    text = "0 ms\t100 W\t90 W\n5 ms\t110 W\t95 W\n"
    with pytest.raises(BadInputError, match="cells 2 and 3 are both in power units"):
        read_trace(write(tmp_path, text))


def test_a_killed_profilers_cut_line_is_dropped(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path, PROFILE.replace("# 4 samples\n", "") + "20.8 ms\t25")
    result = cli("info", str(path), "--start", "2025-01-01T00:00:00Z", "--json")
    assert result.exit_code == 0, result.stderr
    assert '"samples": 4' in result.stdout
