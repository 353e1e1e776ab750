"""The checks every log's times get: samples out of order within their series, and samples
far outside the run (a corrupted time that would make a gap of hours out of one bad line)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from powerkit.trace.readers.textlog import BadRow

__all__ = ["FarOutside", "time_problems"]

# A sample separated from the rest of the run by a gap this many nominal intervals (and at
# least _FAR_MIN_S) is outside the run when it sits in a small cluster (see time_problems).
_FAR_INTERVALS = 100
_FAR_MIN_S = 60.0
_FAR_SHARE = 0.001
_HEAD_ROWS = 200_000


def time_problems(t_us: np.ndarray, series: np.ndarray, lines: np.ndarray) -> list[BadRow]:
    """Return bad rows for samples whose time cannot be right, in file order.

    ``t_us`` are the rows' times, ``series`` an integer code of each row's series (host, GPU)
    and ``lines`` their line numbers, all in file order. Two kinds are found:

    * **out of order within a series**: a sample whose neighbours in its series are in order
      with each other but not with it (one corrupted time), and, after those, any sample
      earlier than a sample before it in the same series;
    * **far outside the run**: samples in a small cluster (at most 3 samples or 0.1 % of the
      file) that a gap of more than 100 nominal intervals, and at least 60 s, separates from
      the rest of the samples.

    Integrating across such samples would make a gap of minutes or hours out of one bad line.
    """
    if t_us.size < 2:
        return []
    bad = np.zeros(t_us.size, dtype=bool)
    problems: dict[int, str] = {}
    steps = np.diff(t_us)
    if steps.min() >= 0:
        # The file is in time order as a whole (nvidia-smi logs are), so is every series: only
        # samples far outside the run remain possible, and no sort is needed to find them.
        scan = FarOutside(t_us.size)
        scan.add(t_us, series, lines)
        return sorted((line, p) for line, p, _, _ in scan.problems())
    if np.all(series[1:] >= series[:-1]):  # each series' rows together, in order (no sort)
        order, t, s = np.arange(series.size), t_us, series
    else:
        order = np.argsort(series, kind="stable")  # rows of each series, in file order
        t = t_us[order]
        s = series[order]
    if np.all(np.diff(t)[s[1:] == s[:-1]] >= 0):
        # Every series in time order: only samples far outside the run remain possible.
        by_time = np.argsort(t_us, kind="stable")
        scan = FarOutside(by_time.size, head=(t_us[:_HEAD_ROWS], series[:_HEAD_ROWS]))
        scan.add(t_us[by_time], series[by_time], by_time)
        return sorted((int(lines[i]), p) for i, p, _, _ in scan.problems())
    same_prev = np.r_[False, s[1:] == s[:-1]]
    same_next = np.r_[s[1:] == s[:-1], False]
    prev = np.r_[t[:1], t[:-1]]
    nxt = np.r_[t[1:], t[-1:]]
    both = same_prev & same_next
    isolated = both & (prev <= nxt) & ((t < prev) | (t > nxt))
    # A series' first or last sample out of order with the two next to it.
    prev2 = np.r_[t[:2], t[:-2]]
    nxt2 = np.r_[t[2:], t[-2:]]
    same_next2 = np.r_[s[2:] == s[:-2], False, False]
    same_prev2 = np.r_[False, False, s[2:] == s[:-2]]
    isolated |= ~same_prev & same_next2 & (t > nxt) & (nxt <= nxt2)
    isolated |= ~same_next & same_prev2 & (t < prev) & (prev2 <= prev)
    flagged = isolated.copy()
    for i in np.flatnonzero(isolated):
        problems[int(order[i])] = "time out of order within its series (one sample off)"
    # Whatever disorder remains: a sample earlier than the latest kept one before it.
    kept = np.flatnonzero(~isolated)
    tk, sk = t[kept], s[kept]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    running = np.empty_like(tk)
    for a, b in zip(starts, np.r_[starts[1:], tk.size], strict=True):
        running[a:b] = np.maximum.accumulate(tk[a:b])
    before = np.r_[np.iinfo(np.int64).min, running[:-1]]
    before[starts] = np.iinfo(np.int64).min
    late = tk < before
    for i in kept[np.flatnonzero(late)]:
        problems[int(order[i])] = "time earlier than a sample before it in its series"
    flagged[kept[late]] = True
    bad[order[flagged]] = True
    rows = np.flatnonzero(~bad)
    by_time = rows[np.argsort(t_us[rows], kind="stable")]
    scan = FarOutside(by_time.size, head=(t_us[:_HEAD_ROWS], series[:_HEAD_ROWS]))
    scan.add(t_us[by_time], series[by_time], by_time)
    problems.update((int(i), p) for i, p, _, _ in scan.problems())
    return sorted((int(lines[i]), p) for i, p in problems.items())


@dataclass
class _Segment:
    """A run of samples (in time order) with no step over _FAR_MIN_S: its size, its first and
    last times, and — while it is small enough to lie outside the run — its rows."""

    size: int
    first_us: int
    last_us: int
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None  # (times, series, ids)


class FarOutside:
    """Finds the samples far outside the run (see :func:`time_problems`) in samples fed in time
    order, a block at a time.

    Memory holds the first _HEAD_ROWS samples' times and series (the nominal interval, which
    sets the gap that cuts the run), a few numbers for each stretch between such gaps (before
    the nominal interval is known: between steps over _FAR_MIN_S, the least such a gap can
    be), and the rows of the stretches small enough to be outside the run (at most 3 samples
    or 0.1 % of ``max_rows``, an upper bound of the samples there will be) — never every
    sample's time.
    """

    def __init__(self, max_rows: int, head: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self._cap = max(3, int(_FAR_SHARE * max_rows))
        self._head_parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._head_rows = 0
        self._segments: list[_Segment] = []
        self._far_us: float | None = None  # the gap that cuts the run, once the head is read
        self.rows = 0
        if head is not None:
            self._head_parts, self._head_rows = [head], _HEAD_ROWS
            self._far_us = self._far_from_head()

    def add(self, t_us: np.ndarray, series: np.ndarray, ids: np.ndarray) -> None:
        """Feed the next samples: their times (in order, after every time fed before), series
        codes and ids (what :meth:`problems` names them by: line numbers, row numbers)."""
        if t_us.size == 0:
            return
        if self._head_rows < _HEAD_ROWS:
            take = _HEAD_ROWS - self._head_rows
            self._head_parts.append((t_us[:take], series[:take]))
            self._head_rows += min(take, t_us.size)
        self.rows += t_us.size
        cut = _FAR_MIN_S * 1e6 if self._far_us is None else self._far_us
        bounds = np.r_[0, np.flatnonzero(np.diff(t_us) > cut) + 1, t_us.size]
        segs = self._segments
        if segs and t_us[0] - segs[-1].last_us <= cut:
            self._extend(segs[-1], t_us, series, ids, 0, int(bounds[1]))
            bounds = bounds[1:]
        for lo, hi in itertools.pairwise(bounds.tolist()):
            segs.append(_Segment(0, int(t_us[lo]), int(t_us[lo]), []))
            self._extend(segs[-1], t_us, series, ids, lo, hi)
        if self._far_us is None and self._head_rows >= _HEAD_ROWS:
            self._far_us = self._far_from_head()
            self._join()

    def _extend(
        self, seg: _Segment, t_us: np.ndarray, series: np.ndarray, ids: np.ndarray, lo: int, hi: int
    ) -> None:
        seg.size += hi - lo
        seg.last_us = int(t_us[hi - 1])
        if seg.rows is not None and seg.size <= self._cap:
            seg.rows.append((t_us[lo:hi].copy(), series[lo:hi].copy(), ids[lo:hi].copy()))
        else:
            seg.rows = None  # too large to lie outside the run

    def _far_from_head(self) -> float:
        # The nominal interval only scales the threshold: the first rows tell it well enough.
        t = np.concatenate([t for t, _ in self._head_parts])[:_HEAD_ROWS]
        s = np.concatenate([s for _, s in self._head_parts])[:_HEAD_ROWS]
        self._head_parts = []
        steps = _series_steps(t, s)
        nominal = float(np.median(steps)) if steps.size else 0.0
        return max(_FAR_MIN_S * 1e6, _FAR_INTERVALS * nominal)

    def _join(self) -> None:
        """Join the stretches no gap over the cut separates (the cut being known now)."""
        assert self._far_us is not None
        joined: list[_Segment] = []
        for seg in self._segments:
            prev = joined[-1] if joined else None
            if prev is None or seg.first_us - prev.last_us > self._far_us:
                joined.append(seg)
                continue
            prev.size += seg.size
            prev.last_us = seg.last_us
            keep = prev.rows is not None and seg.rows is not None and prev.size <= self._cap
            prev.rows = prev.rows + seg.rows if keep else None  # type: ignore[operator]
        self._segments = joined

    def problems(self) -> list[tuple[int, str, int, int]]:
        """(id, problem, series, time) of each sample far outside the run, in time order."""
        if self._far_us is None:  # (fewer samples than the head holds)
            self._far_us = self._far_from_head() if self._head_parts else _FAR_MIN_S * 1e6
            self._join()
        clusters = self._segments  # (joined: one a cluster)
        if len(clusters) < 2:
            return []
        sizes = [c.size for c in clusters]
        small = max(3, int(_FAR_SHARE * self.rows))
        main = int(np.argmax(sizes))
        lo, hi = clusters[main].first_us, clusters[main].last_us
        found: list[tuple[int, str, int, int]] = []
        for c, cluster in enumerate(clusters):
            if c == main or sizes[c] > small:
                continue
            assert cluster.rows is not None  # (small <= the cap: its rows were kept)
            for t, s, i in cluster.rows:
                for tt, ss, ii in zip(t.tolist(), s.tolist(), i.tolist(), strict=True):
                    off = (lo - tt) if tt < lo else (tt - hi)
                    found.append(
                        (ii, f"time lies {off / 1e6:,.0f} s outside the rest of the run", ss, tt)
                    )
        return found


def _series_steps(t_us: np.ndarray, series: np.ndarray) -> np.ndarray:
    """Return the positive time steps between consecutive samples of each series."""
    order = np.lexsort((t_us, series))
    t, s = t_us[order], series[order]
    step = np.diff(t)
    return step[(s[1:] == s[:-1]) & (step > 0)]
