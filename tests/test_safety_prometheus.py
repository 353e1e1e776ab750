"""The Prometheus client under hostile servers: redirects, trickles, malformed answers.

Each server here is a tiny HTTP server on a free localhost port, started and stopped by the
test; nothing reaches beyond this machine.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import Cli

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


@contextmanager
def serve(handle: Handler) -> Iterator[str]:
    """Run a one-handler HTTP server on 127.0.0.1 and yield its URL."""

    class One(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            handle(self)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), One)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def answer(req: http.server.BaseHTTPRequestHandler, body: bytes, code: int = 200) -> None:
    req.send_response(code)
    req.send_header("Content-Type", "application/json")
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


SERIES = {
    "status": "success",
    "data": [{"__name__": "DCGM_FI_DEV_POWER_USAGE", "gpu": "0", "Hostname": "n1"}],
}


def api(matrix: object, series: object = SERIES) -> Handler:
    """A server answering /series with ``series`` and every query with ``matrix`` (a body
    as bytes, or a JSON value)."""

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        body = series if "/api/v1/series" in req.path else matrix
        answer(req, body if isinstance(body, bytes) else json.dumps(body).encode())

    return handle


SPAN = ("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T00:10:00Z")


def one_line(r: object) -> str:
    err = r.stderr.strip()  # type: ignore[attr-defined]
    assert len(err.splitlines()) == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    return err


def test_a_redirect_to_another_server_never_gets_the_token(cli: Cli, tmp_path: Path) -> None:
    seen: list[str | None] = []

    def elsewhere(req: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(req.headers.get("Authorization"))
        answer(req, json.dumps(SERIES).encode())

    with serve(elsewhere) as other:

        def redirect(req: http.server.BaseHTTPRequestHandler) -> None:
            req.send_response(302)
            req.send_header("Location", other + req.path)
            req.end_headers()

        with serve(redirect) as url:
            token = tmp_path / "token"
            token.write_text("s3cret\n")
            r = cli(
                "import",
                "prometheus",
                "--url",
                url,
                "--token-file",
                token,
                *SPAN,
                "--out",
                tmp_path / "x.parquet",
            )
    assert r.exit_code == 2
    assert "redirected (HTTP 302)" in one_line(r) and "not followed" in r.stderr
    assert seen == []  # the other server was never even asked
    assert "s3cret" not in r.stderr and not (tmp_path / "x.parquet").exists()


def test_a_password_in_the_url_is_refused_and_never_echoed(cli: Cli, tmp_path: Path) -> None:
    for args in (
        ("import", "prometheus", "--url", "http://ops:hunter2@127.0.0.1:1", "--out", "x.parquet"),
        ("info", "prometheus+http://ops:hunter2@127.0.0.1:1"),
    ):
        r = cli(*args)
        assert r.exit_code == 2 and "hunter2" not in r.stderr + r.stdout
        assert "credentials in the URL are not used" in one_line(r)


def test_a_trickling_server_is_cut_off(cli: Cli, tmp_path: Path) -> None:
    stop = threading.Event()

    def trickle(req: http.server.BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Length", "1000000")
        req.end_headers()
        while not stop.is_set():
            try:
                req.wfile.write(b" ")
                req.wfile.flush()
            except OSError:
                return
            time.sleep(0.2)

    with serve(trickle) as url:
        began = time.monotonic()
        r = cli(
            "import",
            "prometheus",
            "--url",
            url,
            *SPAN,
            "--timeout",
            "1s",
            "--deadline",
            "3s",
            "--out",
            tmp_path / "x.parquet",
        )
        took = time.monotonic() - began
        stop.set()
    assert r.exit_code == 2 and "--deadline of 3s" in one_line(r)
    assert took < 8, took


MATRIX_OK = {"resultType": "matrix", "result": []}


@pytest.mark.parametrize(
    ("series", "matrix", "message"),
    [
        (b'{"status":"success","data":[{"gpu":', MATRIX_OK, "is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, MATRIX_OK, "nested too deeply"),
        ({"status": "success", "data": {"gpu": "0"}}, MATRIX_OK, "not a list of label sets"),
        ({"status": "success", "data": [{"gpu": 0}]}, MATRIX_OK, "not a list of label sets"),
        ({"status": "error", "error": "bad"}, MATRIX_OK, "failed: bad"),
        ({"status": "success"}, MATRIX_OK, "no GPU power series"),
        (SERIES, {"status": "success", "data": [1, 2]}, "no data object"),
        (
            SERIES,
            {"status": "success", "data": {"resultType": "vector", "result": []}},
            "a 'vector' result",
        ),
        (SERIES, {"status": "success", "data": {"result": {"a": 1}}}, "result is not a list"),
        (
            SERIES,
            {"status": "success", "data": {"result": [{"values": []}, 7]}},
            "without a label set",
        ),
        (
            SERIES,
            {"status": "success", "data": {"result": [{"metric": {}, "values": 5}]}},
            "values are not a list",
        ),
        (
            SERIES,
            {
                "status": "success",
                "data": {"result": [{"metric": {"gpu": "0"}, "values": [[1767225600, 3]]}]},
            },
            "not a decimal string",
        ),
        (
            SERIES,
            {
                "status": "success",
                "data": {"result": [{"metric": {"gpu": "0"}, "values": [[1767225600, "x"]]}]},
            },
            "is not [time, ",
        ),
        (
            SERIES,
            {
                "status": "success",
                "data": {"result": [{"metric": {"gpu": "0"}, "values": [[1767225600]]}]},
            },
            "is not [time, ",
        ),
        (
            SERIES,
            {
                "status": "success",
                "data": {"result": [{"metric": {"gpu": "0"}, "values": [[1767225600000, "10"]]}]},
            },
            "milliseconds?",
        ),
        (
            SERIES,
            {
                "status": "success",
                "data": {
                    "result": [
                        {
                            "metric": {"gpu": "99999"},
                            "values": [[1767225600, "2"], [1767225601, "2"]],
                        }
                    ]
                },
            },
            "gpu='99999', not a device index",
        ),
        (
            SERIES,
            {
                "status": "success",
                "data": {
                    "result": [
                        {"metric": {"gpu": "-1"}, "values": [[1767225600, "2"], [1767225601, "2"]]}
                    ]
                },
            },
            "gpu='-1', not a device index",
        ),
        (  # a recording rule's sum over a host's GPUs: no gpu label, never read as GPU 0
            SERIES,
            {
                "status": "success",
                "data": {
                    "result": [
                        {
                            "metric": {"instance": "n1:9400"},
                            "values": [[1767225600, "2"], [1767225601, "2"]],
                        }
                    ]
                },
            },
            "has no gpu label (its labels: instance=n1:9400), so it is no one GPU's power",
        ),
        (
            SERIES,
            {
                "status": "success",
                "data": {"result": [{"metric": {}, "values": [[1767225600, "2"]]}]},
            },
            "has no gpu label (its labels: none)",
        ),
    ],
)
def test_malformed_answers_are_one_line(
    cli: Cli, tmp_path: Path, series: object, matrix: object, message: str
) -> None:
    with serve(api(matrix, series)) as url:
        r = cli("import", "prometheus", "--url", url, *SPAN, "--out", tmp_path / "x.parquet")
    assert r.exit_code == 2, r.stderr
    assert message in one_line(r), r.stderr
    assert not (tmp_path / "x.parquet").exists()
    assert not list(tmp_path.glob(".*parts"))  # the streamed parts went with the failure


@pytest.mark.parametrize("url", ["http://[::1", "http://host:port", "http://", "ftp://x"])
def test_urls_that_are_not_urls(cli: Cli, tmp_path: Path, url: str) -> None:
    r = cli("import", "prometheus", "--url", url, "--out", tmp_path / "x.parquet")
    assert r.exit_code == 2 and "is not a Prometheus URL" in one_line(r)
