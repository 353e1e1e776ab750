"""Tampered documents and implausible data: each refused with one line, never run silently.

Policies (NaN weights, a NaN or negative budget, a zip bomb, huge layers), bloat plans (NaN,
negative, zero, huge or null frequencies; wrong shapes; a billion stages), implausible power
(100 kW cells, 3e38 W, milliwatts under a [W] header), windows that are not whole cells,
token counts that go down, utility limits of infinity, formula cells in CSV outputs.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import Cli


def one_line(r: object) -> str:
    err = r.stderr.strip()  # type: ignore[attr-defined]
    assert r.exit_code == 2, err  # type: ignore[attr-defined]
    assert "internal error" not in err and "Traceback" not in err, err
    return err.splitlines()[-1]


def _rewrite(src: Path, dst: Path, change) -> Path:  # type: ignore[no-untyped-def]
    with np.load(src, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(str(arrays["header"]))
    change(arrays, header)
    arrays["header"] = np.array(json.dumps(header))
    with open(dst, "wb") as fh:
        np.savez(fh, **arrays)
    return dst


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("nan weight", lambda a, h: a["actor_0"].__setitem__((0, 0), np.nan), "NaN or infinite"),
        ("inf weight", lambda a, h: a["critic_1"].fill(np.inf), "NaN or infinite"),
        ("nan budget", lambda a, h: h["train"].__setitem__("budget_w", float("nan")), "budget"),
        ("negative budget", lambda a, h: h["train"].__setitem__("budget_w", -300.0), "budget"),
        ("target 2", lambda a, h: h["train"].__setitem__("target", 2.0), "target"),
        ("empty ladder", lambda a, h: h["train"].__setitem__("ladder", []), "ladder"),
        ("nan normalizer", lambda a, h: a["norm_var"].fill(np.nan), "normalizer"),
        ("huge layers", lambda a, h: h["config"].__setitem__("hidden", [4096] * 8), "weights"),
        ("wide layers", lambda a, h: h["config"].__setitem__("hidden", [10**6]), "layer sizes"),
    ],
)
def test_a_tampered_policy_is_refused(
    cli: Cli, tmp_path: Path, policy: Path, name: str, change: object, message: str
) -> None:
    bad = _rewrite(policy, tmp_path / "bad.npz", change)
    for args in (
        ("control", "eval", "--policy", bad, "--seeds", "1", "--horizon", "1h"),
        ("control", "run", "--policy", bad, "--backend", "sim", "--duration", "1m"),
    ):
        line = one_line(cli(*args))
        assert "bad.npz" in line and message in line, (name, line)


def test_a_zip_bomb_policy_is_refused_before_unpacking(cli: Cli, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.npy", b"\x00" * (200 * 1024 * 1024))  # 200 MB of zeros
    assert bomb.stat().st_size < 1_000_000
    line = one_line(cli("control", "eval", "--policy", bomb))
    assert "unpack to 209,715,200 bytes" in line


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[type-arg]
    folder = tmp_path_factory.mktemp("plan")
    cli = Cli()
    profile, out = folder / "p.csv", folder / "plan.json"
    r = cli("bloat", "profile", "--backend", "sim", "--preset", "a100-gpt3-pp4", "--out", profile)
    assert r.exit_code == 0, r.stderr
    r = cli("bloat", "plan", profile, "--stages", "4", "--microbatches", "4", "--out", out)
    assert r.exit_code == 0, r.stderr
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _tamper(doc: dict, path: str, value: object) -> dict:  # type: ignore[type-arg]
    doc = json.loads(json.dumps(doc))
    *keys, last = path.split(".")
    here = doc
    for k in keys:
        here = here[int(k)] if k.isdigit() else here[k]
    if last.isdigit():
        here[int(last)] = value
    else:
        here[last] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("frontier.0.frequencies.0", float("nan"), "frontier[0].frequencies[0]"),
        ("frontier.0.frequencies.0", -1410, "frontier[0].frequencies[0]"),
        ("frontier.0.frequencies.0", 0, "frontier[0].frequencies[0]"),
        ("frontier.0.frequencies.0", 1e300, "frontier[0].frequencies[0]"),
        ("frontier.0.frequencies.0", None, "frontier[0].frequencies[0]"),
        ("all_max.frequencies", [1410], "all_max.frequencies"),
        ("frontier", [], "frontier"),
        ("frontier", {"a": 1}, "frontier"),
        ("stages", 10**9, "stages"),
        ("microbatches", 10**9, "microbatches"),
        ("stages", "four", "stages"),
        ("schedule", "zigzag", "schedule"),
        ("idle_power_w", -5, "idle_power_w"),
        ("extrinsic.0.straggler", float("inf"), "extrinsic[0].straggler"),
        ("computations", [], "computations"),
        ("all_max", None, "all_max"),
        ("intrinsic", "none", "intrinsic"),
    ],
)
def test_a_tampered_plan_is_refused(
    cli: Cli,
    tmp_path: Path,
    plan: dict,
    path: str,
    value: object,
    message: str,  # type: ignore[type-arg]
) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps(_tamper(plan, path, value)))
    for args in (
        ("bloat", "run", "--plan", bad, "--preset", "a100-gpt3-pp4"),
        ("report", "--bloat", bad, "--out", tmp_path / "r.html"),
    ):
        line = one_line(cli(*args))
        assert "not a `bloat plan --out` document" in line and message in line, line
    assert not (tmp_path / "r.html").exists()


def _smi(path: Path, cells: list[str], header: str = "power.draw [W]") -> Path:
    lines = [f"timestamp, index, {header}"]
    lines += [f"2026/01/05 10:00:{k // 2:02d}.{5 * (k % 2)}00, 0, {c}" for k, c in enumerate(cells)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (["100.00 W", "100 kW", "101.00 W"], "contradicts the header's unit [W]"),
        (["100.00 W", "100 mW", "101.00 W"], "contradicts the header's unit [W]"),
        (["100.00 W", "3e38 W", "101.00 W"], "more than one GPU draws"),
        (["100.00 W", "1e30 W", "101.00 W"], "more than one GPU draws"),
        (["250000", "260000", "255000"], "milliwatts? give --power-unit mW"),
    ],
)
def test_implausible_power_is_a_bad_row(
    cli: Cli, tmp_path: Path, cells: list[str], message: str
) -> None:
    log = _smi(tmp_path / "smi.csv", cells)
    line = one_line(cli("import", log, "--tz", "UTC", "--out", tmp_path / "x.parquet"))
    assert "line 2" in line or "line 3" in line, line
    assert message in line, line
    assert not (tmp_path / "x.parquet").exists()


def test_milliwatts_read_with_their_unit(cli: Cli, tmp_path: Path) -> None:
    log = _smi(tmp_path / "smi.csv", ["250000", "260000", "255000"], header="power.draw")
    doc = cli.json("info", log, "--tz", "UTC", "--power-unit", "mW")
    assert doc["max_power_w"] == pytest.approx(260.0)
    r = cli("info", log, "--tz", "UTC", "--max-power", "300kW")
    assert r.exit_code == 0, r.stderr  # the user says 260 kW is plausible: so be it


def test_an_implausible_parquet_from_elsewhere_is_refused(cli: Cli, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "t.parquet"
    assert cli("record", "--backend", "sim", "--duration", "5m", "--out", src, "-q").exit_code == 0
    table = pq.read_table(src)
    power = table.column("power_w").to_numpy().copy()
    power[10] = 3e38
    kind = table.schema.field("power_w").type
    table = table.set_column(
        table.schema.get_field_index("power_w"), "power_w", pa.array(power, type=kind)
    )
    bad = tmp_path / "bad.parquet"
    pq.write_table(table, bad)
    line = one_line(cli("windows", bad, "--budget", "300W"))
    assert "host=sim gpu=0" in line and "more than one GPU draws" in line


def test_a_window_must_be_whole_cells(cli: Cli, tmp_path: Path) -> None:
    src = tmp_path / "t.parquet"
    assert cli("record", "--backend", "sim", "--duration", "5m", "--out", src, "-q").exit_code == 0
    line = one_line(cli("windows", src, "--budget", "300W", "--windows", "0.7s"))
    assert "use 500ms or 1s" in line
    line = one_line(cli("oversub", f"{src}:2", "--windows", "1.25s"))
    assert "use 1s or 1.5s" in line


def test_token_counts_that_go_down_are_refused(cli: Cli, tmp_path: Path) -> None:
    src = tmp_path / "t.parquet"
    assert cli("record", "--backend", "sim", "--duration", "5m", "--out", src, "-q").exit_code == 0
    steps = tmp_path / "steps.jsonl"
    t0 = 1_767_225_600
    steps.write_text(
        "\n".join(
            json.dumps({"ts": t0 + 60 * k, "step": k, "tokens": tok})
            for k, tok in enumerate([0, 1000, 10, 2000])
        )
        + "\n"
    )
    line = one_line(cli("energy", src, "--steps", steps))
    assert "steps.jsonl:3" in line and "tokens 10 is less than the 1000 before it" in line


def test_an_infinite_utility_limit_is_refused(cli: Cli, tmp_path: Path) -> None:
    src = tmp_path / "t.parquet"
    assert cli("record", "--backend", "sim", "--duration", "5m", "--out", src, "-q").exit_code == 0
    spec = tmp_path / "spec.toml"
    spec.write_text('[[rule]]\nmetric = "ramp"\ninterval_s = 1\nlimit_mw_per_s = inf\n')
    line = one_line(cli("utility", f"{src}:2", "--site-mw", "1", "--spec", spec))
    assert "rule 1" in line and "must be finite" in line


def test_an_oversub_document_the_readers_refuse_alike(cli: Cli, tmp_path: Path) -> None:
    from tests.documents import fleet_doc

    doc = fleet_doc(
        [("30s", 30.0, -0.4)], gpus=4, compose="random", fleet_nameplate_w=2800.0, margin=0.05
    )
    bad = tmp_path / "fleet.json"
    bad.write_text(json.dumps(doc))
    lines = [
        one_line(cli("econ", "--oversub", bad, "--gpus", "10", "--gpu-tdp", "700W")),
        one_line(cli("pilot", "--oversub", bad, "--site-mw", "20")),
        one_line(cli("report", "--oversub", bad, "--out", tmp_path / "r.html")),
    ]
    for line in lines:
        assert "windows[0].peak_fraction" in line, line


def test_curves_out_cells_never_start_a_formula(cli: Cli, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    rows = ["job,cap_w,power_w,tokens_per_s"]
    for job in ("=HYPERLINK(1)", "+1+1", "@SUM(A1)", "plain"):
        rows += [f'"{job}",,700,100', f'"{job}",500,520,90', f'"{job}",300,330,60']
    jobs.write_text("\n".join(rows) + "\n")
    out = tmp_path / "curves.csv"
    assert cli("pfi", "compute", jobs, "--curves-out", out, "--json").exit_code == 0
    cells = [line.split(",")[0] for line in out.read_text().splitlines()[1:]]
    assert all(not c.lstrip('"').startswith(("=", "+", "-", "@")) for c in cells), cells
    back = cli.json("pfi", "compute", out)  # read back, the names are the users' own
    names = {j["job"] for j in back["jobs"]}
    assert names == {"=HYPERLINK(1)", "+1+1", "@SUM(A1)", "plain"}


def test_a_bom_and_utf16_spec_are_read(cli: Cli, tmp_path: Path) -> None:
    src = tmp_path / "t.parquet"
    assert cli("record", "--backend", "sim", "--duration", "5m", "--out", src, "-q").exit_code == 0
    text = '[[rule]]\nmetric = "ramp"\ninterval_s = 1\nlimit_mw_per_s = 5\n'
    outputs = []
    for name, data in (
        ("plain", text.encode()),
        ("bom", b"\xef\xbb\xbf" + text.encode()),
        ("utf16", text.encode("utf-16")),
    ):
        spec = tmp_path / f"{name}.toml"
        spec.write_bytes(data)
        doc = cli.json("utility", f"{src}:2", "--site-mw", "1", "--spec", spec)
        outputs.append([r["value"] for r in doc["spec"]])
    assert outputs[0] == outputs[1] == outputs[2]


def test_a_ray_address_that_answers_nothing_is_refused_quickly(cli: Cli, tmp_path: Path) -> None:
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = tmp_path / "t.parquet"
    assert cli("record", "--backend", "sim", "--duration", "5m", "--out", src, "-q").exit_code == 0
    began = time.monotonic()
    line = one_line(cli("info", src, "--engine", "ray", "--address", f"127.0.0.1:{port}"))
    assert "nothing answers at" in line and time.monotonic() - began < 10
    line = one_line(cli("info", src, "--engine", "ray", "--address", ""))
    assert "--address ''" in line
