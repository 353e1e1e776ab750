"""Serve a running recording to Prometheus (``record --serve-metrics``).

Metrics (``hostname`` and ``gpu`` labels on each; ``gpu="all"`` is the sum over the GPUs):

* ``powerkit_gpu_power_watts`` — the last sample (with a ``semantics`` label: instant, ...);
* ``powerkit_gpu_energy_joules_total`` — energy since the recording started (the energy counter
  where the GPU has one, else the trapezoid of the samples, as ``record`` reports it);
* ``powerkit_window_mean_watts{window="30s"}`` — the mean of the samples in the trailing window
  (the windows analysis's rolling mean on the recording's regular grid), NaN until the first
  window is full;
* ``powerkit_window_violations_total{window="30s"}`` — with a budget: how many window positions
  (one per sample) had a mean over it, the count ``powerkit windows`` gives for the same samples;
* ``powerkit_window_budget_watts`` — the budget, for dashboards to draw.

The HTTP server binds to localhost unless told otherwise. Updates come from the recording loop
(one sample per tick); scrapes read a consistent copy under a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from powerkit.core.errors import BadInputError, option
from powerkit.core.units import format_duration, parse_durations, parse_power
from powerkit.telemetry.base import TelemetrySource

__all__ = [
    "Exporter",
    "parse_listen",
    "start_exporter",
]


def parse_listen(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (``:9464`` and ``9464`` mean localhost) as (host, port)."""
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise BadInputError(
            f"{option('serve-metrics')} {text!r}: give [HOST:]PORT, e.g. :9464"
        ) from None
    if not 0 < number < 65536:
        raise BadInputError(f"{option('serve-metrics')} {text!r}: port must be 1-65535")
    return (host.strip("[]") or "127.0.0.1"), number


@dataclass
class _Window:
    label: str
    size: int  # samples per window
    ring: np.ndarray  # (series, size)
    sums: np.ndarray  # (series,)
    filled: int = 0
    at: int = 0


class Exporter(Collector):
    """Live recording metrics for Prometheus; ``update`` after each sample."""

    def __init__(
        self,
        host: str,
        gpus: list[int],
        interval_s: float,
        windows_s: list[float],
        *,
        semantics: str = "unknown",
        budget_w: list[float] | None = None,
    ) -> None:
        self.host, self.gpus, self.semantics = host, [str(g) for g in gpus], semantics
        self.budget = None if budget_w is None else np.asarray(budget_w, dtype=float)
        series = len(gpus) + 1  # the GPUs and their sum
        self.windows = []
        for w in windows_s:
            size = max(1, round(w / interval_s))
            self.windows.append(
                _Window(format_duration(w), size, np.zeros((series, size)), np.zeros(series))
            )
        self.power = np.full(len(gpus), np.nan)
        self.energy = np.zeros(len(gpus))
        self.violations = np.zeros((len(self.windows), len(gpus)), dtype=np.int64)
        self.samples = 0
        self._lock = threading.Lock()
        self._server: Any = None

    def update(self, ts_epoch: float, reading: dict[str, np.ndarray], energy_j: np.ndarray) -> None:
        """Take one tick's readings (``power_w`` per GPU; NaN: not read this tick, counted as
        0 W in the sum) and the energy so far; the recorder's ``on_sample``."""
        p = np.asarray(reading["power_w"], dtype=float)
        values = np.append(np.nan_to_num(p), np.nan_to_num(p).sum())
        with self._lock:
            self.power = p.copy()
            self.energy = np.asarray(energy_j, dtype=float).copy()
            self.samples += 1
            for k, w in enumerate(self.windows):
                w.sums += values - w.ring[:, w.at]
                w.ring[:, w.at] = values
                w.at = (w.at + 1) % w.size
                w.filled = min(w.filled + 1, w.size)
                if w.filled == w.size and self.budget is not None:
                    self.violations[k] += (w.sums[:-1] / w.size) > self.budget

    def collect(self) -> Iterator[Any]:
        with self._lock:
            labels = ["hostname", "gpu"]
            power = GaugeMetricFamily(
                "powerkit_gpu_power_watts",
                "GPU power, the last sample",
                labels=[*labels, "semantics"],
            )
            energy = CounterMetricFamily(
                "powerkit_gpu_energy_joules",
                "GPU energy since the recording started",
                labels=labels,
            )
            for g, p, e in zip(self.gpus, self.power, self.energy, strict=True):
                if np.isfinite(p):
                    power.add_metric([self.host, g, self.semantics], float(p))
                energy.add_metric([self.host, g], float(e))
            energy.add_metric([self.host, "all"], float(self.energy.sum()))
            means = GaugeMetricFamily(
                "powerkit_window_mean_watts",
                "Mean power over the trailing window",
                labels=[*labels, "window"],
            )
            counts = CounterMetricFamily(
                "powerkit_window_violations",
                "Window positions whose mean exceeded the budget",
                labels=[*labels, "window"],
            )
            for k, w in enumerate(self.windows):
                full = w.filled == w.size
                for i, g in enumerate([*self.gpus, "all"]):
                    mean = float(w.sums[i] / w.size) if full else float("nan")
                    means.add_metric([self.host, g, w.label], mean)
                    if self.budget is not None and g != "all":
                        counts.add_metric([self.host, g, w.label], float(self.violations[k, i]))
            samples = CounterMetricFamily("powerkit_record_samples", "Ticks recorded")
            samples.add_metric([], float(self.samples))
            yield from (power, energy, means, samples)
            if self.budget is not None:
                yield counts
                budget = GaugeMetricFamily(
                    "powerkit_window_budget_watts", "The per-GPU power budget", labels=labels
                )
                for g, b in zip(self.gpus, self.budget, strict=True):
                    budget.add_metric([self.host, g], float(b))
                yield budget

    def serve(self, host: str, port: int) -> None:
        """Start the HTTP server (a daemon thread)."""
        registry = CollectorRegistry()
        registry.register(self)
        try:
            self._server = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise BadInputError(
                f"{option('serve-metrics')} {host}:{port}: cannot listen ({exc.strerror or exc})"
            ) from None

    def close(self) -> None:
        """Stop the HTTP server."""
        if self._server is not None:
            server = self._server[0] if isinstance(self._server, tuple) else self._server
            server.shutdown()
            server.server_close()
            self._server = None


def start_exporter(
    source: TelemetrySource,
    listen: str,
    interval_s: float,
    windows: str,
    budget: str | None,
    virtual: bool,
) -> tuple[Exporter, str]:
    """Start the metrics endpoint of ``record --serve-metrics`` on ``listen`` (HOST:PORT):
    the exporter, and the address it serves."""
    if virtual:
        raise BadInputError(
            f"{option('serve-metrics')} needs a wall-clock recording (sim: add "
            f"{option('realtime')})"
        )
    host, port = parse_listen(listen)
    devices = source.devices()
    budgets = None
    if budget is not None:
        spec = parse_power(budget)
        budgets = [spec.resolve(d.nameplate_w) for d in devices]
    exporter = Exporter(
        source.host,
        [d.index for d in devices],
        interval_s,
        parse_durations(windows),
        semantics=source.power_semantics,
        budget_w=budgets,
    )
    exporter.serve(host, port)
    return exporter, f"http://{host}:{port}/metrics"
