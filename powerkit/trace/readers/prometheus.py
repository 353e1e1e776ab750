"""Read GPU power from a Prometheus server's HTTP API: the one module that speaks it.

What is read: a power metric per GPU — by default the first of DCGM's instantaneous power
(``DCGM_FI_DEV_POWER_USAGE_INSTANT``), DCGM's power usage (``DCGM_FI_DEV_POWER_USAGE``, NVML's
averaged reading on Ampere and newer) or powerkit's own exporter (``powerkit_gpu_power_watts``)
that has series in the range — and, where it exists, the matching energy counter
(``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` in mJ, ``powerkit_gpu_energy_joules_total`` in J).

Two ways to read:

* raw (the default): the samples as scraped, with their own timestamps, through range-vector
  instant queries (``METRIC{...}[D]`` at the end of each chunk, chunks left-open so none is
  read twice);
* ``step``: ``query_range`` evaluated every ``step`` (Prometheus's own resampling: the last
  sample at or before each step, kept only while it is at most two steps or scrape intervals
  old — Prometheus would repeat it for five minutes past the end of a series or across a
  gap). A step finer than the scrape interval is refused: it would repeat samples, not add
  any.

Either way a request covers at most ``MAX_POINTS`` points per series (the server refuses
range queries over 11,000), transient failures (connection errors, timeouts, HTTP 429 and 5xx)
are retried with back-off, and anything else is one line naming the server and the problem.

Labels: ``Hostname`` (else the ``instance``'s host) is the host, ``gpu`` the GPU index,
``UUID`` and ``modelName`` go into the trace's metadata; every other label (``pod``,
``namespace``, ``container``, ``job``, ...) becomes a string column ``label_<name>``, per
sample, so that analyses can group by it (a pod that moves changes the label, and Prometheus
starts a new series: they are merged back into one series per GPU).

Credentials come from the environment or a file, never from the command line:
``POWERKIT_PROMETHEUS_TOKEN`` (a bearer token), ``POWERKIT_PROMETHEUS_BASIC_AUTH``
(``user:password``), or the files named by ``POWERKIT_PROMETHEUS_TOKEN_FILE`` /
``POWERKIT_PROMETHEUS_BASIC_AUTH_FILE`` (or ``--token-file`` / ``--basic-auth-file``).
"""

from __future__ import annotations

import contextlib
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.core.units import format_duration
from powerkit.trace.model import Trace
from powerkit.trace.nameplate import lookup_nameplate_w
from powerkit.trace.options import is_prometheus_url, prometheus_url
from powerkit.trace.readers.promclient import (
    PromClient,
    answer_samples,
    is_labels,
    matrix_results,
    series_gpu,
    series_host,
)
from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical
from powerkit.trace.semantics import usage_semantics
from powerkit.trace.timeparse import iso_utc

T = TypeVar("T")

__all__ = [
    "ENERGY_METRICS",
    "MAX_POINTS",
    "POWER_METRICS",
    "PromQuery",
    "first_power_metric",
    "is_prometheus_url",
    "prometheus_argument",
    "prometheus_url",
    "query_from_arg",
    "read_prometheus",
    "stream_prometheus",
]

#: points per series in one request: under the server's 11,000 for range queries
MAX_POINTS = 10_000
#: power metrics, in the order they are preferred: name -> power semantics
POWER_METRICS = {
    "DCGM_FI_DEV_POWER_USAGE_INSTANT": "instant",
    "DCGM_FI_DEV_POWER_USAGE": "nvml_usage",
    "powerkit_gpu_power_watts": "label",  # the exporter says it in a `semantics` label
}
#: the energy counter that goes with each power metric, and its unit in J
ENERGY_METRICS = {
    "DCGM_FI_DEV_POWER_USAGE_INSTANT": ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3),
    "DCGM_FI_DEV_POWER_USAGE": ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3),
    "powerkit_gpu_power_watts": ("powerkit_gpu_energy_joules_total", 1.0),
}
_CONSUMED = {"__name__", "Hostname", "hostname", "gpu", "UUID", "modelName", "semantics"}


@dataclass
class PromQuery:
    """What to read: the range (epoch s), an optional metric, label matchers and step."""

    start_s: float
    end_s: float
    metric: str | None = None
    match: str = ""  # e.g. Hostname=~"node-1.*"
    step_s: float | None = None

    def selector(self, metric: str) -> str:
        return f"{metric}{{{self.match}}}" if self.match.strip() else metric


def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def _series(client: PromClient, q: PromQuery, metric: str) -> list[dict[str, str]]:
    sel = q.selector(metric)
    data = client.get("series", {"match[]": sel, "start": q.start_s, "end": q.end_s})
    if data is None:
        return []
    if not isinstance(data, list) or not all(is_labels(m) for m in data):
        raise BadInputError(
            f"{client.shown}: the answer to series {sel!r} is not a list of label sets"
        )
    return data


def _interval(client: PromClient, q: PromQuery, metric: str) -> float | None:
    """The scrape interval, from the most samples any series has in one of 100 slices of the
    range (a slice the data fills holds slice / interval samples)."""
    piece = (q.end_s - q.start_s) / 100
    query = f"count_over_time({q.selector(metric)}[{_ms(piece)}])"
    counts = client.get(
        "query_range",
        {
            "query": query,
            "start": q.start_s + piece,
            "end": q.end_s,
            "step": piece,
        },
    )
    most = 0.0
    for r in matrix_results(client, query, counts, "matrix"):
        _, x = answer_samples(client, query, r.get("values", []))
        most = max(most, float(np.nanmax(x)) if x.size else 0.0)
    return piece / most if most >= 2 else None


def recent_scrape_interval(
    client: PromClient, q: PromQuery, metric: str, span_s: float = 60.0
) -> float | None:
    """The scrape interval of ``metric``: the median step between the samples of its series
    over the last ``span_s`` (a range-vector instant query; None: fewer than two samples)."""
    query = f"{q.selector(metric)}[{_ms(span_s)}]"
    answer = client.get("query", {"query": query, "time": time.time()})
    steps = [
        np.diff(answer_samples(client, query, r.get("values", []))[0])
        for r in matrix_results(client, query, answer, "matrix")
    ]
    joined = np.concatenate(steps) if steps else np.empty(0)
    joined = joined[joined > 0]
    return float(np.median(joined)) if joined.size else None


def _chunks(start: float, end: float, length: float) -> list[tuple[float, float]]:
    edges = np.append(np.arange(start, end, length), end)
    return list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))


#: samples one request may bring (all series together): what bounds a chunk's memory
CHUNK_SAMPLES = 50_000


def _windows(q: PromQuery, interval: float | None, series: int) -> list[tuple[float, float]]:
    points = max(100, min(MAX_POINTS, CHUNK_SAMPLES // max(1, series)))
    if q.step_s is not None:
        return _chunks(q.start_s, q.end_s + q.step_s / 2, points * q.step_s)
    return _chunks(q.start_s - 0.001, q.end_s, points * (interval or 1.0))  # (a, b]


def _fetch_window(
    client: PromClient, q: PromQuery, metric: str, interval: float | None, a: float, b: float
) -> list[tuple[dict[str, str], Any]]:
    """The series of ``metric`` in one window: [(labels, values)]."""
    if q.step_s is not None:
        last = min(b - q.step_s / 2, q.end_s)
        # Prometheus repeats a series' last sample for up to 5 min (its lookback): keep a
        # step only when the sample it shows is at most two steps (or scrapes) old.
        fresh = 2 * max(q.step_s, interval or 0.0)
        sel = q.selector(metric)
        expr = f"{sel} and (time() - timestamp({sel}) <= {fresh:.6f})"
        data = client.get("query_range", {"query": expr, "start": a, "end": last, "step": q.step_s})
    else:
        expr = f"{q.selector(metric)}[{_ms(b - a)}]"
        data = client.get("query", {"query": expr, "time": b})
    return [
        (r.get("metric", {}), (expr, r.get("values", [])))
        for r in matrix_results(client, expr, data, "matrix")
    ]


def _frame(
    client: PromClient, series: list[tuple[dict[str, str], Any]], column: str, scale: float
) -> pl.DataFrame:
    """One row per sample: ts (µs), host, gpu, the value column, and the labels."""
    frames = []
    for labels, (asked, values) in series:
        if not values or labels.get("gpu") == "all":  # the exporter's sum over GPUs
            continue
        host = series_host(labels)
        gpu = series_gpu(client, labels, asked)
        t, x = answer_samples(client, asked, values)
        extra = {f"label_{k}": v for k, v in labels.items() if k not in _CONSUMED}
        frames.append(
            pl.DataFrame(
                {
                    "t_us": np.round(t * 1000).astype(np.int64) * 1000,
                    "host": [host] * t.size,
                    "gpu": np.full(t.size, gpu, dtype=np.int16),
                    column: x * scale,
                    **{k: [v] * t.size for k, v in extra.items()},
                }
            )
        )
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed")


@dataclass
class PromRead:
    """A read in progress: what was found, and the counts its warnings report."""

    url: str
    q: PromQuery
    metric: str
    found: list[dict[str, str]]
    interval: float | None
    bad: int = 0
    duplicates: int = 0
    retried: list[str] = field(default_factory=list)
    spacings: list[float] = field(default_factory=list)


def _open(
    url: str,
    q: PromQuery,
    headers: dict[str, str] | None,
    on_retry: Callable[[int, str], None] | None,
    timeout_s: float,
    deadline_s: float | None,
) -> tuple[PromClient, PromRead]:
    if not q.end_s > q.start_s:
        raise BadInputError(f"{option('to')} must be after {option('from')}")
    retried: list[str] = []

    def note_retry(attempt: int, why: str) -> None:
        retried.append(why)
        if on_retry is not None:
            on_retry(attempt, why)

    client = PromClient(
        url, headers or {}, on_retry=note_retry, timeout_s=timeout_s, deadline_s=deadline_s
    )
    where = f"between {iso_utc(q.start_s)} and {iso_utc(q.end_s)}"
    metric, found = first_power_metric(client, q, lambda name: _series(client, q, name), where)
    interval = _interval(client, q, metric)
    if q.step_s is not None and interval is not None and q.step_s < 0.9 * interval:
        raise BadInputError(
            f"{option('step')} {format_duration(q.step_s)} is finer than the scrape interval of "
            f"{metric} (about {format_duration(interval)}): it would repeat samples, not add any"
        )
    read = PromRead(client.shown, q, metric, found, interval)
    read.retried = retried
    return client, read


def _chunk_frames(
    client: PromClient, read: PromRead, on_chunk: Callable[[int, int], None] | None
) -> Iterator[pl.DataFrame]:
    """The samples of the read, a window at a time (power, and energy where there is a
    counter), each frame with ts, host, gpu, power_w[, energy_j] and label columns."""
    q, metric = read.q, read.metric
    energy_metric, scale = ENERGY_METRICS.get(metric, (None, 1.0))
    with_energy = bool(energy_metric) and bool(_series(client, q, energy_metric or ""))
    windows = _windows(q, read.interval, len(read.found))
    for k, (a, b) in enumerate(windows):
        power = _frame(
            client, _fetch_window(client, q, metric, read.interval, a, b), "power_w", 1.0
        )
        if not power.is_empty():
            ok = pl.col("power_w").is_finite() & (pl.col("power_w") >= 0)
            read.bad += power.height - power.filter(ok).height
            power = power.filter(ok)
        if not power.is_empty() and with_energy and energy_metric:
            energy = _frame(
                client,
                _fetch_window(client, q, energy_metric, read.interval, a, b),
                "energy_j",
                scale,
            )
            if not energy.is_empty():
                power = power.join(
                    energy.select("t_us", "host", "gpu", "energy_j").unique(
                        ["t_us", "host", "gpu"], keep="first"
                    ),
                    on=["t_us", "host", "gpu"],
                    how="left",
                )
        if not power.is_empty():
            rows = power.height
            power = power.unique(["t_us", "host", "gpu"], keep="first", maintain_order=True)
            read.duplicates += rows - power.height
            step = pl.col("t_us").diff().over("host", "gpu").median()
            spacing = power.sort("host", "gpu", "t_us").select(step).item()
            if spacing is not None:
                read.spacings.append(float(spacing) / 1e6)
            yield power.with_columns(
                pl.from_epoch("t_us", time_unit="us").dt.replace_time_zone("UTC").alias("ts")
            ).drop("t_us")
        if on_chunk is not None:
            on_chunk(k + 1, len(windows))


def _finish(read: PromRead, keys: list[tuple[str, int]], warnings: list[str]) -> TraceMeta:
    """The trace's metadata once every chunk is read, and the read's warnings."""
    url, q, metric = read.url, read.q, read.metric
    if read.bad:
        warnings.append(f"{url}: {read.bad} sample(s) of {metric} are NaN or negative; left out")
    if read.duplicates:
        warnings.append(
            f"{url}: {read.duplicates} sample(s) at a time their GPU already had (two "
            "series of one GPU, e.g. while a pod label changed); the first kept"
        )
    if read.retried:
        why = ", ".join(sorted(set(read.retried)))
        warnings.append(f"{url}: {len(read.retried)} request(s) retried ({why})")
    interval = read.interval
    if q.step_s is None:  # the nominal interval: the median spacing of the samples read
        interval = float(np.median(read.spacings)) if read.spacings else None
    semantics = POWER_METRICS.get(metric, "unknown")
    found_labels: dict[tuple[str, int], dict[str, str]] = {}
    for m in read.found:
        with contextlib.suppress(ValueError):
            found_labels[(series_host(m), int(m.get("gpu", "0")))] = m
    if semantics == "label":
        labelled = {m.get("semantics") or "unknown" for m in found_labels.values()}
        semantics = labelled.pop() if len(labelled) == 1 else "mixed"
    elif semantics == "nvml_usage":
        models = {m.get("modelName") for m in found_labels.values()} - {None}
        semantics = usage_semantics(models.pop()) if len(models) == 1 else "nvml_usage"
    return TraceMeta(
        source="prometheus",
        power_semantics=semantics,
        interval_s=q.step_s or interval,
        gpus=[
            GpuMeta(
                h,
                g,
                name=found_labels.get((h, g), {}).get("modelName"),
                nameplate_w=lookup_nameplate_w(found_labels.get((h, g), {}).get("modelName")),
                uuid=found_labels.get((h, g), {}).get("UUID"),
            )
            for h, g in keys
        ],
        extra={
            "prometheus": {
                "url": url,
                "metric": metric,
                "match": q.match,
                "start": iso_utc(q.start_s),
                "end": iso_utc(q.end_s),
                "step_s": q.step_s,
                "scrape_interval_s": read.interval,
            }
        },
    )


def read_prometheus(
    url: str,
    q: PromQuery,
    *,
    headers: dict[str, str] | None = None,
    on_chunk: Callable[[int, int], None] | None = None,
    on_retry: Callable[[int, str], None] | None = None,
    warnings: list[str] | None = None,
    timeout_s: float = 60.0,
    deadline_s: float | None = None,
) -> Trace:
    """Return the canonical trace of GPU power on ``url`` over ``q``'s range, in memory (an
    analysis of a server's recent hours; :func:`stream_prometheus` for a long history)."""
    warnings = warnings if warnings is not None else []
    client, read = _open(url, q, headers, on_retry, timeout_s, deadline_s)
    frames = list(_chunk_frames(client, read, on_chunk))
    if not frames:
        where = f"between {iso_utc(q.start_s)} and {iso_utc(q.end_s)}"
        raise BadInputError(f"{read.url}: {q.selector(read.metric)} has no samples {where}")
    frame = pl.concat(frames, how="diagonal_relaxed")
    keys = sorted({(h, int(g)) for h, g in frame.select("host", "gpu").unique().rows()})
    meta = _finish(read, keys, warnings)
    return Trace(
        meta=meta, table_=to_canonical(frame, what=read.url), origin=read.url, warnings=warnings
    )


def stream_prometheus(
    url: str,
    q: PromQuery,
    parts: Path,
    *,
    headers: dict[str, str] | None = None,
    on_chunk: Callable[[int, int], None] | None = None,
    on_retry: Callable[[int, str], None] | None = None,
    timeout_s: float = 60.0,
    deadline_s: float | None = None,
) -> Trace:
    """Read ``q``'s range from ``url`` a window at a time into canonical part files in the
    folder ``parts`` (memory bounded by one window: :data:`CHUNK_SAMPLES`), and return the
    Parquet-backed trace over them (to be written sorted, then the folder removed)."""
    from powerkit.trace.writing import write_trace

    warnings: list[str] = []
    client, read = _open(url, q, headers, on_retry, timeout_s, deadline_s)
    parts.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    keys: set[tuple[str, int]] = set()
    placeholder = TraceMeta(source="prometheus")
    for frame in _chunk_frames(client, read, on_chunk):
        keys |= {(h, int(g)) for h, g in frame.select("host", "gpu").unique().rows()}
        path = parts / f"part-{len(files):06d}.parquet"
        write_trace(to_canonical(frame, what=read.url), placeholder, path, sync=False)
        files.append(path)
    if not files:
        where = f"between {iso_utc(q.start_s)} and {iso_utc(q.end_s)}"
        raise BadInputError(f"{read.url}: {q.selector(read.metric)} has no samples {where}")
    meta = _finish(read, sorted(keys), warnings)
    return Trace(meta=meta, files=tuple(files), origin=read.url, warnings=warnings)


def prometheus_argument(
    url: str, metric: str | None = None, match: str | None = None, step: str | None = None
) -> str:
    """The ``prometheus+http://...`` trace argument for a server URL and query options."""
    base = url.rstrip("/")
    if base.lower().startswith("prometheus+"):
        base = prometheus_url(base)
    PromClient(base)  # refuses what is not an http(s) URL
    params = {k: v for k, v in (("metric", metric), ("match", match), ("step", step)) if v}
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    return f"prometheus+{base}{query}"


def query_from_arg(
    text: str | Path, time_from: str | None, time_to: str | None, now_s: float | None = None
) -> tuple[str, PromQuery]:
    """(server URL, query) of a ``prometheus+http://HOST:PORT[?metric=..&match=..&step=..]``
    trace argument; ``--from``/``--to`` as ISO 8601, epoch s, or ``-DUR`` before now (default:
    the last hour)."""
    from powerkit.core.units import parse_duration
    from powerkit.trace.timeparse import parse_time_bound

    url = prometheus_url(text)
    base, _, query = url.partition("?")
    params = urllib.parse.parse_qs(query, keep_blank_values=False)
    unknown = set(params) - {"metric", "match", "step"}
    if unknown:
        raise BadInputError(
            f"{base}: unknown query parameter(s) {', '.join(sorted(unknown))} (metric, match, step)"
        )
    now_us = round((time.time() if now_s is None else now_s) * 1e6)
    start = parse_time_bound(time_from, now_us, now_us, option("from")) if time_from else None
    end = parse_time_bound(time_to, now_us, now_us, option("to")) if time_to else now_us
    start = end - 3600 * 10**6 if start is None else start
    step = params.get("step", [None])[0]
    return base.rstrip("/"), PromQuery(
        start / 1e6,
        end / 1e6,
        params.get("metric", [None])[0],
        params.get("match", [""])[0],
        None if step is None else parse_duration(step),
    )


def first_power_metric(
    client: PromClient, q: PromQuery, probe: Callable[[str], list[T]], where: str
) -> tuple[str, list[T]]:
    """The power metric to read (the query's, else the first of :data:`POWER_METRICS` whose
    ``probe`` finds series) and what it found; one line naming what was tried otherwise."""
    candidates = [q.metric] if q.metric else list(POWER_METRICS)
    for name in candidates:
        found = probe(name)
        if found:
            return name, found
    tried = ", ".join(q.selector(c) for c in candidates)
    raise BadInputError(f"{client.shown}: no GPU power series match {tried} {where}")
