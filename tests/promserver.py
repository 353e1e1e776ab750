"""A real Prometheus server for tests: started on a free localhost port, stopped afterwards.

The binary is Debian's ``prometheus`` (``.ci/run`` installs it in CI); without it, tests that
need it skip (and fail in CI, where it must be there).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from powerkit.trace.model import Trace


def binary(name: str = "prometheus") -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is missing in CI; .ci/run installs it")
        pytest.skip(f"{name} is not installed (Debian package prometheus)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def prometheus(
    workdir: Path,
    *,
    targets: list[str] | None = None,
    scrape_s: float = 1.0,
    storage: Path | None = None,
) -> Iterator[str]:
    """Run Prometheus (scraping ``targets`` every ``scrape_s``, or serving ``storage``) and
    yield its URL."""
    exe = binary()
    port = free_port()
    config = workdir / "prometheus.yml"
    jobs = ""
    every = f"{round(scrape_s * 1000)}ms"
    if targets:
        listed = ", ".join(f"'{t}'" for t in targets)
        jobs = (
            f"scrape_configs:\n  - job_name: powerkit\n    scrape_interval: {every}\n"
            f"    scrape_timeout: {every}\n    static_configs:\n"
            f"      - targets: [{listed}]\n"
        )
    config.write_text(f"global:\n  scrape_interval: {every}\n{jobs}")
    data = storage or workdir / "prom-data"
    log = (workdir / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            exe,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=100y",
            "--web.enable-admin-api",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "prometheus did not start: " + (workdir / "prometheus.log").read_text()[-2000:]
                )
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def write_openmetrics(
    trace: Trace, path: Path, metric: str = "DCGM_FI_DEV_POWER_USAGE", model: str | None = None
) -> int:
    """Write a trace's power as OpenMetrics (one series per GPU, DCGM-style labels); return the
    samples written."""
    table = trace.table()
    host = table.column("host").to_numpy(zero_copy_only=False)
    gpu = table.column("gpu").to_numpy()
    ts = table.column("ts").cast("int64").to_numpy()  # µs
    power = table.column("power_w").to_numpy()
    lines = [f"# TYPE {metric} gauge"]
    for h, g in sorted(set(zip(host.tolist(), gpu.tolist(), strict=True))):
        sel = (host == h) & (gpu == g)
        name = f',modelName="{model}"' if model else ""
        labels = f'{{Hostname="{h}",gpu="{g}"{name},job="train"}}'
        watts = power[sel].astype(float).tolist()
        lines += [
            f"{metric}{labels} {p!r} {t / 1e6:.3f}"
            for t, p in zip(ts[sel].tolist(), watts, strict=True)
        ]
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")
    return int(np.count_nonzero(np.ones(ts.size)))


def backfill(openmetrics: Path, storage: Path) -> None:
    """Load an OpenMetrics file into TSDB blocks with promtool."""
    exe = binary("promtool")
    storage.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [exe, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(storage)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def query(url: str, expr: str) -> object:
    with urllib.request.urlopen(f"{url}/api/v1/query?query={expr}", timeout=10) as r:
        return json.loads(r.read())["data"]
