"""Recover GPU indices for logs that interleave several GPUs without an index column.

nvidia-smi ``--query-gpu`` prints one row per GPU per sampling frame, always in the same
device order, a few ms apart, while frames are a sampling interval apart. The row position
within a frame is therefore the GPU index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerkit.core.errors import BadInputError, option

__all__ = ["INFER_ROWS", "FrameLayout", "assign_gpus", "frame_positions", "infer_frame_layout"]

_MAX_GPUS = 64
INFER_ROWS = 200_000  # the layout shows within the first rows; the rest follows by position
# The frame-boundary steps must be this many times longer, on average, than the others.
_MIN_CONTRAST = 5.0


@dataclass(frozen=True)
class FrameLayout:
    """How rows group into frames: GPUs per frame, which row residue starts a frame."""

    gpus_per_frame: int
    first_offset: int
    contrast: float


def _residue_means(d: np.ndarray, n: int) -> np.ndarray:
    """Mean of the steps ``d[i]`` (row i to row i + 1) by the residue (i + 1) mod n of the row
    they lead to: the steps in rows of n, summed down the columns."""
    whole = d.size // n * n
    sums = np.zeros(n)
    counts = np.zeros(n)
    if whole:
        sums += d[:whole].reshape(-1, n).sum(axis=0)
        counts += whole // n
    sums[: d.size - whole] += d[whole:]
    counts[: d.size - whole] += 1
    # column j holds the steps into rows of residue (j + 1) mod n
    return np.roll(sums / np.maximum(counts, 1), 1)


def infer_frame_layout(t: np.ndarray) -> FrameLayout:
    """Return the frame layout found in sample times ``t`` (seconds, file order).

    For each candidate count n, rows are split into n residue classes by position; with the
    right n, one class holds every frame boundary and its mean time step stands far above
    the others. The n with the strongest contrast wins if it is at least 5x; otherwise the
    log holds one GPU per frame.
    """
    if t.size < 8:
        return FrameLayout(1, 0, 1.0)
    d = np.diff(t[:INFER_ROWS])
    if np.any(d < 0):
        return FrameLayout(1, 0, 1.0)  # out-of-order rows carry no frame structure
    d = np.minimum(d, np.quantile(d, 0.99))  # stalls must not dominate the means
    best = FrameLayout(1, 0, 1.0)
    for n in range(2, min(_MAX_GPUS, t.size // 4) + 1):
        means = _residue_means(d, n)
        k = int(np.argmax(means))
        others = float(np.delete(means, k).mean())
        contrast = float(means[k] / others) if others > 0 else float("inf")
        if contrast > best.contrast:
            best = FrameLayout(n, k, contrast)
    return best if best.contrast >= _MIN_CONTRAST else FrameLayout(1, 0, best.contrast)


def assign_gpus(
    t: np.ndarray, rows: int, gpus_per_frame: int | None, *, what: str
) -> tuple[np.ndarray, FrameLayout]:
    """Return the GPU index of each of ``rows`` rows and the layout used.

    ``t`` holds the times (s) of the first rows (INFER_ROWS are plenty). With
    ``gpus_per_frame`` given, frames are aligned on the residue whose time steps are largest
    (the logger may have started mid-frame); otherwise the count is inferred too.
    """
    if gpus_per_frame is not None and gpus_per_frame < 1:
        raise BadInputError(f"{what}: {option('gpus-per-frame')} must be at least 1")
    if gpus_per_frame == 1:
        return np.zeros(rows, dtype=np.int16), FrameLayout(1, 0, 1.0)
    if gpus_per_frame is None:
        layout = infer_frame_layout(t)
    else:
        d = np.diff(t)
        means = (
            _residue_means(np.minimum(d, np.quantile(d, 0.99)), gpus_per_frame)
            if d.size
            else np.zeros(1)
        )
        layout = FrameLayout(gpus_per_frame, int(np.argmax(means)), 1.0)
    return frame_positions(layout, 0, rows), layout


def frame_positions(layout: FrameLayout, start: int, rows: int) -> np.ndarray:
    """The GPU of rows ``start`` … ``start + rows - 1`` of a log laid out as ``layout``: row
    i is GPU (i - first_offset) mod n, one frame's pattern repeated."""
    n = layout.gpus_per_frame
    pattern = ((start + np.arange(n) - layout.first_offset) % n).astype(np.int16)
    return np.tile(pattern, -(-rows // n))[:rows]
