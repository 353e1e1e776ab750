"""`powerkit top`: the window arithmetic fed sample by sample equals `windows` on the same
samples; the live view, driven in a real terminal (tmux), shows the violations and means that
`windows` computes on the trace it recorded; `--once --json`; a Prometheus server polled live."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.compute as pc
import pytest

from powerkit.analysis.windows import windowed_violations
from powerkit.core.units import PowerSpec
from powerkit.top.poll import PollCheck
from powerkit.top.session import TopState
from powerkit.top.stream import StreamSeries
from powerkit.trace import read_trace
from powerkit.trace.model import Trace
from powerkit.trace.schema import GpuMeta, TraceMeta, to_canonical
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[2]


def _gappy_trace(seed: int) -> Trace:
    """5,000 samples at 0.25-3 s steps (cells with two samples, gaps of up to five cells)."""
    rng = np.random.default_rng(seed)
    t = 1.7e9 + np.cumsum(rng.choice([0.5, 0.5, 0.5, 0.5, 1.0, 3.0, 0.25], 5000))
    frame = {
        "ts": pl.Series((t * 1e6).round().astype(np.int64)).cast(pl.Datetime("us", "UTC")),
        "host": ["h"] * t.size,
        "gpu": np.zeros(t.size, np.int16),
        "power_w": rng.uniform(100, 400, t.size),
    }
    meta = TraceMeta(source="t", interval_s=0.5, gpus=[GpuMeta("h", 0, nameplate_w=400.0)])
    return Trace(meta=meta, table_=to_canonical(pl.DataFrame(frame)), origin="t")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streamed_windows_equal_windows_on_the_trace(seed: int) -> None:
    trace = _gappy_trace(seed)
    stored = pl.from_arrow(trace.table())
    report = windowed_violations(trace, PowerSpec(watts=300.0), [0.5, 5.0, 30.0], grid_s=0.5)
    s = StreamSeries(0.5, [1, 10, 60], 300.0)
    for t, p in zip(
        stored["ts"].dt.epoch("us").to_list(), stored["power_w"].to_list(), strict=True
    ):
        s.add(t, p)
    s.close()
    for want, got in zip(report.windows, s.windows, strict=True):
        assert (got.positions, got.violations, got.incomplete) == (
            want.positions,
            want.violations,
            want.incomplete,
        )
        assert got.longest_violation_s == want.longest_violation_s
        if want.max_mean_w is None:
            assert got.max_mean_w is None
        else:
            assert got.max_mean_w == pytest.approx(want.max_mean_w, rel=1e-12)
            assert got.excess_energy_j == pytest.approx(want.excess_energy_j, rel=1e-9)
    assert report.windows[0].violations > 0 and report.windows[1].incomplete > 0


def test_sums_equal_windows_scope_sum() -> None:
    """Two GPUs fed together: the fleet row's counts are windows --scope sum's against the
    per-GPU budgets added."""
    rng = np.random.default_rng(3)
    t = 1.7e9 + 0.5 * np.arange(2000)
    power = rng.uniform(100, 400, (2, t.size))
    state = TopState([("h", 0), ("h", 1)], [400.0, 400.0], [0.5, 5.0], PowerSpec(watts=260.0), 0.5)
    for k in range(t.size):
        state.update(float(t[k]), power[:, k])
    state.close()
    frame = pl.DataFrame(
        {
            "ts": pl.Series(np.tile((t * 1e6).round().astype(np.int64), 2)).cast(
                pl.Datetime("us", "UTC")
            ),
            "host": ["h"] * (2 * t.size),
            "gpu": np.repeat([0, 1], t.size).astype(np.int16),
            "power_w": power.ravel(),
        }
    )
    meta = TraceMeta(
        source="t", interval_s=0.5, gpus=[GpuMeta("h", g, nameplate_w=400.0) for g in (0, 1)]
    )
    trace = Trace(meta=meta, table_=to_canonical(frame), origin="t")
    summed = windowed_violations(trace, PowerSpec(watts=520.0), [0.5, 5.0], scope="sum")
    fleet = state.rows("fleet")[0]
    assert fleet.violations == [w.violations for w in summed.windows]
    assert fleet.positions == [w.positions for w in summed.windows]
    per_gpu = windowed_violations(trace, PowerSpec(watts=260.0), [0.5, 5.0])
    rows = state.rows("gpu")
    assert [sum(r.violations[k] for r in rows) for k in (0, 1)] == [
        w.violations for w in per_gpu.windows
    ]


def test_once_json(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    doc = cli.json(
        "top",
        "--backend",
        "sim",
        "--preset",
        "a100-14b",
        "--once",
        "--duration",
        "2s",
        "--windows",
        "0.5s,1s",
        "--budget",
        "250W",
        "--record",
        out,
    )
    assert doc["kind"] == "powerkit top" and doc["scope"] == "gpu" and len(doc["rows"]) == 2
    assert doc["windows"] == ["500ms", "1s"] and doc["recording"] == str(out)
    row = doc["rows"][0]
    assert row["budget_w"] == 250.0 and row["nameplate_w"] == 400.0 and row["limit_w"] == 400.0
    report = windowed_violations(read_trace(out), PowerSpec(watts=250.0), [0.5, 1.0])
    assert [sum(r["violations"][k] for r in doc["rows"]) for k in (0, 1)] == [
        w.violations for w in report.windows
    ]
    assert [sum(r["positions"][k] for r in doc["rows"]) for k in (0, 1)] == [
        w.positions for w in report.windows
    ]
    host = cli.json(
        "top",
        "--backend",
        "sim",
        "--preset",
        "a100-14b",
        "--once",
        "--scope",
        "host",
        "--budget",
        "250W",
    )
    assert [r["gpus"] for r in host["rows"]] == [2] and host["rows"][0]["budget_w"] == 500.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scope", "rack"], "'rack' is not one of 'gpu', 'host', 'fleet'"),
        (["--interval", "1ms"], "from 10ms to 1h"),
        (["--interval", "1e30s"], "from 10ms to 1h"),
        (["--windows", "0.7s"], "not a whole number of 500ms grid cells"),
        (["--budget", "-5W"], "power must not be negative"),
        (
            ["--source", "prometheus+http://127.0.0.1:9/", "--record", "x.parquet"],
            "--record applies",
        ),
        (["--backend", "cmd"], "--backend"),
    ],
)
def test_bad_options_are_one_line(cli: Cli, tmp_path: Path, args: list[str], message: str) -> None:
    r = cli("top", "--backend", "sim", "--once", *args)
    assert r.exit_code == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_record_refuses_to_overwrite(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "kept.parquet"
    out.write_bytes(b"not mine")
    r = cli("top", "--backend", "sim", "--once", "--record", out)
    assert r.exit_code == 2 and "--force" in r.stderr and out.read_bytes() == b"not mine"


def _table(screen: str, windows: list[str]) -> dict[str, dict[str, str]]:
    """The rows of the view's table (columns by header) from a terminal capture."""
    lines = [ln for ln in screen.splitlines() if ln.strip()]
    head = next(i for i, ln in enumerate(lines) if re.search(r"\bviol\b", ln))
    names = ["name", *lines[head].split()]
    # headers like "1s mean" are two words: rejoin them
    fixed: list[str] = []
    for word in names:
        if word in ("mean", "viol") and fixed:
            fixed[-1] = f"{fixed[-1]} {word}"
        elif word == "plate" and fixed and fixed[-1] == "to":
            fixed[-1] = "to plate"
        else:
            fixed.append(word)
    rows = {}
    for ln in lines[head + 1 :]:
        if not re.match(r"^\S+:\d+\s", ln):
            break
        cells = ln.split()
        rows[cells[0]] = dict(zip(fixed, cells, strict=False))
    return rows


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_live_view_in_a_real_terminal(tmp_path: Path) -> None:
    """top runs full-screen in tmux on the simulator, recording; keys switch scope, pause and
    quit; the last view it leaves on the terminal shows, per GPU, the violations and the
    latest means that `windows` computes on the trace it recorded."""
    powerkit = Path(sys.executable).parent / "powerkit"
    out = tmp_path / "top.parquet"
    # a server of the test's own (a socket of its own), started without the COLUMNS and
    # LINES pytest exports, so that the view takes the terminal's size as a user's does
    server = ["tmux", "-L", f"powerkit-top-{time.monotonic_ns()}"]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    session = "top"
    cmd = (
        f"{powerkit} top --backend sim --preset a100-14b --budget 166W --windows 0.5s,2s "
        f"--interval 0.5s --record {out}; sleep 60"
    )
    subprocess.run(
        [*server, "new-session", "-d", "-s", session, "-x", "220", "-y", "40", cmd],
        check=True,
        cwd=tmp_path,
        env=env,
    )

    def screen() -> str:
        return subprocess.run(
            [*server, "capture-pane", "-p", "-t", session],
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def keys(*k: str) -> None:
        subprocess.run([*server, "send-keys", "-t", session, *k], check=True)

    try:
        deadline = time.monotonic() + 60
        while "sim:1" not in screen():
            assert time.monotonic() < deadline, screen()
            time.sleep(0.3)
        time.sleep(8)
        keys("h")
        time.sleep(1.5)
        assert re.search(r"^sim\s", screen(), re.M) and "scope host" in screen()
        keys("p")
        time.sleep(1.5)
        assert "paused" in screen()
        keys("p", "g")
        time.sleep(1.0)
        keys("q")
        while "wrote" not in screen():
            assert time.monotonic() < deadline, screen()
            time.sleep(0.3)
        final = screen()
        shown = _table(final, ["500ms", "2s"])
    finally:
        subprocess.run([*server, "kill-server"], check=False)
    assert set(shown) == {"sim:0", "sim:1"}, final
    trace = read_trace(out)
    for gpu in (0, 1):
        table = trace.table()
        one = Trace(meta=trace.meta, table_=table.filter(pc.equal(table["gpu"], gpu)), origin="t")
        report = windowed_violations(one, PowerSpec(watts=166.0), [0.5, 2.0])
        row = shown[f"sim:{gpu}"]
        assert "500ms viol" in row, (final, row)
        assert [int(row["500ms viol"].replace(",", "")), int(row["2s viol"].replace(",", ""))] == [
            w.violations for w in report.windows
        ]
        # the latest 2 s mean shown is the trace's last complete 2 s window
        t = pl.from_arrow(one.table())["power_w"].to_numpy()
        assert int(row["2s mean"]) == round(float(np.mean(t[-4:])))
    assert (
        sum(w.violations for w in windowed_violations(trace, PowerSpec(watts=166.0), [0.5]).windows)
        > 0
    )
    json.dumps(shown)


def _serving(folder: Path, host: str, port: int, duration: str) -> subprocess.Popen[str]:
    """A simulated recording at wall-clock speed serving its metrics on ``port`` (for a real
    Prometheus to scrape), as host ``host``."""
    exe = Path(sys.executable).with_name("powerkit")
    argv = ["record", "--backend", "sim", "--preset", "a100-14b", "--realtime"]
    argv += ["--duration", duration, "--interval", "0.25s", "--host", host]
    argv += ["--serve-metrics", f"127.0.0.1:{port}", "--out", str(folder / f"{host}.parquet")]
    return subprocess.Popen([str(exe), *argv, "--quiet"], stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_prometheus_server_polled_live(cli: Cli, tmp_path: Path) -> None:
    """Two hosts' recordings serve their metrics, a real Prometheus scrapes both every 0.5 s;
    top polls the server: a row per GPU, per host (its GPUs summed where their scrape times
    agree), the fleet's power now without windows (hosts scrape out of step)."""
    from tests.promserver import free_port, prometheus

    ports = [free_port(), free_port()]
    with prometheus(tmp_path, targets=[f"127.0.0.1:{p}" for p in ports], scrape_s=0.5) as url:
        recs = [
            _serving(tmp_path, host, port, "25s")
            for host, port in (("node-a", ports[0]), ("node-b", ports[1]))
        ]
        try:
            time.sleep(6)
            source = f"prometheus+{url}"
            doc = cli.json(
                "top",
                "--source",
                source,
                "--once",
                "--duration",
                "5s",
                "--windows",
                "1s,2s",
                "--budget",
                "80%",
                "--nameplate",
                "400W",
                "--scope",
                "host",
            )
            gpus = cli.json(
                "top",
                "--source",
                source,
                "--once",
                "--duration",
                "2s",
                "--windows",
                "1s",
                "--budget",
                "300W",
            )
            fleet = cli.json(
                "top",
                "--source",
                source,
                "--once",
                "--scope",
                "fleet",
                "--windows",
                "1s",
                "--budget",
                "300W",
            )
        finally:
            for rec in recs:
                rec.communicate(timeout=60)
    assert [r["name"] for r in doc["rows"]] == ["node-a", "node-b"]
    for row in doc["rows"]:
        assert row["gpus"] == 2 and row["budget_w"] == 640.0 and row["nameplate_w"] == 800.0
        assert row["means_w"][0] is not None and 100 < row["means_w"][0] < 800
        assert sum(row["positions"]) > 0
    assert [r["name"] for r in gpus["rows"]] == ["node-a:0", "node-a:1", "node-b:0", "node-b:1"]
    assert all(r["power_w"] is not None for r in gpus["rows"])
    (row,) = fleet["rows"]
    assert row["gpus"] == 4 and row["means_w"] == [None] and row["power_w"] > 0
    r = cli("top", "--source", "prometheus+http://127.0.0.1:9", "--once")  # nothing there
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1


class _Answers:
    """A Prometheus client that answers each query with the next of ``answers``."""

    shown = "http://prom:9090"

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)

    def get(self, endpoint: str, params: dict[str, object]) -> object:
        assert endpoint == "query"
        return self.answers.pop(0)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"resultType": "matrix", "result": []}, "not an instant vector"),
        ({"resultType": "vector", "result": {}}, "result is not a list"),
        ({"resultType": "vector", "result": [{"metric": {"gpu": 1}}]}, "without a label set"),
        (
            {"resultType": "vector", "result": [{"metric": {"gpu": "0"}, "value": [1, 2]}]},
            "not a decimal string",
        ),
        (
            {"resultType": "vector", "result": [{"metric": {"gpu": "x"}, "value": [1.7e9, "3"]}]},
            "not a device index",
        ),
        (
            {"resultType": "vector", "result": [{"metric": {"gpu": "0"}, "value": [1.7e12, "3"]}]},
            "milliseconds",
        ),
    ],
)
def test_a_malformed_instant_answer_is_one_line(answer: object, message: str) -> None:
    from powerkit.core.errors import BadInputError
    from powerkit.trace.readers.prominstant import instant_samples

    with pytest.raises(BadInputError, match=message):
        instant_samples(_Answers(answer), "DCGM_FI_DEV_POWER_USAGE")  # type: ignore[arg-type]


def test_instant_samples_skip_sums_and_impossible_power() -> None:
    from powerkit.trace.readers.prominstant import instant_samples

    answer = {
        "resultType": "vector",
        "result": [
            {"metric": {"gpu": "0", "Hostname": "n1"}, "value": [1.7e9, "300.5"]},
            {"metric": {"gpu": "all", "Hostname": "n1"}, "value": [1.7e9, "900"]},
            {"metric": {"gpu": "1", "Hostname": "n1"}, "value": [1.7e9, "NaN"]},
            {"metric": {"gpu": "2", "Hostname": "n1"}, "value": [1.7e9, "-4"]},
        ],
    }
    got = instant_samples(_Answers(answer), "DCGM_FI_DEV_POWER_USAGE")  # type: ignore[arg-type]
    assert [(k, t) for k, t, _ in got] == [
        (("n1", 0), 1.7e9),
        (("n1", 1), 1.7e9),
        (("n1", 2), 1.7e9),
    ]
    check = PollCheck([("n1", 0), ("n1", 1), ("n1", 2)], 5000.0, 1.0)
    assert check.fresh(got) == {("n1", 0): (1.7e9, 300.5)}  # (the sum over GPUs never read)
    assert check.invalid == 2


def _poll(check: PollCheck, t: float, **watts: float) -> dict[tuple[str, int], tuple[float, float]]:
    return check.fresh([(("n1", int(g[1:])), t, w) for g, w in watts.items()])


def test_a_poll_is_checked_as_a_range_read_is() -> None:
    """Impossible samples left out and counted; a GPU's second series in one poll counted and
    the first kept; a scrape seen before adds nothing; a GPU that stopped reporting while
    the other goes on, and a server whose scrapes stopped, said."""
    check = PollCheck([("n1", 0), ("n1", 1)], 2100.0, 1.0)
    assert _poll(check, 100.0, g0=300.0, g1=1e30) == {("n1", 0): (100.0, 300.0)}
    two = [(("n1", 0), 101.0, 310.0), (("n1", 0), 101.0, 999.0), (("n1", 1), 101.0, 200.0)]
    assert check.fresh(two) == {("n1", 0): (101.0, 310.0), ("n1", 1): (101.0, 200.0)}
    assert _poll(check, 101.0, g0=310.0, g1=200.0) == {}  # the same scrapes again
    assert (check.invalid, check.repeated, check.stale()) == (1, 1, [])
    for t in (102.0, 103.0, 104.0, 105.0):  # GPU 1's series stops; GPU 0's goes on
        check.fresh([(("n1", 0), t, 300.0), (("n1", 1), 101.0, 200.0)])
    assert check.stale() == [("n1", 1)]
    assert check.stale() == [("n1", 1)] and check.frozen_polls == 0
    notes = check.notes()
    assert notes[0].startswith("1 GPU(s) stopped reporting (n1:1): no scrape for more than 3s")
    assert "1 sample(s) no GPU can draw (NaN, negative, or above 2,100 W) left out" in notes
    assert any("second series of one GPU" in n for n in notes)
    for _ in range(3):  # nothing new from anyone
        assert _poll(check, 105.0, g0=300.0) == {}
    assert any("scrapes have stopped (its scrape times are frozen)" in n for n in check.notes())


def test_an_unfinished_recording_is_not_overwritten(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    (tmp_path / "t.parquet.parts").mkdir()
    r = cli("top", "--backend", "sim", "--once", "--record", out, "--force")
    assert r.exit_code == 2 and "--recover" in r.stderr
    assert (tmp_path / "t.parquet.parts").is_dir() and not out.exists()


def test_a_budget_change_counts_afresh() -> None:
    state = TopState([("h", 0)], [400.0], [0.5], PowerSpec(watts=100.0), 0.5)
    for k in range(10):
        state.update(1.7e9 + 0.5 * k, np.array([200.0]))
    assert state.rows("gpu")[0].violations == [9]  # the open cell is judged when it is over
    state.set_budget(PowerSpec(watts=300.0))
    for k in range(10, 20):
        state.update(1.7e9 + 0.5 * k, np.array([250.0 if k < 15 else 350.0]))
    state.close()
    row = state.rows("gpu")[0]
    assert row.budget_w == 300.0 and row.violations == [5] and row.positions == [11]
    with pytest.raises(Exception, match="nameplate"):
        TopState([("h", 0)], [None], [0.5], PowerSpec(fraction=0.5, text="50%"), 0.5)


def test_repeated_timestamps_count_once_as_the_cells_do() -> None:
    """Samples sharing a time count once, with their mean (``cells_of``); the streamed windows
    equal the analysis's functions on those cells."""
    from powerkit.cells.grid import cells_of
    from powerkit.cells.rolling import PrefixSums, WindowStats, rolling

    rng = np.random.default_rng(7)
    t_us = (1.7e15 + np.cumsum(rng.choice([0, 250_000, 500_000, 1_500_000], 3000))).astype(np.int64)
    p = rng.uniform(100, 400, t_us.size)
    s = StreamSeries(0.5, [1, 4], 280.0)
    for t, w in zip(t_us.tolist(), p.tolist(), strict=True):
        s.add(t, w)
    s.close()
    _, values, present, _ = cells_of(t_us, p, 500_000)
    prefix = PrefixSums(values, present)
    for n, got in zip([1, 4], s.windows, strict=True):
        want = WindowStats()
        want.add(rolling(prefix, n, 0.5), 280.0)
        assert (got.positions, got.violations, got.incomplete) == (
            want.positions,
            want.violations,
            want.incomplete,
        )
        assert got.max_mean_w == pytest.approx(want.max_mean_w, rel=1e-12)
    assert (np.diff(t_us) == 0).sum() > 100


def test_sigterm_ends_the_session_and_finalizes_the_recording(tmp_path: Path) -> None:
    import signal

    out = tmp_path / "t.parquet"
    exe = Path(sys.executable).with_name("powerkit")
    proc = subprocess.Popen(
        [
            str(exe),
            "top",
            "--backend",
            "sim",
            "--budget",
            "300W",
            "--windows",
            "1s",
            "--record",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "sim:0" in stdout  # the view, printed once (no terminal)
    assert read_trace(out).table().num_rows >= 3 and not (tmp_path / "t.parquet.parts").exists()


def test_piped_once_is_a_row_a_line_and_never_minus_zero(cli: Cli) -> None:
    from powerkit.top.view import _w

    assert [_w(-0.3), _w(-0.04, ".1f"), _w(-2.6), _w(None)] == ["0", "0.0", "-3", "-"]
    result = cli("top", "--backend", "sim", "--once", "--duration", "0.5s", "--interval", "0.1s")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 4 and lines[2].startswith("sim:0"), result.stdout


@pytest.mark.slow
def test_a_server_scraping_every_second_is_polled_at_its_scrape_interval(
    cli: Cli, tmp_path: Path
) -> None:
    """A real Prometheus scraping every 1 s, top at its default 0.5 s: the grid follows the
    scrapes (said in a warning) and GPUs over budget show their violations — at 0.5 s, half
    the cells were empty, no window was ever complete, and every GPU showed 0."""
    from tests.promserver import free_port, prometheus

    port = free_port()
    with prometheus(tmp_path, targets=[f"127.0.0.1:{port}"], scrape_s=1.0) as url:
        rec = _serving(tmp_path, "node-a", port, "30s")
        try:
            time.sleep(10)
            doc = cli.json(
                "top",
                "--source",
                f"prometheus+{url}",
                "--once",
                "--duration",
                "8s",
                "--windows",
                "2s",
                "--budget",
                "10%",
                "--nameplate",
                "400W",
            )
        finally:
            rec.communicate(timeout=60)
    assert doc["grid_s"] == 1.0
    assert any("polling every 1s, the server's scrape interval" in w for w in doc["warnings"])
    for row in doc["rows"]:
        assert row["positions"][0] > 0 and row["violations"][0] > 0, row
