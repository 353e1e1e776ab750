"""Open any supported trace: detect the format from the content and hand it to its reader."""

from __future__ import annotations

from pathlib import Path

from powerkit.errors import BadInputError
from powerkit.trace.csvfile import looks_like_canonical_csv, read_canonical_csv
from powerkit.trace.dcgm import looks_like_dcgm, read_dcgm
from powerkit.trace.dmon import looks_like_dmon, read_dmon
from powerkit.trace.model import Trace
from powerkit.trace.parquet import read_parquet_trace
from powerkit.trace.smi import ImportOptions, looks_like_smi, read_smi

__all__ = ["FORMATS", "detect_format", "read_trace"]

FORMATS = ("parquet", "csv", "nvidia-smi", "dmon", "dcgm")


def detect_format(path: Path) -> str:
    """Return the format name of a file or folder (one of FORMATS)."""
    if path.is_dir():
        return "parquet"
    with open(path, "rb") as fh:
        head = fh.read(64 * 1024)
    if head[:4] == b"PAR1":
        return "parquet"
    if not head.strip():
        raise BadInputError(f"{path}: file is empty (empty trace)")
    if b"\x00" in head:
        raise BadInputError(f"{path}: unknown format (binary file that is not Parquet)")
    text = head.decode("utf-8", errors="replace")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if looks_like_dcgm(text):
        return "dcgm"
    if looks_like_dmon(first):
        return "dmon"
    if looks_like_canonical_csv(first):
        return "csv"
    if looks_like_smi(first):
        return "nvidia-smi"
    raise BadInputError(
        f"{path}: unknown format (expected canonical Parquet/CSV, nvidia-smi CSV, "
        "nvidia-smi dmon or DCGM exporter text)"
    )


def read_trace(
    path: str | Path, opts: ImportOptions | None = None, fmt: str | None = None
) -> Trace:
    """Return the canonical Trace of any supported file or folder (format auto-detected).

    Readers repair what real logs need (a truncated last line, units in cells, interleaved
    GPUs) and record each repair in ``Trace.warnings``; anything else is a BadInputError.
    """
    path = Path(path)
    opts = opts or ImportOptions()
    if not path.exists():
        raise BadInputError(f"{path}: no such file or folder")
    fmt = fmt or detect_format(path)
    warnings: list[str] = []
    if fmt == "parquet":
        return read_parquet_trace(path)
    if fmt == "csv":
        return read_canonical_csv(path, opts, warnings)
    if fmt == "nvidia-smi":
        return read_smi(path, opts, warnings)
    if fmt == "dmon":
        return read_dmon(path, opts, warnings)
    if fmt == "dcgm":
        return read_dcgm(path, opts, warnings)
    raise BadInputError(f"{path}: unknown format {fmt!r} (one of {', '.join(FORMATS)})")
