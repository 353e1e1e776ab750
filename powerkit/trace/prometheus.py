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

import base64
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from powerkit.errors import BadInputError
from powerkit.trace.model import Trace
from powerkit.trace.nameplate import lookup_nameplate_w
from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical
from powerkit.trace.semantics import usage_semantics
from powerkit.trace.timeparse import iso_utc
from powerkit.units import format_duration

__all__ = [
    "ENERGY_METRICS",
    "MAX_POINTS",
    "POWER_METRICS",
    "PromClient",
    "PromQuery",
    "credentials",
    "is_prometheus_url",
    "prometheus_argument",
    "prometheus_url",
    "query_from_arg",
    "read_prometheus",
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
_SCHEME = re.compile(r"^prometheus\+(https?):/+", re.IGNORECASE)
_RETRY_CODES = {429, 500, 502, 503, 504}


def is_prometheus_url(text: str | Path) -> bool:
    """True for a trace argument such as ``prometheus+http://prom:9090``."""
    return bool(_SCHEME.match(str(text)))


def prometheus_url(text: str | Path) -> str:
    """The server's base URL of a ``prometheus+http(s)://HOST[:PORT][/PATH]`` argument (a
    ``Path`` may have folded its ``//``)."""
    return _SCHEME.sub(lambda m: f"{m.group(1).lower()}://", str(text)).rstrip("/")


def _read_secret(path: str, what: str) -> str:
    try:
        return Path(path).expanduser().read_text().strip()
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read the {what} ({exc.strerror})") from None


def credentials(
    token_file: str | None = None, basic_auth_file: str | None = None
) -> dict[str, str]:
    """The Authorization header from the files given, else from the environment (see the
    module docstring); empty when none is set."""
    env = os.environ
    token_file = token_file or env.get("POWERKIT_PROMETHEUS_TOKEN_FILE")
    basic_file = basic_auth_file or env.get("POWERKIT_PROMETHEUS_BASIC_AUTH_FILE")
    token = _read_secret(token_file, "bearer token") if token_file else None
    token = token or env.get("POWERKIT_PROMETHEUS_TOKEN")
    basic = _read_secret(basic_file, "user:password") if basic_file else None
    basic = basic or env.get("POWERKIT_PROMETHEUS_BASIC_AUTH")
    if token:
        return {"Authorization": f"Bearer {token}"}
    if basic:
        if ":" not in basic:
            raise BadInputError("basic auth for Prometheus must be user:password")
        return {"Authorization": "Basic " + base64.b64encode(basic.encode()).decode()}
    return {}


@dataclass
class PromClient:
    """GET requests to one Prometheus server's ``/api/v1``, with retries."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 60.0
    retries: int = 3
    backoff_s: float = 0.5
    #: called before each retry with (attempt, why): the caller may show it
    on_retry: Callable[[int, str], None] | None = None

    def __post_init__(self) -> None:
        parsed = urllib.parse.urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BadInputError(
                f"{self.url!r} is not a Prometheus URL (e.g. http://prometheus:9090)"
            )

    def get(self, endpoint: str, params: dict[str, Any]) -> Any:
        """The ``data`` of a successful API answer; BadInputError otherwise."""
        query = urllib.parse.urlencode(params, doseq=True)
        request = urllib.request.Request(
            f"{self.url}/api/v1/{endpoint}?{query}", headers=self.headers
        )
        why = ""
        for attempt in range(self.retries + 1):
            if attempt:
                if self.on_retry is not None:
                    self.on_retry(attempt, why)
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                    body = json.loads(answer.read())
                break
            except urllib.error.HTTPError as exc:
                if exc.code in (401, 403):
                    raise BadInputError(
                        f"{self.url}: authentication failed (HTTP {exc.code}); set "
                        "POWERKIT_PROMETHEUS_TOKEN or POWERKIT_PROMETHEUS_BASIC_AUTH (or a "
                        "--token-file / --basic-auth-file)"
                    ) from None
                if exc.code not in _RETRY_CODES:
                    raise BadInputError(
                        f"{self.url}: {endpoint} refused (HTTP {exc.code}): {_server_error(exc)}"
                    ) from None
                why = f"HTTP {exc.code}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                why = str(reason) or type(reason).__name__
            except ValueError:
                raise BadInputError(
                    f"{self.url}: the answer is not JSON (not Prometheus?)"
                ) from None
        else:
            raise BadInputError(
                f"cannot query Prometheus at {self.url}: {why} (gave up after "
                f"{self.retries + 1} tries)"
            )
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise BadInputError(f"{self.url}: {endpoint} failed: {error or body!r}")
        return body.get("data")


def _server_error(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("error"))
    except (ValueError, AttributeError, OSError):
        return exc.reason or "no reason given"


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
    return list(
        client.get(
            "series", {"match[]": q.selector(metric), "start": q.start_s, "end": q.end_s}
        ) or []
    )  # fmt: skip


def _interval(client: PromClient, q: PromQuery, metric: str) -> float | None:
    """The scrape interval, from the most samples any series has in one of 100 slices of the
    range (a slice the data fills holds slice / interval samples)."""
    piece = (q.end_s - q.start_s) / 100
    counts = client.get("query_range", {
        "query": f"count_over_time({q.selector(metric)}[{_ms(piece)}])",
        "start": q.start_s + piece, "end": q.end_s, "step": piece,
    })  # fmt: skip
    most = max(
        (float(v[1]) for r in counts.get("result", []) for v in r.get("values", [])), default=0.0
    )
    return piece / most if most >= 2 else None


def _chunks(start: float, end: float, length: float) -> list[tuple[float, float]]:
    edges = np.append(np.arange(start, end, length), end)
    return list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))


def _fetch(client: PromClient, q: PromQuery, metric: str, interval: float | None,
           on_chunk: Callable[[int, int], None] | None) -> list[dict[str, Any]]:  # fmt: skip
    """Every series of ``metric`` over the range: [{"metric": labels, "values": [[t, v]...]}]."""
    merged: dict[tuple[tuple[str, str], ...], list[Any]] = {}
    labels_of: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    if q.step_s is not None:
        windows = _chunks(q.start_s, q.end_s + q.step_s / 2, MAX_POINTS * q.step_s)
    else:
        per_chunk = MAX_POINTS * (interval or 1.0)
        windows = _chunks(q.start_s - 0.001, q.end_s, per_chunk)  # (a, b]: start included
    for k, (a, b) in enumerate(windows):
        if q.step_s is not None:
            last = min(b - q.step_s / 2, q.end_s)
            # Prometheus repeats a series' last sample for up to 5 min (its lookback): keep a
            # step only when the sample it shows is at most two steps (or scrapes) old.
            fresh = 2 * max(q.step_s, interval or 0.0)
            sel = q.selector(metric)
            expr = f"{sel} and (time() - timestamp({sel}) <= {fresh:.6f})"
            data = client.get("query_range", {"query": expr, "start": a, "end": last,
                                              "step": q.step_s})  # fmt: skip
        else:
            data = client.get("query", {"query": f"{q.selector(metric)}[{_ms(b - a)}]",
                                        "time": b})  # fmt: skip
        for r in data.get("result", []):
            key = tuple(sorted(r["metric"].items()))
            labels_of[key] = r["metric"]
            merged.setdefault(key, []).extend(r.get("values", []))
        if on_chunk is not None:
            on_chunk(k + 1, len(windows))
    return [{"metric": labels_of[k], "values": v} for k, v in merged.items()]


def _frame(series: list[dict[str, Any]], column: str, scale: float, url: str) -> pl.DataFrame:
    """One row per sample: ts (µs), host, gpu, the value column, and the labels."""
    frames = []
    for s in series:
        labels = s["metric"]
        values = s["values"]
        if not values or labels.get("gpu") == "all":  # the exporter's sum over GPUs
            continue
        host = _host(labels)
        try:
            gpu = int(labels.get("gpu", "0"))
        except ValueError:
            raise BadInputError(f"{url}: a series has gpu={labels.get('gpu')!r}") from None
        # [[t, "value"], ...]: the times are numbers, the values text
        t = np.fromiter((v[0] for v in values), np.float64, len(values))
        x = np.array([v[1] for v in values], dtype=np.float64) * scale
        extra = {f"label_{k}": v for k, v in labels.items() if k not in _CONSUMED}
        frames.append(pl.DataFrame({
            "t_us": np.round(t * 1000).astype(np.int64) * 1000,
            "host": [host] * t.size,
            "gpu": np.full(t.size, gpu, dtype=np.int16),
            column: x,
            **{k: [v] * t.size for k, v in extra.items()},
        }))  # fmt: skip
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed")


def read_prometheus(
    url: str,
    q: PromQuery,
    *,
    headers: dict[str, str] | None = None,
    on_chunk: Callable[[int, int], None] | None = None,
    on_retry: Callable[[int, str], None] | None = None,
    warnings: list[str] | None = None,
) -> Trace:
    """Return the canonical trace of GPU power on ``url`` over ``q``'s range."""
    warnings = warnings if warnings is not None else []
    if not q.end_s > q.start_s:
        raise BadInputError("--to must be after --from")
    retried: list[str] = []

    def note_retry(attempt: int, why: str) -> None:
        retried.append(why)
        if on_retry is not None:
            on_retry(attempt, why)

    client = PromClient(url, headers or {}, on_retry=note_retry)
    candidates = [q.metric] if q.metric else list(POWER_METRICS)
    metric, found = None, []
    for name in candidates:
        found = _series(client, q, name)
        if found:
            metric = name
            break
    where = f"between {iso_utc(q.start_s)} and {iso_utc(q.end_s)}"
    if metric is None:
        tried = ", ".join(q.selector(c) for c in candidates)
        raise BadInputError(f"{url}: no GPU power series match {tried} {where}")
    interval = _interval(client, q, metric)
    if q.step_s is not None and interval is not None and q.step_s < 0.9 * interval:
        raise BadInputError(
            f"--step {format_duration(q.step_s)} is finer than the scrape interval of "
            f"{metric} (about {format_duration(interval)}): it would repeat samples, not add any"
        )
    power = _frame(_fetch(client, q, metric, interval, on_chunk), "power_w", 1.0, url)
    if power.is_empty():
        raise BadInputError(f"{url}: {q.selector(metric)} has no samples {where}")
    bad = power.filter(~pl.col("power_w").is_finite() | (pl.col("power_w") < 0)).height
    if bad:
        warnings.append(f"{url}: {bad} sample(s) of {metric} are NaN or negative; left out")
        power = power.filter(pl.col("power_w").is_finite() & (pl.col("power_w") >= 0))
    energy_metric, scale = ENERGY_METRICS.get(metric, (None, 1.0))
    if energy_metric and _series(client, q, energy_metric):
        energy = _frame(_fetch(client, q, energy_metric, interval, None), "energy_j", scale, url)
        if not energy.is_empty():
            power = power.join(
                energy.select("t_us", "host", "gpu", "energy_j").unique(
                    ["t_us", "host", "gpu"], keep="first"
                ),
                on=["t_us", "host", "gpu"], how="left",
            )  # fmt: skip
    rows = power.height
    power = power.unique(["t_us", "host", "gpu"], keep="first", maintain_order=True)
    if power.height < rows:
        warnings.append(
            f"{url}: {rows - power.height} sample(s) at a time their GPU already had (two "
            "series of one GPU, e.g. while a pod label changed); the first kept"
        )
    if q.step_s is None:  # the nominal interval: the median spacing of the samples read
        spacing = (
            power.sort("host", "gpu", "t_us")
            .select(pl.col("t_us").diff().over("host", "gpu").median())
            .item()
        )
        interval = None if spacing is None else float(spacing) / 1e6
    frame = power.with_columns(pl.from_epoch("t_us", time_unit="us").dt.replace_time_zone("UTC")
                               .alias("ts")).drop("t_us")  # fmt: skip
    semantics = POWER_METRICS.get(metric, "unknown")
    found_labels = {(_host(m), int(m.get("gpu", "0"))): m for m in found}
    if semantics == "label":
        labelled = {m.get("semantics") or "unknown" for m in found_labels.values()}
        semantics = labelled.pop() if len(labelled) == 1 else "mixed"
    elif semantics == "nvml_usage":
        models = {m.get("modelName") for m in found_labels.values()} - {None}
        semantics = usage_semantics(models.pop()) if len(models) == 1 else "nvml_usage"
    if retried:
        warnings.append(
            f"{url}: {len(retried)} request(s) retried ({', '.join(sorted(set(retried)))})"
        )
    series_keys = sorted({(h, int(g)) for h, g in frame.select("host", "gpu").unique().rows()})
    meta = TraceMeta(
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
            for h, g in series_keys
        ],
        extra={
            "prometheus": {
                "url": url,
                "metric": metric,
                "match": q.match,
                "start": iso_utc(q.start_s),
                "end": iso_utc(q.end_s),
                "step_s": q.step_s,
                "scrape_interval_s": interval,
            }
        },
    )
    return Trace(meta=meta, table_=to_canonical(frame, what=url), origin=url, warnings=warnings)


def prometheus_argument(url: str, metric: str | None = None, match: str | None = None,
                        step: str | None = None) -> str:  # fmt: skip
    """The ``prometheus+http://...`` trace argument for a server URL and query options."""
    base = url.rstrip("/")
    if base.lower().startswith("prometheus+"):
        base = prometheus_url(base)
    PromClient(base)  # refuses what is not an http(s) URL
    params = {k: v for k, v in (("metric", metric), ("match", match), ("step", step)) if v}
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    return f"prometheus+{base}{query}"


def query_from_arg(text: str | Path, time_from: str | None, time_to: str | None,
                   now_s: float | None = None) -> tuple[str, PromQuery]:  # fmt: skip
    """(server URL, query) of a ``prometheus+http://HOST:PORT[?metric=..&match=..&step=..]``
    trace argument; ``--from``/``--to`` as ISO 8601, epoch s, or ``-DUR`` before now (default:
    the last hour)."""
    from powerkit.trace.timeparse import parse_time_bound
    from powerkit.units import parse_duration

    url = prometheus_url(text)
    base, _, query = url.partition("?")
    params = urllib.parse.parse_qs(query, keep_blank_values=False)
    unknown = set(params) - {"metric", "match", "step"}
    if unknown:
        raise BadInputError(f"{base}: unknown query parameter(s) {', '.join(sorted(unknown))} "
                            "(metric, match, step)")  # fmt: skip
    now_us = round((time.time() if now_s is None else now_s) * 1e6)
    start = parse_time_bound(time_from, now_us, now_us, "--from") if time_from else None
    end = parse_time_bound(time_to, now_us, now_us, "--to") if time_to else now_us
    start = end - 3600 * 10**6 if start is None else start
    step = params.get("step", [None])[0]
    return base.rstrip("/"), PromQuery(
        start / 1e6, end / 1e6, params.get("metric", [None])[0],
        params.get("match", [""])[0], None if step is None else parse_duration(step),
    )  # fmt: skip


def _host(labels: dict[str, str]) -> str:
    host = labels.get("Hostname") or labels.get("hostname")
    return host or (labels.get("instance") or "prometheus").rsplit(":", 1)[0]
