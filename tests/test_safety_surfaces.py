"""Safe on every surface: no output written over a device, a pipe or an input; a recording's
parts recovered only into a file the user may replace, from its own files, of one recording;
a credential never printed; text from data never reaching the terminal as control characters
or markup."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from powerkit.core.errors import BadInputError
from powerkit.core.outputs import atomic_path, check_output, check_plotly_js
from powerkit.core.shown import visible
from powerkit.trace.parquet import read_parquet_trace
from powerkit.trace.writing import PartsWriter
from tests.conftest import Cli

SMI = Path(__file__).resolve().parents[1] / "sample_data" / "nvidia-smi-a100-14b.csv"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trace") / "t.parquet"
    r = Cli()("record", "--backend", "sim", "--duration", "5m", "--out", out, "-q")
    assert r.exit_code == 0, r.stderr
    return out


def _one_error(r: object) -> str:
    err = r.stderr  # type: ignore[attr-defined]
    assert r.exit_code == 2, err  # type: ignore[attr-defined]
    assert "internal error" not in err and "Traceback" not in err, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


def _target(kind: str, folder: Path) -> Path:
    """A path of ``kind`` made in ``folder``: a FIFO, or (root only) a character device like
    /dev/null or /dev/zero. Never the system's own nodes: a regression run as root would
    replace them."""
    path = folder / kind
    if kind == "fifo":
        os.mkfifo(path)
        return path
    minor = {"null": 3, "zero": 5}[kind]
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


def _unchanged(path: Path, kind: str) -> None:
    mode = os.lstat(path).st_mode
    assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode)


# (label, argv: {T} a trace, {O} the output, {J} the --plotly-js file)
PAGES = [
    ("oversub", ["oversub", "{T}:2", "--html", "{O}", "--plotly-js", "{J}"]),
    ("utility", ["utility", "{T}:2", "--site-mw", "1", "--html", "{O}", "--plotly-js", "{J}"]),
    ("cap", ["cap", "{T}:2", "--limit", "80%", "--html", "{O}", "--plotly-js", "{J}"]),
    ("report", ["report", "--trace", "{T}", "--out", "{O}", "--plotly-js", "{J}"]),
]


def _args(argv: list[str], trace: Path, out: Path, js: Path) -> list[str]:
    return [
        a.replace("{T}", str(trace)).replace("{O}", str(out)).replace("{J}", str(js)) for a in argv
    ]


@pytest.mark.parametrize("kind", ["fifo", "null", "zero"])
@pytest.mark.parametrize(("label", "argv"), PAGES, ids=[label for label, _ in PAGES])
def test_a_page_never_replaces_a_device_or_pipe(
    cli: Cli, tmp_path: Path, trace: Path, kind: str, label: str, argv: list[str]
) -> None:
    target = _target(kind, tmp_path)
    js = tmp_path / "plotly.js"
    line = _one_error(cli(*_args(argv, trace, target, js), "--force"))
    assert "not a regular file" in line, line
    _unchanged(target, kind)


@pytest.mark.parametrize("kind", ["fifo", "null", "zero", "input"])
@pytest.mark.parametrize(("label", "argv"), PAGES, ids=[label for label, _ in PAGES])
def test_plotly_js_is_never_a_device_a_pipe_or_an_input(
    cli: Cli, tmp_path: Path, trace: Path, kind: str, label: str, argv: list[str]
) -> None:
    js = trace if kind == "input" else _target(kind, tmp_path)
    before = trace.read_bytes()
    line = _one_error(cli(*_args(argv, trace, tmp_path / "page.html", js), "--force"))
    assert "--plotly-js" in line, line
    assert trace.read_bytes() == before
    assert not (tmp_path / "page.html").exists()
    if kind != "input":
        _unchanged(js, kind)


# The page-writing commands whose input is not a trace: (label, argv with {I} the input
# made by _own_input, {O} the page, {J} the --plotly-js file).
OWN_PAGES = [
    ("sweep", ["sweep", "--preset", "a100-7b", "--group-size", "4,8", "--out", "{I}"]),
    ("sweep show", ["sweep", "show", "{I}"]),
    ("pfi compute", ["pfi", "compute", "{I}"]),
    ("pfi allocate", ["pfi", "allocate", "--jobs", "{I}", "--cut", "10%"]),
    ("control eval", ["control", "eval", "--policy", "{I}", "--horizon", "1m", "--seeds", "1"]),
    ("bloat plan", ["bloat", "plan", "{I}", "--stages", "4", "--microbatches", "4"]),
]


@pytest.fixture(scope="module")
def own_inputs(tmp_path_factory: pytest.TempPathFactory, policy: Path) -> dict[str, Path]:
    """The input of each of OWN_PAGES, made by the program itself."""
    folder = tmp_path_factory.mktemp("own")
    made = {
        "sweep": folder / "sweep.parquet",
        "pfi": folder / "pfi.parquet",
        "bloat": folder / "profile.csv",
    }
    for argv in (
        ["sweep", "--preset", "a100-7b", "--group-size", "4,8", "--out", made["sweep"]],
        ["pfi", "sweep", "--preset", "h200-dense-pretrain", "--caps", "200W,300W"],
        ["bloat", "profile", "--backend", "sim", "--preset", "a100-gpt3-pp4"],
    ):
        key = "sweep" if argv[0] == "sweep" else argv[0]
        full = argv if key == "sweep" else [*argv, "--out", made[key]]
        r = Cli()(*full)
        assert r.exit_code == 0, r.stderr
    by_label = {"sweep": made["sweep"], "sweep show": made["sweep"], "control eval": policy}
    by_label |= {"pfi compute": made["pfi"], "pfi allocate": made["pfi"]}
    by_label["bloat plan"] = made["bloat"]
    return by_label


@pytest.mark.parametrize(
    ("where", "kind"),
    [("--plotly-js", k) for k in ("fifo", "null", "zero", "input")]
    + [("--html", k) for k in ("fifo", "null", "zero")],
)
@pytest.mark.parametrize(("label", "argv"), OWN_PAGES, ids=[label for label, _ in OWN_PAGES])
def test_every_page_writer_keeps_its_input_and_the_systems_nodes(
    cli: Cli,
    tmp_path: Path,
    own_inputs: dict[str, Path],
    where: str,
    kind: str,
    label: str,
    argv: list[str],
) -> None:
    """--plotly-js naming the command's own input, a FIFO or a device node, and --html
    naming a FIFO or a device node: one line, and nothing of either changed."""
    given = own_inputs[label]
    if label == "sweep":  # its input is its --out: the sweep a rerun would replace
        given = tmp_path / "sweep.parquet"
        given.write_bytes(own_inputs["sweep show"].read_bytes())
    before = given.read_bytes()
    args = [a.replace("{I}", str(given)) for a in argv]
    named = given if kind == "input" else _target(kind, tmp_path)
    page, js = (tmp_path / "page.html", named) if where == "--plotly-js" else (named, "inline")
    line = _one_error(cli(*args, "--html", page, "--plotly-js", js, "--force"))
    assert (where if where == "--plotly-js" else "not a regular file") in line, line
    assert given.read_bytes() == before
    assert not (tmp_path / "page.html").exists()
    if kind != "input":
        _unchanged(named, kind)


@pytest.mark.parametrize("kind", ["fifo", "null", "zero"])
def test_import_never_replaces_a_device_or_pipe(cli: Cli, tmp_path: Path, kind: str) -> None:
    target = _target(kind, tmp_path)
    line = _one_error(cli("import", SMI, "--tz", "UTC", "--out", target, "--force"))
    assert "not a regular file" in line
    _unchanged(target, kind)


def test_the_rule_in_one_place(tmp_path: Path) -> None:
    """check_output refuses a pipe with or without --force; the writer never renames over
    one that appears after the check."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for force in (False, True):
        with pytest.raises(BadInputError, match="not a regular file"):
            check_output(pipe, force=force)
    with pytest.raises(BadInputError, match="not a regular file"):
        check_plotly_js(str(pipe), force=True, out=tmp_path / "p.html")
    late = tmp_path / "late"
    with pytest.raises(BadInputError, match="not a regular file"), atomic_path(late) as tmp:
        tmp.write_text("x")
        os.mkfifo(late)  # (made between the check and the rename)
    assert stat.S_ISFIFO(os.lstat(late).st_mode)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".late")] == []


def _parts(out: Path, trace: Path, recordings: int = 1) -> None:
    t = read_parquet_trace(trace)
    table = t.table()
    for k in range(recordings):
        writer = PartsWriter(out)
        writer.count = k
        writer.write(table.slice(100 * k, 100), t.meta)


@pytest.mark.parametrize(
    "given", [["--duration", "5m"], ["--backend", "sim"], ["--interval", "1s"], ["--seed", "3"]]
)
def test_recover_takes_no_recording_option(
    cli: Cli, tmp_path: Path, trace: Path, given: list[str]
) -> None:
    """What a recording would take is refused with --recover, which records nothing: never
    ignored, and the parts are left as they were."""
    out = tmp_path / "run.parquet"
    _parts(out, trace)
    parts = sorted(p.name for p in (tmp_path / "run.parquet.parts").iterdir())
    line = _one_error(cli("record", "--out", out, "--recover", *given))
    assert line == f"error: --recover takes none of the options given ({given[0]})", line
    assert sorted(p.name for p in (tmp_path / "run.parquet.parts").iterdir()) == parts
    assert not out.exists()
    assert cli("record", "--out", out, "--recover", "-q", "--json").exit_code == 0


@pytest.mark.parametrize("stranger", ["folder", "file", "link"])
@pytest.mark.parametrize("with_parts", [False, True])
def test_recover_leaves_a_parts_folder_holding_a_stranger_untouched(
    cli: Cli, tmp_path: Path, trace: Path, stranger: str, with_parts: bool
) -> None:
    """A parts folder holding what no recording writes (an empty folder, a note, a link):
    one line naming it, and nothing merged or removed."""
    out = tmp_path / "run.parquet"
    parts = tmp_path / "run.parquet.parts"
    if with_parts:
        _parts(out, trace)
    parts.mkdir(exist_ok=True)
    odd = parts / "odd"
    {
        "folder": odd.mkdir,
        "file": lambda: odd.write_text("x"),
        "link": lambda: odd.symlink_to(trace),
    }[stranger]()
    held = sorted(p.name for p in parts.iterdir())
    line = _one_error(cli("record", "--out", out, "--recover"))
    assert line.startswith(f"error: {odd}: not a part a recording writes; nothing was changed")
    assert sorted(p.name for p in parts.iterdir()) == held and not out.exists()


def test_recover_replaces_an_existing_file_only_with_force(
    cli: Cli, tmp_path: Path, trace: Path
) -> None:
    out = tmp_path / "kept.parquet"
    out.write_bytes(b"mine")
    _parts(out, trace)
    line = _one_error(cli("record", "--out", out, "--recover"))
    assert "--force" in line and out.read_bytes() == b"mine"
    r = cli("record", "--out", out, "--recover", "--force")
    assert r.exit_code == 0, r.stderr
    assert read_parquet_trace(out).extent()[2] == 100
    assert "part_of_recording" not in read_parquet_trace(out).meta.extra


def test_recover_never_merges_two_recordings(cli: Cli, tmp_path: Path, trace: Path) -> None:
    out = tmp_path / "r.parquet"
    _parts(out, trace, recordings=2)
    line = _one_error(cli("record", "--out", out, "--recover"))
    assert "2 different recordings" in line
    assert not out.exists() and len(list((tmp_path / "r.parquet.parts").iterdir())) == 2


def test_recover_never_follows_a_linked_part(cli: Cli, tmp_path: Path, trace: Path) -> None:
    out = tmp_path / "r.parquet"
    _parts(out, trace)
    outside = tmp_path / "elsewhere.parquet"
    outside.write_bytes(trace.read_bytes())
    (tmp_path / "r.parquet.parts" / "part-000009.parquet").symlink_to(outside)
    line = _one_error(cli("record", "--out", out, "--recover"))
    assert "link" in line and not out.exists()


@pytest.mark.parametrize("how", ["file", "env"])
@pytest.mark.parametrize("command", ["import", "top"])
def test_a_credential_with_a_line_break_is_refused_unprinted(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, command: str
) -> None:
    secret = "sekrit-value\nX-Injected: yes"
    url = "prometheus+http://127.0.0.1:9/"
    given: list[object] = []
    if how == "file":
        token = tmp_path / "token"
        token.write_text(secret + "\n")
        if command == "import":
            given = ["--token-file", token]
        else:  # (top reads the file the environment names)
            monkeypatch.setenv("POWERKIT_PROMETHEUS_TOKEN_FILE", str(token))
    else:
        monkeypatch.setenv("POWERKIT_PROMETHEUS_TOKEN", secret)
    if command == "import":
        r = cli("import", url, *given, "--out", tmp_path / "p.parquet")
    else:
        r = cli("top", "--source", url, *given, "--once", "--budget", "300W")
    line = _one_error(r)
    assert "line break" in line and "sekrit" not in r.stderr + r.stdout


HOSTILE_HOST = "evil\x1b[2J\x1b]0;pwned\x07[red]x[/red][/]"


@pytest.fixture(scope="module")
def hostile_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "h.parquet"
    r = Cli()(
        "import",
        SMI,
        "--tz",
        "UTC",
        "--host",
        HOSTILE_HOST,
        "--gpu-name",
        "[/]\x1b[31mGPU",
        "--out",
        out,
    )
    assert r.exit_code == 0, r.stderr
    return out


@pytest.mark.parametrize(
    "argv",
    [
        ["info", "{T}"],
        ["windows", "{T}", "--budget", "150W"],
        ["info", "{T}", "--json"],
        ["oversub", "{T}:2", "--nameplate", "400W"],
    ],
    ids=lambda a: a[0],
)
def test_text_from_data_is_shown_never_obeyed(
    cli: Cli, hostile_trace: Path, argv: list[str]
) -> None:
    r = cli(*[a.replace("{T}", str(hostile_trace)) for a in argv])
    assert r.exit_code == 0, r.stderr
    shown = r.stdout + r.stderr
    assert "\x1b" not in shown and "\x07" not in shown
    if argv == ["info", "{T}"]:
        assert visible("evil\x1b[2J") in shown and "[red]x[/red][/]" in shown


def test_visible_writes_out_every_control_character() -> None:
    assert visible("a\x1b[2Jb\x07c\x9bd\te\nf") == "a\\x1b[2Jb\\x07c\\x9bd\te\nf"
    assert visible("H100 · 700 W") == "H100 · 700 W"


def test_a_terminated_import_cleans_up_as_an_interrupted_one(tmp_path: Path) -> None:
    """SIGTERM by PID in the middle of a streamed import: one line, exit 143, and neither
    the output's temp file nor the parts folder is left."""
    import subprocess
    import sys
    import time

    log = tmp_path / "big.csv"
    with open(log, "w") as fh:
        fh.write("timestamp, index, power.draw [W]\n")
        for k in range(300_000):
            ms = 100 * k
            h, m, sec = ms // 3_600_000 % 24, ms // 60000 % 60, ms // 1000 % 60
            stamp = f"2026/01/05 {h:02d}:{m:02d}:{sec:02d}"
            fh.writelines(
                f"{stamp}.{ms % 1000:03d}, {g}, {200 + g + k % 7}.00 W\n" for g in range(4)
            )
    out = tmp_path / "out" / "x.parquet"
    exe = Path(sys.executable).with_name("powerkit")
    cmd = [str(exe), "import", str(log), "--stream", "--tz", "UTC", "--out", str(out)]
    child = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    parts = out.with_name(".x.parquet.smi.parts")
    deadline = time.monotonic() + 60
    while not parts.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert child.poll() is None, "the import ended before it could be terminated"
    child.terminate()
    _, err = child.communicate(timeout=60)
    assert child.returncode == 143, err
    assert err.strip().splitlines() == ["terminated: stopped by SIGTERM"]
    assert sorted(p.name for p in out.parent.iterdir()) == []


@pytest.mark.parametrize("stream", [True, False])
def test_an_import_that_fills_the_disk_is_one_line(tmp_path: Path, stream: bool) -> None:
    """Out of space while writing (a file-size limit stands in for a full disk: EFBIG): one
    line naming the output, exit 2, nothing left behind."""
    import resource
    import signal
    import subprocess
    import sys

    log = tmp_path / "smi.csv"
    rows = (
        f"2026/01/05 10:{k // 600:02d}:{k // 10 % 60:02d}.{k % 10}00, 0, "
        f"{100 + k * 7919 % 400}.{k * 31 % 100:02d} W"
        for k in range(30_000)
    )
    log.write_text("timestamp, index, power.draw [W]\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out" / "x.parquet"

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4_000, 4_000))

    exe = Path(sys.executable).with_name("powerkit")
    cmd = [str(exe), "import", str(log), "--tz", "UTC", "--out", str(out)]
    r = subprocess.run(
        [*cmd, *(["--stream"] if stream else [])],
        preexec_fn=small_files,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: {out}: no space left on the device (or over the file size limit) while it "
        "was written; nothing was replaced"
    ]
    assert sorted(out.parent.iterdir()) == []


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("lost_share", 5.0, "runs[0].lost_share 5.0 is not a share from 0 to 1"),
        ("limit_w", 0, "runs[0].limit_w 0.0 is not a positive number"),
        ("over_limit_share", -1, "runs[0].over_limit_share -1.0 is not a share from 0 to 1"),
    ],
)
def test_econ_never_prices_a_tampered_cap_document(
    cli: Cli, tmp_path: Path, trace: Path, field: str, value: float, said: str
) -> None:
    import json

    fleet = tmp_path / "fleet.json"
    r = cli("oversub", f"{trace}:4", "--json")
    assert r.exit_code == 0, r.stderr
    fleet.write_text(r.stdout)
    capped = tmp_path / "cap.json"
    r = cli("cap", f"{trace}:4", "--ratios", "1.5", "--policy", "uniform", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    doc["runs"][0][field] = value
    capped.write_text(json.dumps(doc))
    argv = ["econ", "--oversub", fleet, "--cap", capped, "--gpus", "64", "--gpu-tdp", "400W"]
    assert said in _one_error(cli(*argv))


def test_repeated_rows_in_a_parquet_are_refused_not_counted_twice(
    cli: Cli, tmp_path: Path, trace: Path
) -> None:
    """A Parquet file from elsewhere holding a GPU's time twice: every analysis and import
    refuse it in one line (a text log's repeats always were), nothing is written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(trace)
    dup = tmp_path / "dup.parquet"
    pq.write_table(pa.concat_tables([table, table.slice(5, 3)]).replace_schema_metadata(None), dup)
    for argv in (
        ["info", dup],
        ["windows", dup, "--budget", "150W"],
        ["oversub", f"{dup}:2", "--nameplate", "400W"],
    ):
        r = cli(*argv)
        last = r.stderr.strip().splitlines()[-1]  # (oversub says what it composes first)
        assert r.exit_code == 2 and last.startswith(f"error: {dup}: 3 sample(s) repeat a time")
    out = tmp_path / "out.parquet"
    line = _one_error(cli("import", dup, "--out", out))
    assert line.startswith(f"error: {dup}: 3 sample(s) repeat") and not out.exists()
    series = tmp_path / "two.parquet"  # the next series starting at the last one's end: fine
    pq.write_table(table, series)
    assert cli("import", series, "--out", tmp_path / "ok.parquet").exit_code == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["cap", "{T}:4", "--ratios", "1,,2", "--policy", "uniform"],
        ["cap", "{T}:4", "--ratios", "1,2,", "--policy", "uniform"],
        ["top", "--backend", "sim", "--once", "--duration", ""],
        ["record", "--backend", "sim", "--duration", "", "--out", "{O}"],
        ["top", "--backend", "sim", "--once", "--gpus", "0,,1"],
        ["cap", "{T}:4", "--limit", "80%", "--policy", "uniform,,pfi"],
        ["windows", "{T}", "--budget", "300W", "--windows", "1s,,5m"],
        ["info", "{T}", "--hosts", "a,,b"],
        ["utility", "{T}:2", "--site-mw", "1", "--mitigate", "floor:60%,"],
        ["control", "eval", "--policy", "{Y}", "--arms", "ppo,,static_safe"],
        ["pfi", "allocate", "--jobs", "{J}", "--cut", "10%,,20%"],
        ["pfi", "allocate", "--jobs", "{J}", "--cut", "10%", "--policies", "equal,"],
    ],
    ids=lambda a: " ".join(a),
)
def test_an_empty_value_is_refused_never_dropped(
    cli: Cli, tmp_path: Path, trace: Path, policy: Path, argv: list[str]
) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job,cap_w,power_w,tokens_per_s\na,300,290,100\na,,400,120\n")
    swap = {"{T}": trace, "{O}": tmp_path / "o.parquet", "{Y}": policy, "{J}": jobs}
    args = [a for a in argv]
    for key, value in swap.items():
        args = [a.replace(key, str(value)) for a in args]
    line = _one_error(cli(*args))
    assert "empty item" in line or "is not a duration" in line, line


def test_a_breaker_rated_above_the_feed(cli: Cli, tmp_path: Path, trace: Path) -> None:
    """The bundled curve's comment says a continuous load is rating = "125%": it is read."""
    bundled = Path(__file__).resolve().parents[1] / "powerkit/data/breakers/iec60898-1-type-c.toml"
    text = bundled.read_text()
    assert 'rating = "125%"' in text
    curve = tmp_path / "continuous.toml"
    curve.write_text(text.replace('rating = "100%"', 'rating = "125%"'))
    r = cli("cap", f"{trace}:4", "--ratios", "1.5", "--policy", "uniform", "--breaker", curve)
    assert r.exit_code == 0, r.stderr
    curve.write_text(text.replace('rating = "100%"', 'rating = "-5%"'))
    assert "rating '-5%'" in _one_error(
        cli("cap", f"{trace}:4", "--ratios", "1.5", "--policy", "uniform", "--breaker", curve)
    )


def test_an_event_past_the_horizon_is_refused(cli: Cli, trace: Path) -> None:
    argv = ["cap", f"{trace}:4", "--limit", "80%", "--policy", "uniform"]
    line = _one_error(cli(*argv, "--event", "start=+1m,cut=20%,for=100h"))
    assert "ends after the fleet's horizon (5m); for= at most 4m" in line
    assert cli(*argv, "--event", "start=+1m,cut=20%,for=4m").exit_code == 0


def test_a_grid_given_is_not_called_the_traces(cli: Cli, trace: Path) -> None:
    r = cli("windows", trace, "--budget", "300W", "--grid", "1h")
    assert r.exit_code == 0, r.stderr
    assert "on the --grid 1h grid" in r.stderr and "sampling interval" not in r.stderr


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        ("a,1e300,290,100,700", "row 2: cap_w 1e+300 is more than any GPU draws"),
        ("a,300,1e300,100,700", "row 2: power_w 1e+300 is more than any GPU draws"),
        ("a,300,290,100,NaN", "row 2: nameplate_w must be a positive number"),
        ("a,300,290,100,700\na,300,290,100,700", "row 3 repeats row 2 (the same value in every"),
        ("a,,400,120,700", "row 3 repeats row 2"),  # (the uncapped row, copied)
    ],
)
def test_a_jobs_table_with_impossible_figures(
    cli: Cli, tmp_path: Path, trace: Path, cells: str, said: str
) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(f"job,cap_w,power_w,tokens_per_s,nameplate_w\n{cells}\na,,400,120,700\n")
    argv = ["cap", f"{trace}:4", "--limit", "80%", "--jobs", jobs, "--assign", f"{trace}=a"]
    assert said in _one_error(cli(*argv))


def test_repeats_of_a_run_are_kept_and_a_copied_row_is_not(tmp_path: Path) -> None:
    """Two runs at one cap that differ are repeats (averaged); numbered repeats must differ in
    their number."""
    from powerkit.pfi.curves import load_curves

    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job,cap_w,power_w,tokens_per_s\na,300,290,100\na,300,280,90\na,,400,120\n")
    (curve,) = load_curves([jobs])
    assert curve.has_repeats and curve.points()[0].power_w == 285
    jobs.write_text("job,cap_w,power_w,tokens_per_s,repeat\na,300,290,100,1\na,300,280,90,1\n")
    with pytest.raises(
        BadInputError, match=r"row 3 repeats row 2 \(the same job, cap_w and repeat"
    ):
        load_curves([jobs])


def test_power_unit_is_refused_where_power_is_watts(cli: Cli, tmp_path: Path, trace: Path) -> None:
    """--power-unit mW on a Parquet trace or a Prometheus server: said, never ignored."""
    line = _one_error(cli("info", trace, "--power-unit", "mW"))
    assert "--power-unit mW applies to text logs" in line and "parquet" in line
    out = tmp_path / "p.parquet"
    argv = ["import", "prometheus+http://127.0.0.1:9/", "--power-unit", "mW", "--out", out]
    assert "--power-unit mW applies to text logs" in _one_error(cli(*argv))


def test_a_json_document_on_one_line_over_128_kb_is_read(tmp_path: Path) -> None:
    """Every document powerkit reads back (a step plan, an oversub result) goes through
    load_json: one written on one line is read as the same document indented is; a text
    input's lines stay bounded."""
    import json

    from powerkit.core.inputs import load_json, read_text_input

    doc = {"steps": [{"name": f"step {i}", "start_s": i * 0.5} for i in range(10_000)]}
    one = tmp_path / "plan.json"
    one.write_text(json.dumps(doc))
    assert len(one.read_text()) > 128 * 1024 and "\n" not in one.read_text()
    assert load_json(one) == doc
    text = tmp_path / "log.csv"
    text.write_text("a," + "x" * 200_000 + "\n")
    with pytest.raises(BadInputError, match="line 1 is over 128 KB long"):
        read_text_input(text)


def test_a_top_window_too_long_to_keep_is_refused(cli: Cli) -> None:
    line = _one_error(cli("top", "--backend", "sim", "--once", "--windows", "1e12s"))
    assert "at most 200,000 cells of the 500ms grid" in line


def test_a_class_is_one_of_four_digits(cli: Cli, trace: Path) -> None:
    argv = ["cap", f"{trace}:4", "--limit", "80%", "--classes", "job0=²"]
    assert "--classes job0=²: a class is 0 (the highest) to 3" in _one_error(cli(*argv))


@pytest.mark.parametrize("cooling", ["1e306", "1e-300"])
def test_a_breaker_cooling_time_out_of_range(
    cli: Cli, tmp_path: Path, trace: Path, cooling: str
) -> None:
    bundled = Path(__file__).resolve().parents[1] / "powerkit/data/breakers/iec60898-1-type-c.toml"
    curve = tmp_path / "curve.toml"
    curve.write_text(bundled.read_text().replace("cooling_s = 600", f"cooling_s = {cooling}"))
    argv = ["cap", f"{trace}:4", "--ratios", "1.5", "--policy", "uniform", "--breaker", curve]
    assert "cooling_s" in _one_error(cli(*argv))


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('gpus = "many"', "gpus = 'many': a whole number of GPUs, at least 1"),
        ("gpus = 1e400", "gpus = inf: a whole number of GPUs"),
        ("gpus = [1, 2]", "gpus = [1, 2]: a whole number of GPUs"),
        ("gpus = true", "gpus = True: a whole number of GPUs"),
        ("gpus = 0", "gpus = 0: a whole number of GPUs, at least 1"),
        ("gpus = 10\ncap = 5", "cap = 5: a file name, in quotes"),
        ("gpus = 10\nprice = {a = 1}", "price = {'a': 1}: a number or a quantity"),
    ],
)
def test_an_econ_config_value_of_the_wrong_kind(
    cli: Cli, tmp_path: Path, trace: Path, line: str, said: str
) -> None:
    fleet = tmp_path / "fleet.json"
    fleet.write_text(cli("oversub", f"{trace}:2", "--json").stdout)
    config = tmp_path / "site.toml"
    config.write_text(f'gpu_tdp = "700W"\n{line}\n')
    said_now = _one_error(cli("econ", "--config", config, "--oversub", fleet))
    assert said_now.startswith(f"error: {config}: {said}"), said_now


def _retold(policy: Path, out: Path, **train: object) -> Path:
    """``policy`` with its header's training record changed: what a hand-edited file holds."""
    import json

    import numpy as np

    with np.load(policy) as data:
        arrays = dict(data)
    header = json.loads(str(arrays["header"]))
    header["train"].update(train)
    arrays["header"] = np.array(json.dumps(header))
    with out.open("wb") as fh:
        np.savez(fh, **arrays)
    return out


@pytest.mark.parametrize(
    ("train", "said"),
    [
        (
            {"env": "trace"},
            "a replayed trace's policy with the simulator's observation or no trace named",
        ),
        (
            {"env": "trace", "trace": "t.parquet", "response": "s.parquet"},
            "a replayed trace's policy with the simulator's observation or no trace named",
        ),
        ({"knob": "magic"}, "knob 'magic', not one of group_size, concurrency, joint"),
        ({"preset": "nonesuch"}, "preset 'nonesuch', which the simulator does not have"),
        ({"knob": "joint", "settings": [{"group_size": "x"}]}, "joint settings"),
        ({"knob": "joint", "settings": [{"group_size": 8, "concurrency": 0}]}, "joint settings"),
        ({"knob": "joint", "settings": "all"}, "joint settings"),
    ],
)
def test_a_policy_whose_header_was_changed_is_refused(
    cli: Cli, tmp_path: Path, policy: Path, train: dict[str, object], said: str
) -> None:
    bad = _retold(policy, tmp_path / "p.npz", **train)
    line = _one_error(cli("control", "eval", "--policy", bad, "--horizon", "1h", "--seeds", "1"))
    assert line == f"error: {bad}: not a valid policy ({said})", line
