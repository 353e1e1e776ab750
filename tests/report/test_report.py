"""powerkit report: one offline HTML file with a captioned section per trace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from powerkit.control.evaluate import Episode, summarize
from powerkit.control.judge import EvalReport
from powerkit.report.control_section import control_section
from tests.conftest import Cli


def test_report_is_self_contained(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "t.parquet"
    assert (
        cli(
            "record", "--backend", "sim", "--preset", "a100-14b", "--duration", "5m", "--out", trace
        ).exit_code
        == 0
    )
    smi = tmp_path / "smi.csv"
    smi.write_text(
        "timestamp, index, power.draw [W]\n2024/04/05 06:17:19.635, 0, 58.67 W\n"
        "2024/04/05 06:17:20.135, 0, 60.00 W\n"
    )
    out = tmp_path / "r.html"
    result = cli(
        "report", "--trace", trace, "--trace", smi, "--title", "Node 7", "--out", out, "--force"
    )
    assert result.exit_code == 0, result.stderr
    html = out.read_text()
    assert html.count("<h2>Trace:") == 2
    assert "<title>Node 7</title>" in html
    assert html.count("<figcaption>") == 2
    assert "Power of each GPU over time" in html
    # opens offline: no script is fetched, the Plotly library is inlined exactly once
    assert "script src=" not in html
    assert html.count("* plotly.js v") == 1


def test_report_needs_an_input(cli: Cli, tmp_path: Path) -> None:
    result = cli("report", "--out", tmp_path / "r.html")
    assert result.exit_code == 2
    assert "nothing to report" in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_report_has_a_section_per_sweep(cli: Cli, tmp_path: Path) -> None:
    sweep = tmp_path / "s.parquet"
    args = ("--group-size", "4,8", "--concurrency", "2,4", "--point", "3m", "--warmup", "30s")
    assert cli("sweep", "--preset", "a100-7b", *args, "--out", sweep).exit_code == 0
    out = tmp_path / "r.html"
    result = cli("report", "--sweep", sweep, "--out", out, "--force")
    assert result.exit_code == 0, result.stderr
    html = out.read_text()
    assert html.count("<h2>Sweep: sim (a100-7b)</h2>") == 1
    assert "4 settings over group_size, concurrency" in html
    assert html.count("* plotly.js v") == 1


def test_report_refuses_a_missing_sweep_before_writing(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = cli("report", "--sweep", tmp_path / "none.parquet", "--out", out, "--force")
    assert result.exit_code == 2 and "no such file" in result.stderr
    assert not out.exists()
    trace = tmp_path / "t.parquet"
    trace.write_text("not a sweep")
    result = cli("report", "--sweep", trace, "--out", out, "--force")
    assert result.exit_code == 2 and "not a readable Parquet file" in result.stderr


def _arm(name: str, v05: float, tokens_per_mwh: float) -> dict[str, object]:
    stat = lambda m: {"mean": m, "std": 0.0}  # noqa: E731
    return {
        "arm": name,
        "violation_rate_0_5s": stat(v05),
        "violation_rate_30s": stat(v05 / 10),
        "tokens": stat(1e6),
        "tokens_per_mwh": stat(tokens_per_mwh),
        "wh_per_1k_tokens": stat(1e9 / tokens_per_mwh),
    }


def test_report_has_a_section_per_control_evaluation(cli: Cli, tmp_path: Path) -> None:
    doc = {
        "budget_w": 300.0,
        "env": "sim",
        "preset": "a100-7b",
        "knob": "group_size",
        "seeds": 2,
        "horizon_s": 7200.0,
        "target": 0.05,
        "static_safe_setting": 4,
        "arms": [_arm("ppo", 0.02, 9.1e9), _arm("uncontrolled", 0.25, 7.2e9)],
    }
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "r.html"
    result = cli("report", "--control", path, "--out", out, "--force")
    assert result.exit_code == 0, result.stderr
    html = out.read_text()
    assert "<h2>Controllers: a100-7b, knob group_size, budget 300 W</h2>" in html
    assert html.count("<figcaption>") == 2
    assert "25.00%" in html and "2.00%" in html  # the 0.5 s violation shares in the table
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"arms": [{"arm": "ppo"}]}))
    result = cli(
        "report", "--control", bad, "--trace", tmp_path / "none.parquet", "--out", out, "--force"
    )
    assert result.exit_code == 2 and "not a `control eval --json` document" in result.stderr


def test_report_has_a_section_per_oversub_result(cli: Cli, tmp_path: Path) -> None:
    from tests.documents import fleet_doc

    doc = fleet_doc(
        [("30s", 30.0, 0.5)],
        gpus=16,
        fleet_nameplate_w=6400.0,
        compose="random",
        draws=200,
        margin=0.05,
        capacity_w=3840.0,
        members=[{"path": "a.parquet", "count": 16, "gpus": 1}],
    )
    doc["windows"][0].update(
        safe_oversubscription=1.9, peak_fraction_p50=0.45, peak_fraction_max=0.55
    )
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "r.html"
    result = cli("report", "--oversub", path, "--out", out, "--force")
    assert result.exit_code == 0, result.stderr
    html = out.read_text()
    assert "<h2>Fleet: 16 GPUs, random composition</h2>" in html
    assert "a.parquet x16" in html and "<td>1.90</td>" in html
    assert html.count("<figcaption>") == 1
    path.write_text(json.dumps({"gpus": 16}))
    result = cli("report", "--oversub", path, "--out", out, "--force")
    assert result.exit_code == 2 and "not an `oversub --json` document" in result.stderr


def test_report_has_an_economics_section(cli: Cli, tmp_path: Path) -> None:
    from tests.econ.test_econ import FLEET

    fleet = tmp_path / "fleet.json"
    fleet.write_text(json.dumps(FLEET))
    r = cli("econ", "--oversub", fleet, "--gpus", "4096", "--gpu-tdp", "700W", "--json")
    assert r.exit_code == 0, r.stderr
    econ = tmp_path / "econ.json"
    econ.write_text(r.stdout)
    out = tmp_path / "r.html"
    result = cli("report", "--econ", econ, "--out", out, "--force")
    assert result.exit_code == 0, result.stderr
    html = out.read_text()
    assert "<h2>Economics: 4,096 GPUs</h2>" in html
    assert "Uptime Institute" in html and html.count("<figcaption>") == 1
    econ.write_text(json.dumps({"gpus": 1}))
    result = cli("report", "--econ", econ, "--out", out, "--force")
    assert result.exit_code == 2 and "not an `econ --json` document" in result.stderr


def test_report_has_a_carbon_section(cli: Cli, tmp_path: Path) -> None:
    from tests.econ.test_carbon import constant_trace, intensity_csv

    trace = constant_trace(tmp_path / "t.csv", "2026-03-01T23:30:00", 60)
    hourly = intensity_csv(
        tmp_path / "i.csv", {"2026-03-01T23:00:00Z": 100, "2026-03-02T00:00:00Z": 300}
    )
    r = cli("carbon", "--trace", trace, "--intensity-csv", hourly, "--json")
    assert r.exit_code == 0, r.stderr
    doc = tmp_path / "carbon.json"
    doc.write_text(r.stdout)
    out = tmp_path / "r.html"
    result = cli("report", "--carbon", doc, "--out", out, "--force")
    assert result.exit_code == 0, result.stderr
    html = out.read_text()
    assert "<h2>Carbon</h2>" in html and "0.072 kg CO2e" in html
    assert "against the same energy at the series&#x27; average" in html
    doc.write_text(json.dumps({"mode": "constant"}))
    result = cli("report", "--carbon", doc, "--out", out, "--force")
    assert result.exit_code == 2 and "not a `carbon --json` document" in result.stderr


def test_report_has_a_windows_section(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "t.parquet"
    assert (
        cli(
            "record", "--backend", "sim", "--preset", "a100-7b", "--duration", "10m", "--out", trace
        ).exit_code
        == 0
    )
    r = cli("windows", trace, "--budget", "250W", "--windows", "0.5s,30s", "--json")
    assert r.exit_code == 0, r.stderr
    judged = json.loads(r.stdout)
    doc = tmp_path / "windows.json"
    doc.write_text(r.stdout)
    out = tmp_path / "r.html"
    result = cli("report", "--windows", doc, "--trace", trace, "--out", out, "--force")
    assert result.exit_code == 0, result.stderr
    html = out.read_text()
    assert html.index("<h2>Trace:") < html.index(
        "<h2>Windows: budget 250 W (rolling, per gpu)</h2>"
    )
    rate = 100 * judged["windows"][0]["violation_rate"]
    assert f"<td>{rate:.3f}%</td>" in html
    doc.write_text(json.dumps({"budget_w": 250}))
    result = cli("report", "--windows", doc, "--out", out, "--force")
    assert result.exit_code == 2 and "not a `windows --json` document" in result.stderr


def test_plotly_js_inline_cdn_or_a_shared_file(cli: Cli, tmp_path: Path) -> None:
    trace = Path(__file__).resolve().parents[2] / "sample_data" / "a100-7b.parquet"
    inline, cdn = tmp_path / "inline.html", tmp_path / "cdn.html"
    assert cli("report", "--trace", trace, "--out", inline).exit_code == 0
    assert cli("report", "--trace", trace, "--out", cdn, "--plotly-js", "cdn").exit_code == 0
    assert "cdn.plot.ly" in cdn.read_text() and cdn.stat().st_size < inline.stat().st_size / 4
    shared = tmp_path / "js" / "plotly.min.js"
    pages = tmp_path / "pages"
    for name in ("a.html", "b.html"):
        r = cli("report", "--trace", trace, "--out", pages / name, "--plotly-js", shared)
        assert r.exit_code == 0, r.stderr
        text = (pages / name).read_text()
        assert '<script src="../js/plotly.min.js"' in text and "cdn.plot.ly" not in text
    assert shared.stat().st_size > 1_000_000


def _episode(arm: str, power_per_gpu: np.ndarray, gpus: int = 2) -> Episode:
    times = 100.0 + 0.5 * np.arange(power_per_gpu.size)
    return Episode(arm, 1000, 0.0, 0.0, 1.0, 1.0, [], times, power_per_gpu * gpus, gpus)


def test_control_section_draws_a_panel_per_arm_and_the_worst_hour() -> None:
    hours = 3
    calm = np.full(hours * 7200, 200.0)
    burst = calm.copy()
    burst[7200 + 600 : 7200 + 1800] = 400.0  # 10 minutes over the 300 W budget, in hour 1
    episodes = [_episode("ppo", calm), _episode("uncontrolled", burst)]
    report = EvalReport(
        budget_w=300.0,
        env="sim",
        preset="a100-7b",
        knob="group_size",
        seeds=1,
        horizon_s=hours * 3600.0,
        target=0.05,
        static_safe=4,
        arms=summarize(episodes),
        episodes=episodes,
    )
    section = control_section(report, gpus=2)
    whole, zoom = (f.figure for f in section.figures)
    # one panel per arm, all on one power axis
    assert [a.title.text for a in whole.select_yaxes()] == ["W per GPU"] * 2
    assert all(a.matches == "y" for a in whole.select_yaxes())
    assert [t.text.split(":")[0] for t in whole.layout.annotations] == ["ppo", "uncontrolled"]
    # the trailing 30 s mean (per GPU, not summed): 200 W throughout for ppo, 400 W in the burst
    ppo_line, unc_line = whole.data
    assert np.nanmax(ppo_line.y) == pytest.approx(200.0)
    assert np.nanmax(unc_line.y) == pytest.approx(400.0)
    # the zoom is the hour with the burst, raw 0.5 s and the 30 s mean per arm
    assert "hour 1-2 h" in section.figures[1].caption
    assert len(zoom.data) == 4 and zoom.data[3].x.max() < 60
    assert np.nanmax(zoom.data[2].y) == pytest.approx(400.0)
    assert zoom.data[1].line.color == ppo_line.line.color  # an arm keeps its colour


def test_control_section_of_a_short_run_has_no_zoom() -> None:
    episodes = [_episode("ppo", np.full(3600, 250.0))]
    report = EvalReport(
        300.0, "sim", "a100-7b", "group_size", 1, 1800.0, 0.05, 4, summarize(episodes), episodes
    )
    assert len(control_section(report, gpus=2).figures) == 1


def test_trace_figure_draws_the_shape_of_a_trace_of_any_length(tmp_path: Path) -> None:
    """A panel per GPU, each a mean line in its min-max band, decimated to at most 1,500
    buckets over the whole trace whatever its length (a round bucket length); the nameplate
    and a budget drawn as lines in every panel, the buckets over the budget shaded; more GPUs
    than panels draw as one panel of their mean and range."""
    from datetime import datetime, timedelta

    from powerkit.analysis.info import trace_info
    from powerkit.analysis.windows import windowed_violations
    from powerkit.core.units import parse_power
    from powerkit.report.trace_section import (
        MAX_PANELS,
        power_over_time,
        trace_section,
        violation_buckets,
    )
    from powerkit.trace import ImportOptions, read_trace

    log = tmp_path / "two.csv"
    rows = [
        f"{1767607200 + 0.1 * k:.1f},{g},{200 + 10 * g + (150 if 3000 <= k < 3600 else 0)}"
        for k in range(36_000)
        for g in range(2)
    ]
    log.write_text("ts,gpu,power_w\n" + "\n".join(rows) + "\n")
    trace = read_trace(log, ImportOptions(nameplate_w=400.0))
    judged = windowed_violations(trace, parse_power("300W"), [0.5, 30.0])
    section = trace_section(trace, judged)
    figure = section.figures[0].figure
    means = [t for t in figure.data if t.fill is None and t.line.width and t.line.width > 0]
    assert [t.name for t in means] == ["two:0", "two:1"]
    assert all(len(t.x) <= 1500 for t in figure.data)
    assert "in 5s buckets" in section.figures[0].caption  # 1 h: 3,600 s / 1,500 -> 5 s
    bands = [t for t in figure.data if t.fill == "tonexty"]
    assert len(bands) == 2
    lines = [s for s in figure.layout.shapes if s.type == "line"]
    assert sorted({s.y0 for s in lines}) == [300.0, 400.0] and len(lines) == 4
    shaded = [s for s in figure.layout.shapes if s.type == "rect"]
    assert len(shaded) == 1  # the one minute at +150 W: one run of buckets
    start = datetime(2026, 1, 5, 10, 5)  # (1767607200 + 300 s, on the UTC wall clock)
    assert (shaded[0].x0, shaded[0].x1) == (start, start + timedelta(seconds=60))
    caption = section.figures[0].caption
    assert "red, the budget of 300 W, the buckets holding a 500ms window over it" in caption
    _, marked = violation_buckets(trace, judged, 5.0)
    assert len(marked) == 12 and judged.windows[0].violations == 2 * 120  # 2 GPUs x 60 s / 0.5 s
    bare = trace_section(read_trace(log)).figures[0]
    assert "dashed" not in bare.caption and "budget" not in bare.caption
    wide = tmp_path / "wide.csv"
    n = MAX_PANELS + 1
    rows = [f"{1767607200 + 0.5 * k},{g},{100 + g}" for k in range(40) for g in range(n)]
    wide.write_text("ts,gpu,power_w\n" + "\n".join(rows) + "\n")
    fleet = read_trace(wide)
    drawn = power_over_time(fleet, trace_info(fleet))
    assert [t.name for t in drawn.data if t.fill is None and t.line.width] == [f"mean of {n} GPUs"]


def test_the_budget_is_drawn_on_the_trace_it_judged(cli: Cli, tmp_path: Path) -> None:
    judged = tmp_path / "w.json"
    result = cli("windows", "sample_data/a100-72b-tp4.parquet", "--budget", "237.5W", "--json")
    judged.write_text(result.stdout)
    page = tmp_path / "r.html"
    result = cli(
        "report",
        "--trace",
        "sample_data/a100-7b.parquet",
        "--trace",
        "sample_data/a100-72b-tp4.parquet",
        "--windows",
        judged,
        "--out",
        page,
    )
    assert result.exit_code == 0, result.stderr
    assert page.read_text().count("red, the budget of 237.5 W") == 1


#: docs/report.md's words for each kind of section
_SECTION_WORDS = {
    "traces": "trace",
    "windows": "windows",
    "fleets": "oversub",
    "capping": "cap",
    "sweeps": "sweep",
    "controllers": "control",
    "PFI": "pfi",
    "allocations": "allocation",
    "energy bloat": "bloat",
    "utility": "utility",
    "economics": "econ",
    "carbon": "carbon",
    "jobs": "jobs",
    "curtailment events": "event",
}


def test_report_md_gives_the_order_the_page_has(cli: Cli, tmp_path: Path) -> None:
    import re

    from powerkit.report.job import INPUTS
    from tests.documents import arm, eval_doc, fleet_doc

    text = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text()
    sentence = re.search(r"Sections come in this order: ([^(]+)\(", text)
    assert sentence is not None
    words = [w.strip() for w in " ".join(sentence[1].split()).split(",")]
    assert [_SECTION_WORDS[w] for w in words] == list(INPUTS)
    # and the page follows it: given in another order, a control evaluation, a fleet and a
    # trace come out trace, fleet, controllers
    evaluation, fleet = tmp_path / "eval.json", tmp_path / "fleet.json"
    evaluation.write_text(json.dumps(eval_doc([arm("ppo", 0.02, 9e9)], horizon_s=3600.0)))
    fleet.write_text(json.dumps(fleet_doc([("30s", 30.0, 0.5)])))
    out = tmp_path / "r.html"
    given = ("--control", evaluation, "--oversub", fleet, "--trace", "sample_data/a100-7b.parquet")
    result = cli("report", *given, "--out", out)
    assert result.exit_code == 0, result.stderr
    heads = re.findall(r"<h2>([^:<]+)", out.read_text())
    assert heads == ["Trace", "Fleet", "Controllers"]
