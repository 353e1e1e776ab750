"""The Prometheus HTTP API client: credentials from the environment or a file (never the
command line), same-origin redirects only, bounded answers, retries within a deadline, and each
answer's JSON checked. The reader over it: ``powerkit.trace.readers.prometheus``."""

from __future__ import annotations

import base64
import contextlib
import http.client
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

from powerkit.core.errors import BadInputError, option
from powerkit.core.units import format_duration
from powerkit.trace.schema import GPU_RANGE
from powerkit.trace.timeparse import TIME_RANGE_S

_RETRY_CODES = {429, 500, 502, 503, 504}


def _read_secret(path: str, what: str) -> str:
    from powerkit.core.inputs import read_text_input

    return read_text_input(Path(path).expanduser(), f"the {what} file", 64 * 1024).strip()


def _check_secret(value: str, what: str, path: str | None, variable: str) -> None:
    """Refuse a credential an HTTP header cannot carry (a line break, a control character,
    text beyond Latin-1), naming where it came from, never its value."""
    where = f"the {what} file {path}" if path else f"${variable}"
    bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7F or ord(c) > 0xFF), None)
    if bad is not None:
        kind = "a line break" if bad in "\r\n" else f"the character U+{ord(bad):04X}"
        raise BadInputError(
            f"{where}: the {what} holds {kind}, which an HTTP header cannot carry (one line, "
            "printable characters)"
        )


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
        _check_secret(token, "bearer token", token_file, "POWERKIT_PROMETHEUS_TOKEN")
        return {"Authorization": f"Bearer {token}"}
    if basic:
        _check_secret(basic, "user:password", basic_file, "POWERKIT_PROMETHEUS_BASIC_AUTH")
        if ":" not in basic:
            raise BadInputError("basic auth for Prometheus must be user:password")
        return {"Authorization": "Basic " + base64.b64encode(basic.encode()).decode()}
    return {}


def display_url(url: str) -> str:
    """``url`` as it may be shown or stored: any ``user:password@`` replaced by ``***@``."""
    try:
        parsed = urllib.parse.urlsplit(url)
    except ValueError:
        return re.sub(r"//[^/@]*@", "//***@", url)
    if "@" not in parsed.netloc:
        return url
    return urllib.parse.urlunsplit(
        parsed._replace(netloc="***@" + parsed.netloc.rpartition("@")[2])
    )


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = urllib.parse.urlsplit(url)
    port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme.lower())
    return parsed.scheme.lower(), (parsed.hostname or "").lower(), port


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to the same scheme, host and port: the credentials a request
    carries are never sent anywhere else."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        if _origin(newurl) != _origin(req.full_url):
            raise BadInputError(
                f"{display_url(req.full_url.split('/api/v1/')[0])}: redirected (HTTP {code}) to "
                f"{display_url(newurl.split('?')[0])}, another server; not followed (give that "
                "server's URL if it is the right one)"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Deadline(Exception):
    """A request (or the whole read) ran past its time."""


#: the largest answer one request may bring (the chunks keep a normal one far below)
MAX_ANSWER_BYTES = 512 * 1024 * 1024


@dataclass
class PromClient:
    """GET requests to one Prometheus server's ``/api/v1``, with retries.

    ``timeout_s`` bounds each request whole (connecting, waiting and reading the answer: a
    server that trickles its answer is cut off too); ``deadline_s`` bounds all requests of
    the client together. Redirects are followed only within the same scheme, host and port.
    """

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 60.0
    retries: int = 3
    backoff_s: float = 0.5
    #: called before each retry with (attempt, why): the caller may show it
    on_retry: Callable[[int, str], None] | None = None
    deadline_s: float | None = None
    _end: float | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        shown = display_url(self.url)
        try:
            parsed = urllib.parse.urlsplit(self.url)
            parsed.port  # noqa: B018 -- a port that is not a number raises here
        except ValueError as exc:
            raise BadInputError(f"{shown!r} is not a Prometheus URL ({exc})") from None
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise BadInputError(f"{shown!r} is not a Prometheus URL (e.g. http://prometheus:9090)")
        if "@" in parsed.netloc:
            raise BadInputError(
                f"{shown}: credentials in the URL are not used (they would show in process "
                "lists and logs); set POWERKIT_PROMETHEUS_BASIC_AUTH or give "
                f"{option('basic-auth-file')}"
            )
        if not self.timeout_s > 0 or (self.deadline_s is not None and not self.deadline_s > 0):
            raise BadInputError(
                f"the Prometheus {option('timeout')} and {option('deadline')} must be positive"
            )
        if self.deadline_s is not None:
            self._end = time.monotonic() + self.deadline_s
        self._opener = urllib.request.build_opener(_SameOriginRedirects())

    @property
    def shown(self) -> str:
        """The server's URL as messages show it."""
        return display_url(self.url)

    def _read(self, request: urllib.request.Request) -> bytes:
        """The whole answer, or _Deadline once the request's time (or the read's) is up."""
        end = time.monotonic() + self.timeout_s
        if self._end is not None:
            end = min(end, self._end)
        left = end - time.monotonic()
        if left <= 0:
            raise _Deadline
        chunks, size = [], 0
        with self._opener.open(request, timeout=left) as answer:
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    raise _Deadline
                with contextlib.suppress(AttributeError, OSError):
                    answer.fp.raw._sock.settimeout(left)  # each read within what is left
                chunk = answer.read1(1 << 16) if hasattr(answer, "read1") else answer.read(1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise BadInputError(
                        f"{self.shown}: an answer is over {MAX_ANSWER_BYTES >> 20} MB; narrow "
                        f"the range or {option('match')}"
                    )
                chunks.append(chunk)
        return b"".join(chunks)

    def get(self, endpoint: str, params: dict[str, Any]) -> Any:
        """The ``data`` of a successful API answer; BadInputError otherwise."""
        query = urllib.parse.urlencode(params, doseq=True)
        request = urllib.request.Request(
            f"{self.url}/api/v1/{endpoint}?{query}", headers=self.headers
        )
        what = params.get("query") or params.get("match[]") or ""
        asked = f"{endpoint} {what!r}" if what else endpoint
        why = ""
        for attempt in range(self.retries + 1):
            if attempt:
                if self.on_retry is not None:
                    self.on_retry(attempt, why)
                pause = self.backoff_s * 2 ** (attempt - 1)
                if self._past_deadline(slack_s=pause):
                    break
                time.sleep(pause)
            try:
                raw = self._read(request)
            except _Deadline:
                why = f"no whole answer within {format_duration(self.timeout_s)}"
                if self._past_deadline():
                    break
                continue
            except urllib.error.HTTPError as exc:
                if exc.code in (401, 403):
                    raise BadInputError(
                        f"{self.shown}: authentication failed (HTTP {exc.code}); set "
                        "POWERKIT_PROMETHEUS_TOKEN or POWERKIT_PROMETHEUS_BASIC_AUTH (or a "
                        f"{option('token-file')} / {option('basic-auth-file')})"
                    ) from None
                if exc.code not in _RETRY_CODES:
                    raise BadInputError(
                        f"{self.shown}: {asked} refused (HTTP {exc.code}): {_server_error(exc)}"
                    ) from None
                why = f"HTTP {exc.code}"
                continue
            except (
                urllib.error.URLError,
                TimeoutError,
                ConnectionError,
                http.client.HTTPException,
            ) as exc:
                reason = getattr(exc, "reason", exc)
                why = str(reason)[:200] or type(reason).__name__
                continue
            except OSError as exc:
                why = exc.strerror or type(exc).__name__
                continue
            return _data(self.shown, asked, raw)
        if self._past_deadline(slack_s=self.backoff_s * 2**self.retries):
            raise BadInputError(
                f"{self.shown}: the read ran past its {option('deadline')} of "
                f"{format_duration(self.deadline_s or 0)} (at {asked}: {why})"
            )
        raise BadInputError(
            f"cannot query Prometheus at {self.shown}: {why} (gave up after "
            f"{attempt + 1} tries, at {asked})"
        )

    def _past_deadline(self, slack_s: float = 0.0) -> bool:
        return self._end is not None and time.monotonic() + slack_s >= self._end


def _data(url: str, asked: str, raw: bytes) -> Any:
    """The ``data`` of an API answer, which must be a JSON object saying success."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise BadInputError(f"{url}: the answer to {asked} is nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise BadInputError(
            f"{url}: the answer to {asked} is not JSON (cut short, or not Prometheus?)"
        ) from None
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        text = str(error) if error else "not a Prometheus API answer"
        raise BadInputError(f"{url}: {asked} failed: {text[:300]}")
    return body.get("data")


def _server_error(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("error"))
    except (ValueError, AttributeError, OSError):
        return exc.reason or "no reason given"


def is_labels(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def matrix_results(client: PromClient, asked: str, data: Any, kind: str) -> list[dict[str, Any]]:
    """The ``result`` of a matrix answer, each ``{"metric": labels, "values": [[t, "v"]]}``,
    checked: one line naming the query for any other shape."""
    bad = f"{client.shown}: the answer to {asked!r} is malformed"
    if not isinstance(data, dict):
        raise BadInputError(f"{bad} (no data object)")
    if data.get("resultType") not in (kind, None):
        raise BadInputError(f"{bad} (a {data.get('resultType')!r} result, expected {kind})")
    result = data.get("result", [])
    if not isinstance(result, list):
        raise BadInputError(f"{bad} (result is not a list)")
    for r in result:
        if not isinstance(r, dict) or not is_labels(r.get("metric", {})):
            raise BadInputError(f"{bad} (a series without a label set)")
        values = r.get("values", [])
        if not isinstance(values, list):
            raise BadInputError(f"{bad} (a series' values are not a list)")
    return result


def answer_samples(
    client: PromClient, asked: str, values: list[Any]
) -> tuple[np.ndarray, np.ndarray]:
    """(epoch s, value) arrays of a series' ``[[t, "v"], ...]``, checked."""
    bad = f"{client.shown}: the answer to {asked!r} is malformed"
    try:
        if not all(isinstance(v, list) and len(v) == 2 for v in values):
            raise TypeError
        t = np.array([v[0] for v in values], dtype=np.float64)
        if not all(isinstance(v[1], str) for v in values):
            raise BadInputError(f"{bad} (a sample value is not a decimal string)")
        x = np.array([float(v[1]) for v in values], dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise BadInputError(f'{bad} (a sample is not [time, "value"])') from None
    if t.size and not (
        np.isfinite(t).all() and t.min() >= TIME_RANGE_S[0] and t.max() < TIME_RANGE_S[1]
    ):
        worst = t[~np.isfinite(t) | (t < TIME_RANGE_S[0]) | (t >= TIME_RANGE_S[1])][0]
        hint = " (milliseconds? Prometheus answers in seconds)" if worst > 1e11 else ""
        raise BadInputError(f"{bad} (sample time {worst:g} s is outside 1970-2199{hint})")
    return t, x


def series_gpu(client: PromClient, labels: dict[str, str], asked: str) -> int:
    """The GPU index a series' ``gpu`` label names; a series without one is refused: a sum
    over a host's GPUs (a recording rule's) or another job's series is not one GPU's power,
    and reading it as GPU 0 would count it as one."""
    if "gpu" not in labels:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"
        raise BadInputError(
            f"{client.shown}: a series of {asked!r} has no gpu label (its labels: {shown}), so "
            "it is no one GPU's power (a sum over GPUs?); pick per-GPU series with --match "
            "'gpu!=\"\"'"
        )
    text = labels["gpu"]
    try:
        gpu = int(text)
    except ValueError:
        gpu = -1
    if not GPU_RANGE[0] <= gpu <= GPU_RANGE[1]:
        raise BadInputError(
            f"{client.shown}: a series of {asked!r} has gpu={text!r}, not a device index "
            f"(0-{GPU_RANGE[1]})"
        )
    return gpu


def series_host(labels: dict[str, str]) -> str:
    host = labels.get("Hostname") or labels.get("hostname")
    return host or (labels.get("instance") or "prometheus").rsplit(":", 1)[0]
