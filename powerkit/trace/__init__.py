"""Canonical traces: the model and schema, Parquet read (parquet.py) and written (writing.py,
dataset.py), and readers/ for every supported input format."""

from __future__ import annotations

from powerkit.trace.model import Trace
from powerkit.trace.options import ImportOptions
from powerkit.trace.reader import detect_format, read_trace
from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical
from powerkit.trace.writing import write_trace

__all__ = [
    "GpuMeta",
    "ImportOptions",
    "Trace",
    "TraceMeta",
    "detect_format",
    "read_trace",
    "to_canonical",
    "write_trace",
]
