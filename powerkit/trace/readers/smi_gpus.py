"""Which GPU each row of an nvidia-smi log belongs to: by its index, UUID or bus id column,
or, where the log has none, by its place in a sampling frame."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.trace.frames import INFER_ROWS, assign_gpus
from powerkit.trace.options import ImportOptions

if TYPE_CHECKING:
    pass


IDENTITY_FIELDS = ("index", "gpu", "uuid", "pci.bus_id", "gpu_uuid", "gpu_bus_id")
#: the parsed frame's column holding the ``index`` field as a number (read once, with the rest)
INDEX_COLUMN = "_index"


def device_ids(field: str, ident: pl.Series) -> tuple[np.ndarray, list[int]]:
    """Device numbers from one identity column: an index as it is; a UUID or bus id numbered
    in order of first appearance."""
    if field in ("index", "gpu"):
        idx = ident.cast(pl.Int16, strict=False)
        if idx.null_count() == 0:
            return idx.to_numpy(), sorted(idx.unique().to_list())
    order = {v: i for i, v in enumerate(ident.unique(maintain_order=True).to_list())}
    mapped = ident.replace_strict(order, return_dtype=pl.Int16)
    return mapped.to_numpy(), list(range(len(order)))


def frame_repeats(gpu: np.ndarray, ts: np.ndarray) -> int:
    """Rows whose (device, time) an earlier row already has."""
    if gpu.size < 2:
        return 0
    step = np.diff(ts)
    if step.min() >= 0 and not np.any((step == 0) & (np.diff(gpu) <= 0)):
        return 0  # in time order, each frame's devices rising (as nvidia-smi writes): none
    span = int(ts.max() - ts.min())
    if span < 2**46:  # one int64 key per row: a sort, not a lexicographic unique
        keys = np.sort((ts.astype(np.int64) - ts.min()) * 65_536 + gpu.astype(np.int64))
        return int(np.count_nonzero(keys[1:] == keys[:-1]))
    pairs = np.stack([gpu.astype(np.int64), ts.astype(np.int64)], axis=1)
    return int(gpu.size - np.unique(pairs, axis=0).shape[0])


def gpu_uuids(col: dict[str, pl.Series], keep: pl.Series, gpu: np.ndarray) -> dict[int, str]:
    """Each GPU's UUID, where the log has a uuid field (the first one seen per GPU)."""
    raw = col.get("uuid", col.get("gpu_uuid"))
    if raw is None:
        return {}
    kept = raw.filter(keep).str.strip_chars()
    out: dict[int, str] = {}
    for g, u in zip(gpu.tolist(), kept.to_list(), strict=False):
        if u and int(g) not in out:
            out[int(g)] = u
    return out


def gpu_index(
    frame: pl.DataFrame,
    col: dict[str, pl.Series],
    keep: pl.Series,
    opts: ImportOptions,
    path: Path,
    warnings: list[str],
) -> tuple[np.ndarray, list[int]]:
    ts = frame["ts"].dt.epoch("us").to_numpy()
    found: list[tuple[str, np.ndarray, list[int], int]] = []
    for field in IDENTITY_FIELDS:
        if field == "index" and INDEX_COLUMN in frame.columns:  # parsed already
            gpu, ids = device_ids(field, frame[INDEX_COLUMN])
            found.append((field, gpu, ids, frame_repeats(gpu, ts)))
        elif field in col:
            gpu, ids = device_ids(field, col[field].filter(keep).str.strip_chars())
            found.append((field, gpu, ids, frame_repeats(gpu, ts)))
    if found:
        # the device column is the one that tells a frame's rows apart: a column called
        # `index` that holds 0 on every row (the device is in `gpu`) is not it
        field, gpu, ids, repeats = min(found, key=lambda f: f[3])
        if repeats:
            others = ", ".join(f for f, *_ in found if f != field)
            raise BadInputError(
                f"{path}: {repeats} row(s) repeat a time their GPU already has in column "
                f"{field!r}{f' (and in {others})' if others else ''}: rows of one GPU at one "
                "time are never merged; if another column holds the device, name it with "
                f"{option('map')} ts=COL,gpu=COL,power_w=COL"
            )
        if len(found) > 1 and found[0][0] != field:
            warnings.append(
                f"{path}: GPUs told apart by column {field!r} (column "
                f"{found[0][0]!r} does not vary within a frame)"
            )
        return gpu, ids
    head = frame["ts"].head(INFER_ROWS).dt.epoch("us").to_numpy() / 1e6
    gpu, layout = assign_gpus(head, frame.height, opts.gpus_per_frame, what=str(path))
    n = layout.gpus_per_frame
    if n > 1:
        warnings.append(frames_note(path, n, opts))
    return gpu, list(range(n))


def frames_note(path: Path, gpus: int, opts: ImportOptions) -> str:
    how = "given" if opts.gpus_per_frame else "inferred from the frame structure"
    return f"{path}: no GPU index column; {gpus} GPUs per frame ({how})"
