"""nvidia-smi logs too large to hold at once: read a block of lines at a time into a
recording's parts (``import`` streams them), each block parsed as
``powerkit.trace.readers.smi`` parses a whole log."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError
from powerkit.trace.frames import INFER_ROWS, FrameLayout, assign_gpus, frame_positions
from powerkit.trace.options import ImportOptions
from powerkit.trace.readers.outliers import FarOutside
from powerkit.trace.readers.textlog import (
    BadRow,
    byte_count,
    field_count_problems,
    fields_all_whole,
    line_blocks,
    resolve_bad_rows,
)
from powerkit.trace.schema import (
    TraceMeta,
    median_interval,
    to_canonical,
)
from powerkit.trace.timeparse import assume_zone, localize_to_utc

if TYPE_CHECKING:
    from powerkit.trace.writing import SeriesParts
from powerkit.trace.readers.smi import (
    _meta,
    _na_note,
    _parse,
    _Parser,
    _parser,
    _position_notes,
)
from powerkit.trace.readers.smi_gpus import (
    IDENTITY_FIELDS,
    INDEX_COLUMN,
    device_ids,
    frame_repeats,
    frames_note,
)
from powerkit.trace.readers.smi_layout import Layout, layout_of

#: a log is read in blocks of about this many bytes when it is streamed (``powerkit import``)
STREAM_BLOCK = 1 << 23


@dataclass(frozen=True)
class StreamedLog:
    """What :func:`stream_smi` read, its samples being in the parts: the log's metadata and
    the rows dropped."""

    meta: TraceMeta
    bad_rows: list[BadRow]


def stream_smi(
    path: Path, opts: ImportOptions, store: SeriesParts, warnings: list[str]
) -> StreamedLog | None:
    """Read an nvidia-smi log a block of :data:`STREAM_BLOCK` bytes at a time into ``store``
    (its part files, one per GPU, closed on return) — the trace :func:`read_smi` returns, in
    memory bounded by a block, whatever the log's length; ``warnings`` collects the repairs.

    Every check is :func:`read_smi`'s: the same block parse, bad rows named by their lines,
    the frame layout from the first rows with positions counted across blocks, the time
    checks over the whole log (:class:`powerkit.trace.readers.textlog.FarOutside`, fed block by
    block). Returns None for a log it does not stream — one whose device is not in an
    ``index`` column or its row position (uuid, bus id), one not in time order, or one read
    with ``--from``/``--to``/``--hosts`` — for :func:`read_smi` to read whole (the parts are
    then the caller's to throw away).
    """
    lay = layout_of(path, opts)
    identity = [f for f in IDENTITY_FIELDS if f in lay.names]
    if identity not in ([], ["index"]) or opts.time_from or opts.time_to or opts.hosts:
        return None
    try:
        return _stream(path, opts, lay, bool(identity), store, warnings)
    finally:
        store.close()


def _stream(
    path: Path,
    opts: ImportOptions,
    lay: Layout,
    indexed: bool,
    store: SeriesParts,
    warnings: list[str],
) -> StreamedLog | None:
    """:func:`stream_smi`'s block loop and its checks over the whole log."""
    names, first_data_line = lay.names, lay.first_data_line
    width = len(names)
    rows: list[BadRow] = []
    # the samples far outside the run, found as the blocks pass (the log is in time order);
    # a data line holds at least a comma and a newline, so the file's size bounds the rows
    far = FarOutside(path.stat().st_size // 2 + 1)
    last: dict[int, int] = {}  # each GPU's last time so far (a repeat across blocks)
    parser: _Parser | None = None
    layout: FrameLayout | None = None  # positional: GPUs per frame, first offset
    ids: set[int] = set()
    kept_before, na_power, name = 0, 0, opts.gpu_name
    host = opts.host or path.stem
    zone, zone_notes = "", list[str]()
    latest = np.iinfo(np.int64).min
    pending: list[tuple[pl.DataFrame, np.ndarray, np.ndarray, pl.Series | None]] = []
    waiting = 0
    nonblank, last_filled = 0, (0, width)  # non-blank lines; the last one's (number, fields)
    read_idx = sorted({*lay.keep_idx, width - 1})  # (the last field tells of short lines)
    header_commas = lay.first_line.count(",")

    def emit(
        frame: pl.DataFrame,
        at: np.ndarray,
        t_us: np.ndarray,
        index: pl.Series | None,
        layout: FrameLayout | None,
    ) -> bool:
        """Number one block's kept rows' GPUs, check them and append them to the parts; False
        where a repeat needs the whole-file reader's message."""
        nonlocal kept_before
        if index is not None:
            gpu, found_ids = device_ids("index", index)
            ids.update(found_ids)
        else:
            assert layout is not None
            ids.update(range(layout.gpus_per_frame))
            gpu = frame_positions(layout, kept_before, frame.height)
        kept_before += frame.height
        present = np.unique(gpu).tolist()
        repeats = frame_repeats(gpu, t_us) + sum(
            int(t_us[np.argmax(gpu == g)] == last.get(g)) for g in present
        )
        if repeats:
            return False
        for g in present:
            last[g] = int(t_us[np.flatnonzero(gpu == g)[-1]])
        far.add(t_us, gpu.astype(np.int16), at)
        frame = frame.with_columns(
            pl.Series("gpu", gpu, dtype=pl.Int16), pl.lit(host).alias("host")
        )
        assert parser is not None
        if not parser.zoned:
            frame = frame.with_columns(localize_to_utc(frame["ts"], zone, what=str(path)))
            if frame["ts"].null_count():
                i = int(frame["ts"].is_null().arg_max() or 0)
                raise BadInputError(
                    f"{path}: line {int(at[i])}: time does not exist in zone {zone}"
                )
        # appended GPU by GPU, block after block, the parts are the trace in (gpu, ts) order
        # (the log is in time order), written without a sort
        store.append(to_canonical(frame, what=str(path)))
        return True

    def flush() -> bool:
        """Emit the pending blocks (the frame layout found first where the log needs one)."""
        nonlocal layout, waiting
        if layout is None and not indexed:
            layout = _positions(pending, opts, path)
        done = all(emit(*item, layout) for item in pending)
        pending.clear()
        waiting = 0
        return done

    for blk in line_blocks(path, width, STREAM_BLOCK):
        start = max(blk.first, first_data_line - 1)  # the block's first data line (0-based)
        skip = start - blk.first  # the header, in the first block
        df = _read_block(path, blk.data, skip, read_idx, width) if blk.lines > skip else None
        commas = byte_count(blk.data, 44) - (header_commas if skip else 0)
        if df is not None and fields_all_whole(commas, df.height, width, df[f"c{width - 1}"]):
            ragged = np.zeros(df.height, dtype=bool)  # (read_smi says why no count is needed)
            nonblank += blk.lines
            last_filled = (blk.first + blk.lines, width)
        else:
            counts, blank = blk.shapes()
            filled = np.flatnonzero(~blank)
            if filled.size:
                nonblank += filled.size
                last_filled = (blk.first + int(filled[-1]) + 1, int(counts[filled[-1]]))
            ragged, bad = field_count_problems((counts, blank), width, first=skip)
            rows += [(n + blk.first, problem) for n, problem in bad]
        if df is None:
            continue
        if df.height != blk.lines - skip:
            return None  # lines polars splits otherwise: the whole-file reader says why
        if parser is None:
            parser = _parser(path, lay, df, opts, warnings)
            # (its warning, if any, is said where the whole-file reader says it)
            zone = "UTC" if parser.zoned else assume_zone(opts.tz, path, zone_notes)
        block = _parse(path, lay, parser, df, ragged, start + 1, opts)
        rows += block.rows
        na_power += block.na_power
        if name is None and "name" in block.col:
            found = block.col["name"].drop_nulls()
            name = found[0].strip() if found.len() else None
        frame = block.parsed.filter(block.keep)
        if frame.height == 0:
            continue
        at = (np.flatnonzero(block.keep.to_numpy()) + start + 1).astype(np.int64)
        t_us = frame["ts"].dt.epoch("us").to_numpy()
        if t_us[0] < latest or (t_us.size > 1 and np.diff(t_us).min() < 0):
            return None  # not in time order: the time checks need the whole log sorted
        latest = int(t_us[-1])
        index = frame[INDEX_COLUMN] if indexed else None  # (parsed with the block)
        pending.append((frame, at, t_us, index))
        waiting += frame.height
        if layout is None and not indexed and waiting < INFER_ROWS:
            continue  # the frame layout shows in the first INFER_ROWS rows, over blocks
        if not flush():
            return None
    if pending and not flush():
        return None
    if parser is None:
        raise BadInputError(f"{path}: no samples (empty trace)")
    if na_power:
        warnings.append(_na_note(path, na_power))
    if not store.rows:
        resolve_bad_rows(path, rows, last_line=0, skip=opts.skip_bad_rows, warnings=warnings)
        raise BadInputError(f"{path}: no samples with a power reading")
    store.close()
    if not indexed and len(ids) > 1:
        warnings.append(frames_note(path, len(ids), opts))
    outside = far.problems()
    rows += [(line, problem) for line, problem, _, _ in outside]
    # (short_last_line over the whole file: the last non-blank line, if it is short)
    last_line = last_filled[0] if nonblank >= 2 and last_filled[1] < width else 0
    dropped = resolve_bad_rows(
        path, rows, last_line=last_line, skip=opts.skip_bad_rows, warnings=warnings
    )
    if not indexed and len(ids) > 1:
        warnings += _position_notes(path, dropped, last_line)
    warnings += zone_notes
    gone = {n for n, _ in dropped}
    late = [(gpu, t) for line, _, gpu, t in outside if line in gone]  # kept, then found bad
    if late:  # (the parts hold UTC times: the bad rows' are put in UTC to find them)
        naive = pl.Series([t for _, t in late]).cast(pl.Datetime("us"))
        ts = (
            naive.dt.replace_time_zone("UTC")
            if parser.zoned
            else localize_to_utc(naive, zone, what=str(path))
        )
        store.drop(set(zip([g for g, _ in late], ts.dt.epoch("us").to_list(), strict=True)))
    interval = opts.interval_s or median_interval(store.head(1_000_000, ["ts", "gpu"]))
    meta = _meta(path, lay, opts, name, parser.zoned, zone, host, sorted(ids), {}, interval)
    return StreamedLog(meta, dropped)


def _positions(
    pending: list[tuple[pl.DataFrame, np.ndarray, np.ndarray, pl.Series | None]],
    opts: ImportOptions,
    path: Path,
) -> FrameLayout:
    """The frame layout of a log without a device column, from the times of its first
    INFER_ROWS kept rows (frames.assign_gpus, as the whole-file reader infers it)."""
    head = np.concatenate([t for _, _, t, _ in pending])[:INFER_ROWS] / 1e6
    _, frames = assign_gpus(head, head.size, opts.gpus_per_frame, what=str(path))
    return frames


def _read_block(
    path: Path, data: bytes, skip: int, keep_idx: list[int], width: int
) -> pl.DataFrame | None:
    """One block of a log's lines as string columns ``c<index>`` (None: no line in it).

    Polars takes a block's width from its first line, which may be a short or blank one: a
    header naming ``width`` columns is put first, so that every block is read as wide as the
    log's header, as the whole file is."""
    if not data:
        return None
    header = ",".join(f"c{i}" for i in range(width)).encode() + b"\n"
    for encoding in ("utf8", "utf8-lossy"):
        try:
            return pl.read_csv(
                io.BytesIO(header + data),
                has_header=True,
                skip_rows_after_header=skip,
                columns=[f"c{i}" for i in keep_idx],
                encoding=encoding,
                infer_schema=False,
                truncate_ragged_lines=True,
                quote_char=None,
            )
        except pl.exceptions.NoDataError:
            return None
        except pl.exceptions.ComputeError as exc:
            if "utf-8" in str(exc).lower() and encoding == "utf8":
                continue
            raise BadInputError(f"{path}: cannot parse as CSV ({exc})") from None
        except (pl.exceptions.PolarsError, IndexError) as exc:
            raise BadInputError(f"{path}: cannot parse as CSV ({exc})") from None
    raise AssertionError("unreachable")
