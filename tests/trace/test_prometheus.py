"""Prometheus in and out, against a real Prometheus server (Debian's `prometheus`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from powerkit.core.errors import BadInputError
from powerkit.trace.options import ImportOptions
from powerkit.trace.reader import read_trace
from tests.conftest import Cli
from tests.promserver import backfill, free_port, prometheus, write_openmetrics

REALDATA = Path(__file__).resolve().parents[3] / "shared" / "realdata"
H100 = REALDATA / "smi_8xH100_gpt350m_train_ckpt10_100ms.csv"
RTX = REALDATA / "smi_1xRTX4090_vlm_eval_1s_gaps.csv"


def _powerkit(*args: str | Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("powerkit")
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A Prometheus server holding the 8xH100 log as DCGM power (backfilled with promtool)."""
    if not H100.exists():
        pytest.skip("../shared/realdata is not there")
    work = tmp_path_factory.mktemp("prom-history")
    trace = read_trace(H100, ImportOptions())
    write_openmetrics(trace, work / "h100.om")
    backfill(work / "h100.om", work / "data")
    with prometheus(work, storage=work / "data") as url:
        yield url, work


SPAN = ("--from", "2025-07-26T23:50:00Z", "--to", "2025-07-27T00:10:00Z")


@pytest.mark.parametrize("step", [None, "1s"])
def test_a_backfilled_history_reads_back_as_the_log(
    cli: Cli, history: tuple[str, Path], tmp_path: Path, step: str | None
) -> None:
    url, _ = history
    out = tmp_path / "fleet.parquet"
    extra = ("--step", step) if step else ()
    r = cli("import", "prometheus", "--url", url, *SPAN, *extra, "--out", out)
    assert r.exit_code == 0, r.stderr
    direct = cli.json("info", H100)
    back = cli.json("info", out)
    if step is None:  # raw samples: the very same samples, energy and violations
        assert back["samples"] == direct["samples"] == 43600
        assert back["energy_j"] == pytest.approx(direct["energy_j"], rel=1e-9)
        for a, b in zip(back["series"], direct["series"], strict=True):
            assert (a["start"], a["end"], a["gaps"]) == (b["start"], b["end"], b["gaps"])
        judge = ("--budget", "300W", "--windows", "0.5s,30s,5m")
        w_back = cli.json("windows", out, *judge)["windows"]
        w_direct = cli.json("windows", H100, *judge)["windows"]
        assert [w["violation_rate"] for w in w_back] == [w["violation_rate"] for w in w_direct]
        assert back["metadata"]["prometheus"]["scrape_interval_s"] == pytest.approx(0.1, rel=0.2)
    else:  # Prometheus's 1 s resampling of a 100 ms log: the same mean power within a few
        # per cent (not the same energy: the log's many 1-8 s stalls are gaps at 0.1 s and
        # are integrated across at 1 s)
        assert back["interval_median_s"] == pytest.approx(1.0)
        assert back["mean_power_w"] == pytest.approx(direct["mean_power_w"], rel=0.03)
        assert back["samples"] == pytest.approx(direct["span_s"] * 8, rel=0.1)
    # read directly, without a file in between
    live = cli.json("info", f"prometheus+{url}", *SPAN)
    assert live["samples"] == back["samples"] if step is None else live["samples"] == 43600


def test_prometheus_datasets_and_labels(
    cli: Cli, history: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = history
    fleet = tmp_path / "fleet"
    r = cli(
        "import", "prometheus", "--url", url, *SPAN, "--match", 'job="train"', "--out", f"{fleet}/"
    )
    assert r.exit_code == 0, r.stderr
    files = sorted(p.relative_to(fleet).as_posix() for p in fleet.rglob("*.parquet"))
    host = H100.stem
    assert files == [
        f"host={host}/date=2025-07-26/part-0.parquet",
        f"host={host}/date=2025-07-27/part-0.parquet",
    ]
    whole = cli.json("info", fleet)
    assert whole["samples"] == 43600
    by = cli.json("info", fleet, "--by", "job")["by"]
    assert by["groups"][0]["value"] == "train" and by["groups"][0]["share"] == pytest.approx(1)
    assert by["groups"][0]["energy_j"] == pytest.approx(whole["energy_j"], rel=1e-9)
    late = cli.json("info", fleet, "--from", "2025-07-27T00:00:00Z")
    assert 0 < late["samples"] < 43600  # the 26th's partition is not read at all
    r = cli("info", fleet, "--hosts", "other-node")
    assert r.exit_code == 2 and "no partition of the dataset matches" in r.stderr
    r = cli("info", fleet, "--by", "pod")
    assert r.exit_code == 2 and "no label 'pod' to group by (it has job)" in r.stderr
    r = cli("import", "prometheus", "--url", url, *SPAN, "--out", f"{fleet}/")
    assert r.exit_code == 2 and "already holds a dataset" in r.stderr


def test_bad_prometheus_inputs_are_one_line(
    cli: Cli, history: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = history
    out = tmp_path / "x.parquet"
    cases = [
        (("--url", f"http://127.0.0.1:{free_port()}"), "cannot query Prometheus"),
        (("--url", url, "--match", 'Hostname="nope"'), "no GPU power series match"),
        (("--url", url, "--step", "10ms"), "is finer than the scrape interval"),
        (("--url", url, "--metric", "up{"), "refused (HTTP 400)"),
        (("--url", "ftp://x"), "is not a Prometheus URL"),
    ]
    for args, message in cases:
        r = cli("import", "prometheus", *args, *SPAN, "--out", out)
        assert r.exit_code == 2 and message in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


def test_unauthorized_is_one_line(cli: Cli, tmp_path: Path) -> None:
    """A server answering 401 (as a proxy in front of Prometheus does without credentials)."""
    import http.server
    import threading

    seen: list[str | None] = []

    class Deny(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(401)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Deny)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        token = tmp_path / "token"
        token.write_text("s3cret\n")
        url = f"http://127.0.0.1:{server.server_port}"
        r = cli(
            "import",
            "prometheus",
            "--url",
            url,
            "--token-file",
            token,
            "--out",
            tmp_path / "x.parquet",
        )
        assert r.exit_code == 2 and "authentication failed (HTTP 401)" in r.stderr
        assert seen == ["Bearer s3cret"]
        os.environ["POWERKIT_PROMETHEUS_BASIC_AUTH"] = "ops:pw"
        try:
            r = cli("info", f"prometheus+{url}")
        finally:
            del os.environ["POWERKIT_PROMETHEUS_BASIC_AUTH"]
        assert r.exit_code == 2 and "authentication failed" in r.stderr
        assert seen[-1] == "Basic b3BzOnB3"
    finally:
        server.shutdown()


@pytest.mark.slow
def test_scraping_a_live_recording(cli: Cli, tmp_path: Path) -> None:
    """Prometheus scrapes `record --serve-metrics` every 0.5 s; `import prometheus` reads back
    power and the energy counter: the energy over the scraped span matches the recording's."""
    port = free_port()
    out = tmp_path / "rec.parquet"
    exe = Path(sys.executable).with_name("powerkit")
    with prometheus(tmp_path, targets=[f"127.0.0.1:{port}"], scrape_s=0.5) as url:
        rec = subprocess.Popen(
            [
                str(exe),
                "record",
                "--backend",
                "sim",
                "--realtime",
                "--duration",
                "14s",
                "--interval",
                "0.1s",
                "--serve-metrics",
                f"127.0.0.1:{port}",
                "--windows",
                "1s,5s",
                "--budget",
                "150W",
                "--out",
                str(out),
                "--quiet",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
            text = page.read().decode()
        assert 'powerkit_window_mean_watts{gpu="0",hostname="sim",window="5s"}' in text
        assert "powerkit_window_violations_total" in text
        # the Grafana dashboard asks only for metrics the exporter serves
        dashboard = json.loads(
            (Path(__file__).parents[2] / "docs/grafana/powerkit.json").read_text()
        )
        asked = {
            name
            for panel in dashboard["panels"]
            for t in panel["targets"]
            for name in re.findall(r"powerkit_[a-z_]+", t["expr"])
        }
        served = set(re.findall(r"^(powerkit_[a-z_]+)\{", text, re.M))
        assert asked and asked <= served, asked - served
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
        time.sleep(1.5)  # the last scrapes
        back = tmp_path / "back.parquet"
        r = cli("import", "prometheus", "--url", url, "--from", "-2m", "--out", back)
        assert r.exit_code == 0, r.stderr
        expr = urllib.parse.quote(
            'max_over_time(powerkit_window_mean_watts{window="5s",gpu="0"}[1m])'
        )
        with urllib.request.urlopen(f"{url}/api/v1/query?query={expr}", timeout=5) as page:
            mean_5s = json.loads(page.read())["data"]["result"]
        assert mean_5s and float(mean_5s[0]["value"][1]) > 100  # the 5 s mean, scraped
    got = cli.json("info", back)
    assert got["metadata"]["prometheus"]["metric"] == "powerkit_gpu_power_watts"
    assert got["power_semantics"] == "sim_instant"
    assert got["series"][0]["energy_source"] == "counter"
    assert got["interval_median_s"] == pytest.approx(0.5, rel=0.1)
    # the recording's energy between the first and last scrape, from its own 0.1 s samples
    rec_trace = read_trace(out, ImportOptions())
    t = rec_trace.table()
    ts = t.column("ts").cast("int64").to_numpy() / 1e6
    p = t.column("power_w").to_numpy().astype(float)
    first = got["series"][0]["start"]
    last = got["series"][0]["end"]
    from datetime import datetime

    a, b = (datetime.fromisoformat(x.replace("Z", "+00:00")).timestamp() for x in (first, last))
    inside = (ts >= a) & (ts <= b)
    expected = float(
        ((p[inside][1:] + p[inside][:-1]) / 2 * (ts[inside][1:] - ts[inside][:-1])).sum()
    )
    # within the scrape's resolution: one scrape interval of power at each end
    assert abs(got["energy_j"] - expected) <= 2 * 0.5 * p.max()
    assert got["energy_j"] == pytest.approx(expected, rel=0.1)


def test_transient_errors_are_retried(tmp_path: Path) -> None:
    """503 twice, then an answer: the client retries (and says so) instead of failing."""
    import http.server
    import threading

    from powerkit.trace.readers.promclient import PromClient

    answers = [503, 503, 200]

    class Flaky(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code = answers.pop(0)
            self.send_response(code)
            self.end_headers()
            if code == 200:
                self.wfile.write(b'{"status": "success", "data": {"result": []}}')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    retries: list[str] = []
    try:
        client = PromClient(
            f"http://127.0.0.1:{server.server_port}",
            backoff_s=0.01,
            on_retry=lambda n, why: retries.append(why),
        )
        assert client.get("query", {"query": "up"}) == {"result": []}
        assert retries == ["HTTP 503", "HTTP 503"]
        answers[:] = [503] * 5
        with pytest.raises(
            BadInputError, match=r"HTTP 503 \(gave up after 4 tries, at query .up.\)"
        ):
            client.get("query", {"query": "up"})
    finally:
        server.shutdown()
