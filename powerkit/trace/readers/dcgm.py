"""Read DCGM exporter scrapes: Prometheus exposition with ``DCGM_FI_DEV_POWER_USAGE{...}``
lines (or powerkit's own ``powerkit_gpu_power_watts``), in the text format or OpenMetrics,
parsed by ``prometheus_client``'s parsers.

A log is one or more scrapes appended to a file (OpenMetrics: each ends with ``# EOF``; its
sample timestamps are in seconds, the text format's in milliseconds). A scrape's time comes
from, in order: the optional timestamp after the value; a marker line before the scrape
(``# TIMESTAMP <epoch s or ISO 8601>``, or a bare line holding only such a time, as written by
``date +%s.%N`` in a scrape loop); otherwise scrapes are spaced ``--interval`` apart from
``--start``, a new scrape beginning whenever a (metric, host, gpu) repeats.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from powerkit.core.errors import BadInputError, option
from powerkit.trace.model import Trace
from powerkit.trace.nameplate import lookup_nameplate_w
from powerkit.trace.options import ImportOptions
from powerkit.trace.readers.textlog import nonblank_lines, resolve_bad_rows
from powerkit.trace.schema import GpuMeta, TraceMeta, is_bit_field, to_canonical
from powerkit.trace.semantics import usage_semantics
from powerkit.trace.timeparse import parse_start

__all__ = ["looks_like_dcgm", "read_dcgm"]

# DCGM field -> (canonical column, divisor to the canonical unit)
_METRICS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_POWER_USAGE_INSTANT": ("power_instant_w", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", 1000.0),  # mJ -> J
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("memcpy_util", 1.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", 1.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", 1.0),
    # the limit the driver enforces after every limiter (field 164): wins over the
    # management limit (the one requested) where a scrape has both
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", 1.0),
    # the clocks-event (throttle) reasons bit field (field 112; its name before DCGM 3.3)
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("clock_event_reasons", 1.0),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("clock_event_reasons", 1.0),
    "powerkit_gpu_power_watts": ("power_instant_w", 1.0),
    "powerkit_gpu_energy_joules_total": ("energy_j", 1.0),
}
_PREFIXES = ("DCGM_FI_", "powerkit_gpu_")
_ENFORCED = "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"
_MARKER = re.compile(r"^#\s*(?:TIMESTAMP|ts)\s*[:=]?\s*(?P<t>\S+)\s*$", re.IGNORECASE)


def looks_like_dcgm(head: str) -> bool:
    """Return True when the text holds DCGM exporter (or powerkit exporter) metric lines."""
    return "DCGM_FI_" in head or "powerkit_gpu_power_watts" in head


_Sample = tuple[int, str, dict[str, str], float, float | None]  # line, name, labels, value, ts s


def _text_sample(lineno: int, line: str) -> _Sample:
    """One text-format sample line (ValueError when it is not one)."""
    from prometheus_client.parser import text_string_to_metric_families as text_families

    family = next(iter(text_families(line + "\n")))
    sample = family.samples[0]
    ts = None if sample.timestamp is None else float(sample.timestamp)
    return lineno, sample.name, dict(sample.labels), float(sample.value), ts


def _openmetrics_samples(block: list[tuple[int, str]]) -> Iterator[_Sample]:
    """The samples of one OpenMetrics exposition (lines up to and with ``# EOF``); the line
    of each is the sample lines' in order (families are contiguous in OpenMetrics)."""
    lines = [n for n, text in block if not text.startswith("#")]
    text = "\n".join(t for _, t in block) + "\n"
    k = 0
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            ts = None if sample.timestamp is None else float(sample.timestamp)
            yield (
                lines[min(k, len(lines) - 1)],
                sample.name,
                dict(sample.labels),
                float(sample.value),
                ts,
            )
            k += 1


def _marker_time(text: str) -> datetime | None:
    try:
        return datetime.fromtimestamp(float(text), tz=UTC)
    except ValueError:
        pass
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _events(lines: list[tuple[int, str]], bad: list[tuple[int, str]]) -> Iterator[tuple[Any, ...]]:
    """("marker", time or None, new exposition?) and ("sample", _Sample) in file order; bad
    lines (or a whole OpenMetrics exposition the parser refuses) go to ``bad``."""
    if any(text == "# EOF" for _, text in lines):  # OpenMetrics: one exposition per # EOF
        block: list[tuple[int, str]] = []
        for lineno, text in lines:
            block.append((lineno, text))
            if text != "# EOF":
                continue
            yield ("marker", None, True)
            try:
                found = list(_openmetrics_samples(block))
            except ValueError as exc:
                bad.append((block[0][0], f"not an OpenMetrics exposition ({exc})"))
                found = []
            yield from (("sample", sample) for sample in found)
            block = []
        if any(not text.startswith("#") for _, text in block):
            bad.append((block[0][0], "an OpenMetrics exposition without # EOF"))
        return
    for lineno, stripped in lines:
        m = _MARKER.match(stripped)
        bare = None if stripped.startswith("#") else _marker_time(stripped)
        if m or bare:
            marker = _marker_time(m.group("t")) if m else bare
            if marker is None:
                bad.append((lineno, f"unparsable time marker {stripped!r}"))
            yield ("marker", marker, False)
            continue
        if stripped.startswith("#") or not stripped.startswith(_PREFIXES):
            continue
        try:
            yield ("sample", _text_sample(lineno, stripped))
        except (ValueError, StopIteration, IndexError):
            bad.append((lineno, "not a Prometheus sample line"))


def read_dcgm(path: Path, opts: ImportOptions, warnings: list[str]) -> Trace:
    """Return a Trace from a DCGM exporter scrape log."""
    interval = opts.interval_s or 1.0
    start = parse_start(opts.start)
    marker: datetime | None = None
    scrape = 0
    seen: set[tuple[str, str, int, str]] = set()
    mig: dict[tuple[str, int], dict[str, str]] = {}  # (host, gpu) -> MIG instance -> profile
    samples: dict[tuple[datetime, str, int], dict[str, float]] = {}
    enforced: set[tuple[datetime, str, int]] = set()  # samples with an enforced limit
    names: dict[tuple[str, int], str] = {}
    implicit = False
    bad: list[tuple[int, str]] = []
    lines, line_count = nonblank_lines(path)
    for event in _events(lines, bad):
        if event[0] == "marker":  # a time marker, or a new OpenMetrics exposition
            marker = event[1]
            if event[2]:
                scrape += 1
            seen.clear()
            continue
        lineno, metric, labels, value, ts = event[1]
        if metric not in _METRICS:
            continue
        try:
            gpu = int(labels.get("gpu", "0"))
        except ValueError:
            bad.append((lineno, f"unparsable gpu label {labels.get('gpu')!r}"))
            continue
        if labels.get("gpu") == "all":
            continue
        host = opts.host or labels.get("Hostname") or labels.get("hostname") or path.stem
        # A MIG instance's line repeats its GPU's device-level fields (power, energy, limit):
        # power stays per physical GPU; the instances are listed in the metadata.
        instance = labels.get("GPU_I_ID")
        if instance not in (None, ""):
            mig.setdefault((host, gpu), {})[instance] = labels.get("GPU_I_PROFILE", "")
        key = (metric, host, gpu, instance or "")
        if ts is not None:
            when = datetime.fromtimestamp(ts, tz=UTC)
        else:
            if key in seen and marker is None:
                scrape += 1
                seen.clear()
            seen.add(key)
            if marker is not None:
                when = marker
            else:
                implicit = True
                when = start + timedelta(seconds=scrape * interval)
        column, divisor = _METRICS[metric]
        if column in ("power_w", "power_instant_w") and (value < 0 or value != value):
            raise BadInputError(f"{path}: line {lineno}: invalid power {value}")
        if column == "clock_event_reasons" and not is_bit_field(value):
            bad.append((lineno, f"{metric} {value:g} is not a bit field (a whole number from 0)"))
            continue
        slot = samples.setdefault((when, host, gpu), {})
        if metric == _ENFORCED:
            enforced.add((when, host, gpu))
        elif column == "power_limit_w" and (when, host, gpu) in enforced:
            continue  # the enforced limit of this sample came first: it stands
        slot[column] = value / divisor
        if "modelName" in labels:
            names[(host, gpu)] = labels["modelName"]
    resolve_bad_rows(path, bad, last_line=line_count, skip=opts.skip_bad_rows, warnings=warnings)
    records = [
        {"ts": when, "host": host, "gpu": gpu, **values}
        for (when, host, gpu), values in samples.items()
        if "power_w" in values or "power_instant_w" in values
    ]
    if not records:
        raise BadInputError(f"{path}: no DCGM_FI_DEV_POWER_USAGE samples (empty trace)")
    if implicit:
        warnings.append(
            f"{path}: scrapes carry no timestamps; spaced {interval:g} s apart from "
            f"{start.isoformat()} (set {option('start')}, {option('interval')})"
        )
    frame = pl.DataFrame(records, infer_schema_length=None)
    only_instant = "power_w" not in frame.columns
    if only_instant:
        frame = frame.with_columns(pl.col("power_instant_w").alias("power_w"))
    frame = frame.with_columns(
        pl.col("power_w").fill_null(pl.col("power_instant_w"))
        if "power_instant_w" in frame.columns
        else pl.col("power_w")
    )
    frame = frame.filter(pl.col("power_w").is_not_null())
    series = sorted({(h, g) for h, g in zip(frame["host"], frame["gpu"], strict=True)})
    meta = TraceMeta(
        source="dcgm",
        power_semantics="instant"
        if only_instant
        else usage_semantics(opts.gpu_name or next(iter(names.values()), None)),
        interval_s=opts.interval_s,
        tz="UTC",
        gpus=[
            GpuMeta(
                host=h,
                gpu=g,
                name=opts.gpu_name or names.get((h, g)),
                nameplate_w=opts.nameplate_w
                or lookup_nameplate_w(opts.gpu_name or names.get((h, g))),
            )
            for h, g in series
        ],
        extra={"imported_from": str(path)},
    )
    if mig:  # powerkit.telemetry.nvml writes the same shape when it records
        meta.extra["mig_instances"] = [
            {"host": h, "gpu": g, "instances": [{"id": i, "profile": p} for i, p in found.items()]}
            for (h, g), found in sorted(mig.items())
        ]
    return Trace(
        meta=meta, table_=to_canonical(frame, what=str(path)), origin=str(path), warnings=warnings
    )
