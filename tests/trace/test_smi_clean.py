"""An nvidia-smi log with no bad row is read in one pass that parses as it reads
(``smi._read_clean``); any row that pass does not read cleanly sends the log to the reading
that looks at each cell. Either way the result is the same: these tests read each log both
ways and compare the samples, metadata, warnings and bad rows (or the error), with the
parsing decided from a head of 60 rows, so that what changes later in a log falls after
it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import powerkit.trace.readers.smi as smi
from powerkit.core.errors import BadInputError
from powerkit.trace import ImportOptions
from powerkit.trace.readers.smi import read_smi

REALDATA = Path(__file__).resolve().parents[3] / "shared" / "realdata"
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
HEADER = "timestamp, index, power.draw [W]"


def _stamp(ms: int, day: str = "2026/01/05") -> str:
    return f"{day} 10:{ms // 60000:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def _rows(n: int = 60, gpus: int = 3, cells: str = "{w:.2f} W", index: bool = True) -> list[str]:
    rows = []
    for k in range(n):
        for g in range(gpus):
            first = [_stamp(k * 100 + g), str(g)] if index else [_stamp(k * 100 + g)]
            rows.append(", ".join([*first, cells.format(w=100 + 10 * g + k % 7)]))
    return rows


def _write(path: Path, rows: list[str], header: str | None = HEADER) -> Path:
    path.write_bytes(("\n".join(([header] if header else []) + rows) + "\n").encode())
    return path


def _read(path: Path, opts: ImportOptions) -> object:
    """What reading ``path`` gives: samples, metadata, warnings and bad rows, or the error."""
    warnings: list[str] = []
    try:
        trace = read_smi(path, opts, warnings)
    except BadInputError as exc:
        return ("error", str(exc), warnings)
    table = trace.table()
    return (
        {c: table.column(c).to_pylist() for c in table.column_names},
        json.loads(trace.meta.to_json()),
        warnings,
        trace.bad_rows,
    )


def _both(
    path: Path, monkeypatch: pytest.MonkeyPatch, head: int = 60, **options: object
) -> tuple[object, object, bool]:
    """(read cell by cell, read with the one pass first, whether the one pass read it)."""
    opts = ImportOptions(**options)  # type: ignore[arg-type]
    monkeypatch.setattr(smi, "_HEAD_ROWS", head)
    one_pass = smi._read_clean
    with monkeypatch.context() as m:
        m.setattr(smi, "_read_clean", lambda *a: None)
        by_cell = _read(path, opts)
    taken: list[bool] = []

    def spy(*args: object) -> object:
        got = one_pass(*args)  # type: ignore[arg-type]
        taken.append(got is not None)
        return got

    monkeypatch.setattr(smi, "_read_clean", spy)
    fused = _read(path, opts)
    return by_cell, fused, bool(taken and taken[0])


CLEAN: dict[str, tuple[list[str], str | None, dict[str, object]]] = {
    "index": (_rows(), HEADER, {"tz": "UTC"}),
    "no index (frames)": (_rows(index=False), "timestamp, power.draw [W]", {"tz": "UTC"}),
    "no zone given": (_rows(), HEADER, {}),
    "a zone": (_rows(), HEADER, {"tz": "America/Chicago"}),
    "identity and name fields": (
        [
            f"{_stamp(k * 100)}, NVIDIA H100 80GB HBM3, GPU-{g:04d}, 00000000:{g:02X}:00.0, "
            f"{g}, {150 + g}.50 W, 1980 MHz, 71 %"
            for k in range(30)
            for g in range(2)
        ],
        "timestamp, name, uuid, pci.bus_id, index, power.draw [W], clocks.current.sm [MHz], "
        "utilization.gpu [%]",
        {"tz": "UTC"},
    ),
    "fields not stored": (
        [r + ", 1234 MiB" for r in _rows()],
        HEADER + ", memory.used [MiB]",
        {"tz": "UTC"},
    ),
    "instant and average": (
        [f"{_stamp(k * 100)}, 0, {200 + k % 9}.00 W, {190 + k % 5}.00 W" for k in range(80)],
        "timestamp, index, power.draw.instant [W], power.draw.average [W]",
        {"tz": "UTC", "power_field": "average"},
    ),
    "headerless with units": (
        _rows(),
        None,
        {"tz": "UTC", "columns": ["timestamp", "index", "power.draw"]},
    ),
    "epoch seconds": (
        [f"{1767600000 + k / 10:.1f}, {g}, {120 + g}.00 W" for k in range(50) for g in range(2)],
        HEADER,
        {},
    ),
    "ISO with offsets": (
        [
            f"2026-01-05T10:00:{k // 10:02d}.{k % 10}00+02:00, 0, {120 + k % 3}.00 W"
            for k in range(90)
        ],
        HEADER,
        {},
    ),
    "unitless cells, --power-unit mW": (
        _rows(cells="{w:.0f}000"),
        "timestamp, index, power.draw",
        {"tz": "UTC", "power_unit": "mW"},
    ),
    "csv,nounits": (_rows(cells="{w:.2f}"), HEADER, {"tz": "UTC"}),
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_a_clean_log_is_read_in_one_pass_as_cell_by_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    rows, header, options = CLEAN[case]
    log = _write(tmp_path / "smi.csv", rows, header)
    by_cell, fused, taken = _both(log, monkeypatch, **options)
    assert by_cell == fused
    assert taken, "a clean log is read in one pass"
    assert not isinstance(by_cell, tuple) or by_cell[0] != "error"


def _late(rows: list[str], at: int, row: str) -> list[str]:
    return [*rows[:at], row, *rows[at + 1 :]]


#: logs that are clean in their first rows and not later: each goes cell by cell
DIRTY: dict[str, list[str]] = {
    "[N/A] power": _late(_rows(), 100, f"{_stamp(3301)}, 1, [N/A]"),
    "unparsable time": _late(_rows(), 100, "2026/01/05 10:xx:00.000, 1, 120.00 W"),
    "another time format": _late(_rows(), 100, "2026-01-05 10:00:03.301, 1, 120.00 W"),
    "kW under [W]": _late(_rows(), 100, f"{_stamp(3301)}, 1, 0.12 kW"),
    "a cell without its unit": _late(_rows(), 100, f"{_stamp(3301)}, 1, 120.00"),
    "no space before W": _late(_rows(), 100, f"{_stamp(3301)}, 1, 120.00W"),
    "NaN power": _late(_rows(), 100, f"{_stamp(3301)}, 1, nan W"),
    "infinite power": _late(_rows(), 100, f"{_stamp(3301)}, 1, inf W"),
    "negative power": _late(_rows(), 100, f"{_stamp(3301)}, 1, -5.00 W"),
    "implausible power": _late(_rows(), 100, f"{_stamp(3301)}, 1, 99000.00 W"),
    "a field over": _late(_rows(), 100, f"{_stamp(3301)}, 1, 120.00 W, 7"),
    "a field short": _late(_rows(), 100, f"{_stamp(3301)}, 120.00 W"),
    "an index that is not one": _late(_rows(), 100, f"{_stamp(3301)}, x, 120.00 W"),
    "a blank line": _late(_rows(), 100, ""),
    "a repeated time": _late(_rows(), 100, _rows()[97]),
    "a time out of order": _late(_rows(), 100, f"{_stamp(1)}, 1, 120.00 W"),
    "a cut last line": [*_rows(), f"{_stamp(9000)}, 0, 12"],
}


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("case", sorted(DIRTY))
def test_a_log_with_a_bad_row_late_reads_as_cell_by_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, skip: bool
) -> None:
    log = _write(tmp_path / "smi.csv", DIRTY[case])
    by_cell, fused, _ = _both(log, monkeypatch, tz="UTC", skip_bad_rows=skip)
    assert by_cell == fused


def test_bad_rows_are_named_by_the_reading_cell_by_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one pass does not read a log with a bad row: the error names its line."""
    log = _write(tmp_path / "smi.csv", DIRTY["kW under [W]"])
    by_cell, fused, taken = _both(log, monkeypatch, tz="UTC")
    assert not taken
    assert fused == by_cell
    assert fused[0] == "error" and "line 102" in fused[1]  # type: ignore[index]


def test_a_stray_byte_late_in_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _write(tmp_path / "smi.csv", _rows())
    data = log.read_bytes()
    at = data.index(b"\n", len(data) // 2) - 3  # inside a late power cell's number
    log.write_bytes(data[:at] + b"\xff" + data[at + 1 :])
    by_cell, fused, taken = _both(log, monkeypatch, tz="UTC", skip_bad_rows=True)
    assert by_cell == fused
    assert not taken


def test_a_head_without_enough_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parse is decided from 50 times: a head with fewer leaves the log to the cell reading."""
    rows = [f", 0, {100 + k}.00 W" for k in range(10)] + _rows()
    log = _write(tmp_path / "smi.csv", rows)
    by_cell, fused, taken = _both(log, monkeypatch, head=20, tz="UTC", skip_bad_rows=True)
    assert by_cell == fused
    assert not taken


def test_a_header_without_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _write(tmp_path / "smi.csv", [])
    by_cell, fused, _ = _both(log, monkeypatch, tz="UTC")
    assert by_cell == fused
    assert by_cell[0] == "error"  # type: ignore[index]


def _logs() -> list[Path]:
    found = sorted(REALDATA.glob("smi_*.csv")) if REALDATA.is_dir() else []
    return found + sorted(SAMPLE.glob("nvidia-smi*.csv"))


@pytest.mark.parametrize("log", _logs(), ids=lambda p: p.name)
def test_real_logs_read_alike(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every real nvidia-smi log reads the same both ways (with the default head)."""
    by_cell, fused, _ = _both(log, monkeypatch, head=smi._HEAD_ROWS, skip_bad_rows=True)
    assert by_cell == fused


def test_the_real_logs_are_there() -> None:
    if not REALDATA.is_dir():
        pytest.skip(f"{REALDATA} is absent")
    assert len(_logs()) >= 8
