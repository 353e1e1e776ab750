"""nvidia-smi --query-gpu CSV: headers, units, interleaved GPUs, [N/A], bad rows, zones."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from powerkit.core.errors import BadInputError
from powerkit.trace import ImportOptions, read_trace


def write(tmp_path: Path, text: str, name: str = "smi.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


HEADERED = """timestamp, index, name, power.draw [W], utilization.gpu [%], temperature.gpu
2024/04/05 06:17:19.635, 0, NVIDIA A100-SXM4-80GB, 58.67 W, 0 %, 31
2024/04/05 06:17:19.640, 1, NVIDIA A100-SXM4-80GB, 61.00 W, 3 %, 33
2024/04/05 06:17:20.135, 0, NVIDIA A100-SXM4-80GB, 420.50 W, 100 %, 35
2024/04/05 06:17:20.140, 1, NVIDIA A100-SXM4-80GB, 200.00 W, 50 %, 34
"""


def test_headered_with_index_and_units(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, HEADERED))
    t = trace.table()
    assert t.num_rows == 4
    assert t.column("gpu").to_pylist() == [0, 0, 1, 1]
    assert t.column("power_w").to_pylist() == pytest.approx([58.67, 420.5, 61.0, 200.0])
    assert t.column("gpu_util").to_pylist() == [0, 100, 3, 50]
    assert t.column("temp_c").to_pylist() == [31, 35, 33, 34]
    assert trace.meta.source == "nvidia-smi"
    assert trace.meta.nameplate_w() == 400  # A100 SXM from the bundled table
    assert trace.meta.gpu_names() == ["NVIDIA A100-SXM4-80GB"]
    # a reading above TDP is a real transient: kept
    assert max(t.column("power_w").to_pylist()) > 400


def test_units_absent_from_cells(tmp_path: Path) -> None:
    text = "timestamp, power.draw [W], utilization.gpu [%]\n" + "".join(
        f"2025/12/05 02:37:{6 + i // 2:02d}.{(i % 2) * 3 + 256:03d}, {17.5 + i}, 0 %\n"
        for i in range(4)
    )
    t = read_trace(write(tmp_path, text)).table()
    assert sorted(t.column("power_w").to_pylist()) == pytest.approx([17.5, 18.5, 19.5, 20.5])


def test_headerless_with_units(tmp_path: Path) -> None:
    text = "2024/04/05 06:17:19.635, 58.67 W, 0 %\n2024/04/05 06:17:19.735, 60.00 W, 1 %\n"
    t = read_trace(write(tmp_path, text)).table()
    assert t.column("power_w").to_pylist() == pytest.approx([58.67, 60.0])


def test_headerless_without_units_needs_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "2024/04/05 06:17:19.635, 0, 58.67, 0\n")
    with pytest.raises(BadInputError, match="--columns"):
        read_trace(path)
    opts = ImportOptions(columns=["timestamp", "index", "power.draw", "utilization.gpu"])
    t = read_trace(path, opts).table()
    assert t.column("power_w").to_pylist() == pytest.approx([58.67])


def interleaved(gpus: int, frames: int, interval: float = 0.1) -> str:
    lines = ["timestamp, power.draw [W], memory.used [MiB]"]
    for f in range(frames):
        for g in range(gpus):
            t = 10 + f * interval + g * 0.002
            lines.append(f"2025/07/27 00:47:{t:06.3f}, {100 + 10 * g + (f % 3):.2f} W, {g} MiB")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_interleaved_gpus_inferred(tmp_path: Path, gpus: int) -> None:
    trace = read_trace(write(tmp_path, interleaved(gpus, 40)))
    t = trace.table()
    assert len(trace.meta.gpus) == gpus
    for g in range(gpus):
        powers = pc.filter(t.column("power_w"), pc.equal(t.column("gpu"), g)).to_pylist()
        assert len(powers) == 40
        assert all(100 + 10 * g <= p <= 102 + 10 * g for p in powers)
    assert any("GPUs per frame" in w for w in trace.warnings)


def test_gpus_per_frame_option(tmp_path: Path) -> None:
    path = write(tmp_path, interleaved(4, 30))
    trace = read_trace(path, ImportOptions(gpus_per_frame=2))
    assert len(trace.meta.gpus) == 2


def test_na_cells(tmp_path: Path) -> None:
    text = """timestamp, index, power.draw [W], clocks.sm [MHz]
2024/04/05 06:17:19.635, 0, [N/A], 1410 MHz
2024/04/05 06:17:20.635, 0, 250.00 W, [N/A]
2024/04/05 06:17:21.635, 0, 251.00 W, 1410 MHz
"""
    trace = read_trace(write(tmp_path, text))
    t = trace.table()
    assert t.num_rows == 2  # no power reading: the sample is dropped
    assert t.column("sm_clock_mhz").to_pylist() == [None, 1410]
    assert any("[N/A]" in w for w in trace.warnings)


def test_truncated_final_line_dropped(tmp_path: Path) -> None:
    text = HEADERED + "2024"
    trace = read_trace(write(tmp_path, text))
    assert trace.table().num_rows == 4
    assert any("truncated final line" in w and "line 6" in w for w in trace.warnings)


def test_bad_row_names_line(tmp_path: Path) -> None:
    lines = HEADERED.splitlines()
    lines.insert(2, "2024/04/05 06:17:19.637, 0, NVIDIA A100-SXM4-80GB, lots W, 0 %, 31")
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(BadInputError, match=r"line 3: unparsable power.draw 'lots W'"):
        read_trace(path)
    trace = read_trace(path, ImportOptions(skip_bad_rows=True))
    assert trace.table().num_rows == 4
    assert any("skipped 1 bad row" in w for w in trace.warnings)


def test_negative_power(tmp_path: Path) -> None:
    path = write(tmp_path, HEADERED.replace("61.00 W", "-61.00 W"))
    with pytest.raises(BadInputError, match="line 3: negative power"):
        read_trace(path)


def test_nan_power(tmp_path: Path) -> None:
    path = write(tmp_path, HEADERED.replace("61.00 W", "nan W"))
    with pytest.raises(BadInputError, match="line 3"):
        read_trace(path)


def test_timezone(tmp_path: Path) -> None:
    path = write(tmp_path, HEADERED)
    utc = read_trace(path).table().column("ts")[0].as_py()
    chicago = read_trace(path, ImportOptions(tz="America/Chicago"))
    local = chicago.table().column("ts")[0].as_py()
    assert (local - utc).total_seconds() == 5 * 3600  # CDT is UTC-5
    assert chicago.meta.tz == "America/Chicago"
    with pytest.raises(BadInputError, match="time zone"):
        read_trace(path, ImportOptions(tz="Mars/Olympus"))


def test_empty_after_header(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="empty"):
        read_trace(write(tmp_path, "timestamp, power.draw [W]\n"))


def test_a_header_field_loses_its_unit_and_nothing_else() -> None:
    """The unit is cut from the first `[` of a field ending in `]` — the regular expression
    it replaced, without its backtracking (a 64 KB line of brackets took 17 s to refuse)."""
    from powerkit.trace.readers.smi_layout import field_name as _field_name

    cases = {
        "power.draw [W]": "power.draw",
        " Power.Draw [W] ": "power.draw",
        "clocks [MHz] [x]": "clocks",
        "a[b]c": "a[b]c",
        "a [b": "a [b",
        "x]": "x]",
        "[W]": "",
        "memory.used [MiB]": "memory.used",
        "a\t[b]\t": "a",
        "[" * 9: "[" * 9,
    }
    assert {c: _field_name(c) for c in cases} == cases
