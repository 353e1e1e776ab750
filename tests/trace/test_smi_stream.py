"""A large nvidia-smi log imported a block at a time gives the trace the whole-file read gives:
the same samples, metadata, warnings and bad rows (blocks made tiny here, so that frames, bad
rows and stalls fall across their edges)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import powerkit.trace.importer as importer
import powerkit.trace.readers.smi_stream as smi_stream
from powerkit.core.errors import BadInputError
from powerkit.trace import ImportOptions
from powerkit.trace.importer import import_traces

REALDATA = Path(__file__).resolve().parents[3] / "shared" / "realdata"


def _both(
    path: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch, lines: int = 7, **options: object
) -> tuple[object, object]:
    """(whole-file import, streamed import) of ``path``: results, or the errors raised."""
    opts = ImportOptions(**options)  # type: ignore[arg-type]
    got = []
    for streamed, out in ((False, tmp / "whole.parquet"), (True, tmp / "streamed.parquet")):
        monkeypatch.setattr(importer, "STREAM_BYTES", 0 if streamed else 10**15)
        monkeypatch.setattr(smi_stream, "STREAM_BLOCK", 40 * lines)  # (about `lines` lines a block)
        try:
            result = import_traces([path], opts, out)
        except BadInputError as exc:
            got.append(("error", str(exc)))
            continue
        table = pq.read_table(out)
        meta = json.loads(pq.read_schema(out).metadata[b"powerkit"])
        meta["series_index"] = json.loads(pq.read_schema(out).metadata[b"powerkit.index"])
        trace = result.traces[0]
        got.append(
            (
                {c: table.column(c).to_pylist() for c in table.column_names},
                {k: v for k, v in meta.items() if k != "powerkit_version"},
                trace.warnings,
                trace.bad_rows,
                result.rows,
            )
        )
    assert not (tmp / ".streamed.parquet.smi.parts").exists()  # the parts folder goes
    return got[0], got[1]


def _log(path: Path, rows: list[str], header: str = "timestamp, index, power.draw [W]") -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def _frames(n: int, gpus: int = 3, step_ms: int = 500, index: bool = True) -> list[str]:
    rows = []
    for k in range(n):
        for g in range(gpus):
            ms = k * step_ms + 2 * g
            stamp = f"2026/01/05 10:{ms // 60000:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"
            cells = [stamp, str(g)] if index else [stamp]
            rows.append(", ".join([*cells, f"{100 + 10 * g + k % 7}.00 W"]))
    return rows


@pytest.mark.parametrize("index", [True, False])
@pytest.mark.parametrize("lines", [1, 2, 7, 1000])
def test_blocks_read_as_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: bool, lines: int
) -> None:
    header = "timestamp, index, power.draw [W]" if index else "timestamp, power.draw [W]"
    log = _log(tmp_path / "smi.csv", _frames(40, index=index), header)
    whole, streamed = _both(log, tmp_path, monkeypatch, lines, tz="UTC")
    assert whole == streamed
    assert whole[4] == 120  # type: ignore[index]


def test_bad_rows_across_block_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _frames(30)
    rows[6] = rows[6].replace("W", "kV")  # an unparsable cell on a block's first line
    rows[13] = "2026/01/05 10:00:0x.000, 1, 120.00 W"  # an unparsable time on a block's last
    rows[20] = rows[20].replace("W", "[N/A]").replace(".00 [N/A]", "")  # N/A power
    rows[27] = rows[27] + ", 3"  # a line with a field too many
    rows[40] = "2026/01/05 14:00:00.000, 1, 120.00 W"  # far outside the run: found at the end
    log = _log(tmp_path / "bad.csv", rows)
    whole, streamed = _both(log, tmp_path, monkeypatch, 7, tz="UTC")
    assert whole == streamed and whole[0] == "error"  # type: ignore[index]
    whole, streamed = _both(log, tmp_path, monkeypatch, 7, tz="UTC", skip_bad_rows=True)
    assert whole == streamed
    assert [n for n, _ in whole[3]] == [8, 15, 29, 42]  # type: ignore[index]  (rows[i]: line i + 2)


def test_a_zone_and_a_header_without_units(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [r.replace(".00 W", ".00") for r in _frames(30)]
    log = _log(tmp_path / "chicago.csv", rows, "timestamp, index, power.draw")
    assert len(set(map(str, _both(log, tmp_path, monkeypatch, 5, tz="America/Chicago")))) == 1
    rows[20] = rows[20] + ", 9"  # no --tz: the zone assumed, said after the bad rows
    log = _log(tmp_path / "nozone.csv", rows, "timestamp, index, power.draw")
    whole, streamed = _both(log, tmp_path, monkeypatch, 5, skip_bad_rows=True)
    assert whole == streamed and len(whole[2]) >= 2  # type: ignore[index]
    headerless = tmp_path / "noheader.csv"
    headerless.write_text("\n".join(_frames(30)) + "\n")
    whole, streamed = _both(
        headerless, tmp_path, monkeypatch, 5, tz="UTC", columns=["timestamp", "index", "power.draw"]
    )
    assert whole == streamed and whole[4] == 90  # type: ignore[index]


def test_a_log_out_of_time_order_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _frames(30)
    rows[50], rows[10] = rows[10], rows[50]  # two samples swapped: bad rows, found whole
    log = _log(tmp_path / "swapped.csv", rows)
    whole, streamed = _both(log, tmp_path, monkeypatch, 7, tz="UTC", skip_bad_rows=True)
    assert whole == streamed and whole[3]  # type: ignore[index]


@pytest.mark.parametrize(
    "name",
    [
        "smi_8xH100_gpt350m_train_ckpt10_100ms.csv",
        "smi_2xTitanX_gpt350m_train_100ms_nounitW.csv",
        "smi_4xA100-40GB_llama2-70b_infer_inputsweep_100ms.csv",
        "smi_1xRTX4090_vlm_eval_1s_gaps.csv",
    ],
)
def test_real_logs_streamed_read_as_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    whole, streamed = _both(REALDATA / name, tmp_path, monkeypatch, 997, tz="UTC")
    assert whole == streamed


@pytest.mark.parametrize("lines", [1, 7])
@pytest.mark.parametrize("index", [True, False])
def test_rows_found_bad_at_the_end_leave_the_written_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: bool, lines: int
) -> None:
    """Two samples hours after the run (a clock that jumped): in time order, so streamed, and
    known to be far outside the run only once the whole log is read."""
    header = "timestamp, index, power.draw [W]" if index else "timestamp, power.draw [W]"
    rows = _frames(40, index=index)
    late = "2026/01/05 14:00:0{s}.000, " + ("0, " if index else "") + "150.00 W"
    rows += [late.format(s=1), late.format(s=2)]
    log = _log(tmp_path / "jump.csv", rows, header)
    whole, streamed = _both(log, tmp_path, monkeypatch, lines, tz="UTC", skip_bad_rows=True)
    assert whole == streamed
    assert [n for n, _ in whole[3]] == [122, 123]  # type: ignore[index]
    assert whole[4] == 120  # type: ignore[index]


def test_import_stream_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`import --stream` writes what `import` writes, and leaves no parts folder."""
    from tests.conftest import Cli

    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    cli = Cli()
    log = REALDATA / "smi_8xH100_gpt350m_train_ckpt1000_100ms.csv"
    monkeypatch.setattr(smi_stream, "STREAM_BLOCK", 200_000)
    a, b = tmp_path / "whole.parquet", tmp_path / "streamed.parquet"
    assert cli("import", log, "--tz", "UTC", "--out", a).exit_code == 0
    r = cli("import", log, "--tz", "UTC", "--stream", "--out", b)
    assert r.exit_code == 0, r.stderr
    assert pq.read_table(a).to_pylist() == pq.read_table(b).to_pylist()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["streamed.parquet", "whole.parquet"]
    assert cli.json("info", b)["energy_j"] == cli.json("info", a)["energy_j"]
    d = tmp_path / "ds"
    assert cli("import", log, "--tz", "UTC", "--stream", "--out", f"{d}/").exit_code == 0
    assert cli.json("info", d)["samples"] == 54_736


@pytest.mark.parametrize("lines", [1, 7, 1000])
def test_a_last_line_cut_short_without_a_newline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: int
) -> None:
    """A logger killed mid-write: the last line has no newline and too few fields (a block of
    its own when blocks are small); also a run of blank lines and a line longer than a block."""
    rows = _frames(30)
    rows[12] = ""  # blank lines are skipped, never bad rows
    rows[13] = "   "
    log = tmp_path / "cut.csv"
    log.write_text("\n".join(["timestamp, index, power.draw [W]", *rows, "2026/01/05 10:0"]))
    whole, streamed = _both(log, tmp_path, monkeypatch, lines, tz="UTC")
    assert whole == streamed
    assert whole[3] == [(92, "1 fields, the header has 3")]  # type: ignore[index]
    long = tmp_path / "long.csv"
    huge = "2026/01/05 10:00:09.000, 1, " + "9" * 5000 + " W"  # (longer than any block here)
    long.write_text("\n".join(["timestamp, index, power.draw [W]", *_frames(10), huge]) + "\n")
    whole, streamed = _both(long, tmp_path, monkeypatch, lines, tz="UTC")
    assert whole == streamed and whole[0] == "error"  # type: ignore[index]
