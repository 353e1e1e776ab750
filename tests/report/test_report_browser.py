"""The report in a real headless Chromium: it loads without console errors and every figure
draws. Skipped where Chromium is absent, except in CI (`.ci/run` installs Debian's package)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Cli

# Put before the page's own scripts: collects errors (console.error, uncaught exceptions), then
# after load writes what each Plotly root holds into the body for --dump-dom to carry out.
PROBE = """<script>
window.__errors = [];
const __consoleError = console.error;
console.error = (...a) => { window.__errors.push(a.map(String).join(" ")); __consoleError(...a); };
window.addEventListener("error", (e) => window.__errors.push("uncaught: " + e.message));
window.addEventListener("load", () => setTimeout(() => {
  const plots = [...document.querySelectorAll(".js-plotly-plot")].map((d) => {
    const layout = d._fullLayout || {}, given = d.layout || {};
    // the title the page gave (the full layout holds an editor's placeholder where none is)
    const title = (k) => ((given[k] || {}).title || {}).text;
    // numeric axes that show their ticks but say nothing of what (or in which unit) they count
    const untitled = Object.keys(layout).filter((k) => /^[xy]axis[0-9]*$/.test(k))
      .filter((k) => layout[k].type !== "category" && layout[k].showticklabels !== false)
      .filter((k) => !title(k));
    return {traces: (d._fullData || []).length, svg: d.querySelectorAll(".main-svg").length,
            untitled};
  });
  document.body.setAttribute("data-probe", JSON.stringify({errors: window.__errors, plots}));
}, 500));
</script>"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI; .ci/run installs it")
        pytest.skip("chromium is not installed")
    return found


FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000"]


def _assert_draws(browser: str, page: Path, figures: int) -> None:
    """Load ``page`` with the probe: no console error, ``figures`` plots each drawn."""
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text().replace("<head>", "<head>" + PROBE, 1))
    dom = subprocess.run(
        [browser, *FLAGS, "--dump-dom", probed.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    ).stdout
    match = re.search(r'data-probe="([^"]*)"', dom)
    assert match, "the page did not finish loading"
    probe = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert probe["errors"] == []
    assert len(probe["plots"]) == figures
    for plot in probe["plots"]:
        assert plot["traces"] >= 1 and plot["svg"] >= 1, plot
        assert plot["untitled"] == [], plot


@pytest.mark.slow
def test_report_renders_in_headless_chromium(cli: Cli, tmp_path: Path) -> None:
    browser = _chromium()
    trace, sweep = tmp_path / "t.parquet", tmp_path / "s.parquet"
    assert (
        cli(
            "record", "--backend", "sim", "--preset", "a100-14b", "--duration", "5m", "--out", trace
        ).exit_code
        == 0
    )
    args = ("--group-size", "4,8", "--concurrency", "2,4", "--point", "2m", "--warmup", "10s")
    assert cli("sweep", "--preset", "a100-7b", *args, "--out", sweep).exit_code == 0
    from tests.documents import arm, eval_doc, fleet_doc

    fleet = tmp_path / "fleet.json"
    fleet.write_text(
        json.dumps(
            fleet_doc(
                [("30s", 30.0, 0.5)],
                gpus=16,
                fleet_nameplate_w=6400.0,
                compose="random",
                draws=10,
                margin=0.05,
                capacity_w=3840.0,
                mean_fraction=None,
            )
        )
    )
    evaluation = tmp_path / "eval.json"
    arms = [arm("ppo", 0.02, 9e9), arm("uncontrolled", 0.2, 7e9)]
    evaluation.write_text(json.dumps(eval_doc(arms, horizon_s=3600.0)))
    econ = tmp_path / "econ.json"
    r = cli(
        "econ",
        "--oversub",
        fleet,
        "--gpus",
        "64",
        "--gpu-tdp",
        "700W",
        "--utilization",
        "50%",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    econ.write_text(r.stdout)
    r = cli("windows", trace, "--budget", "180W", "--windows", "0.5s,30s,5m", "--json")
    assert r.exit_code == 0, r.stderr
    judged = tmp_path / "windows.json"
    judged.write_text(r.stdout)
    r = cli("carbon", "--econ", econ, "--region", "world", "--json")
    assert r.exit_code == 0, r.stderr
    carbon = tmp_path / "carbon.json"
    carbon.write_text(r.stdout)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "job,cap_w,power_w,tokens_per_s\n"
        "a,,1000,100\na,700,700,85\na,500,500,60\n"
        "b,,900,50\nb,600,600,45\nb,400,420,38\n"
    )
    r = cli("pfi", "allocate", "--jobs", jobs, "--cut", "0%,20%,40%", "--workloads", "20", "--json")
    assert r.exit_code == 0, r.stderr
    allocation = tmp_path / "allocation.json"
    allocation.write_text(r.stdout)
    profile, plan = tmp_path / "profile.csv", tmp_path / "plan.json"
    assert cli("bloat", "profile", "--out", profile).exit_code == 0
    r = cli(
        "bloat",
        "plan",
        profile,
        "--stages",
        "4",
        "--microbatches",
        "4",
        "--points",
        "4",
        "--out",
        plan,
    )
    assert r.exit_code == 0, r.stderr
    fast = tmp_path / "fast.parquet"
    assert (
        cli(
            "record",
            "--backend",
            "sim",
            "--preset",
            "h200-dense-pretrain",
            "--duration",
            "3m",
            "--interval",
            "20ms",
            "--out",
            fast,
        ).exit_code
        == 0
    )
    r = cli(
        "utility",
        f"{fast}:16",
        "--site-mw",
        "10",
        "--spec",
        "swings-pct",
        "--mitigate",
        "storage:auto",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    grid_json = tmp_path / "grid.json"
    grid_json.write_text(r.stdout)
    page = tmp_path / "report.html"
    result = cli(
        "report",
        "--trace",
        trace,
        "--oversub",
        fleet,
        "--sweep",
        sweep,
        "--control",
        evaluation,
        "--econ",
        econ,
        "--carbon",
        carbon,
        "--windows",
        judged,
        "--pfi",
        jobs,
        "--allocation",
        allocation,
        "--bloat",
        plan,
        "--utility",
        grid_json,
        "--out",
        page,
    )
    assert result.exit_code == 0, result.stderr
    html = page.read_text()
    figures = html.count("<figcaption>")
    assert figures >= 17 and "Power flexibility (PFI)" in html and "Sharing a power cut" in html
    assert "Grid: 128 GPUs" in html
    assert "Energy bloat: 4 stages x 4 microbatches" in html
    _assert_draws(browser, page, figures)
    shot = tmp_path / "report.png"
    subprocess.run(
        [browser, *FLAGS, "--window-size=1280,3000", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    )
    assert shot.stat().st_size > 10_000


@pytest.mark.slow
def test_control_eval_page_renders_in_headless_chromium(cli: Cli, tmp_path: Path) -> None:
    browser = _chromium()
    policy = tmp_path / "policy.npz"
    r = cli(
        "control",
        "train",
        "--env",
        "sim",
        "--preset",
        "a100-7b",
        "--budget",
        "314.6W",
        "--knob",
        "group_size",
        "--steps",
        "50",
        "--out",
        policy,
    )
    assert r.exit_code == 0, r.stderr
    page = tmp_path / "eval.html"
    r = cli(
        "control",
        "eval",
        "--policy",
        policy,
        "--seeds",
        "1",
        "--horizon",
        "90m",
        "--arms",
        "uncontrolled,static_safe,ppo",
        "--html",
        page,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    html = page.read_text()
    # the whole run and the worst hour, each one panel per arm
    assert html.count("<figcaption>") == 2 and "one panel per arm" in html
    _assert_draws(browser, page, 2)


def _plot_pixels(browser: str, page: Path, shot: Path) -> tuple[float, float, int]:
    """Screenshot ``page`` and read its first plot area (Plotly's #E5ECF6 background, the
    panels stacked): (share of the area still background, share of its commonest other
    colour, pixels of the budget line's firebrick)."""
    import numpy as np
    from PIL import Image

    subprocess.run(
        [browser, *FLAGS, "--window-size=1280,1400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    )
    rgb = np.asarray(Image.open(shot).convert("RGB")).astype(np.int64)
    background = np.abs(rgb - [229, 236, 246]).sum(axis=2) <= 3
    rows = np.flatnonzero(background.sum(axis=1) > 200)
    cols = np.flatnonzero(background.sum(axis=0) > 200)
    area = rgb[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
    inside = background[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
    key = (area[..., 0] << 16) | (area[..., 1] << 8) | area[..., 2]
    other = key[~inside & (key != 0xFFFFFF)]
    commonest = np.unique(other, return_counts=True)[1].max() / key.size if other.size else 0.0
    firebrick = int((np.abs(area - [178, 34, 34]).sum(axis=2) <= 30).sum())
    return float(inside.mean()), float(commonest), firebrick


def test_the_trace_figure_shows_the_shape_of_an_hour(cli: Cli, tmp_path: Path) -> None:
    """A 1 h, 4-GPU, 100 ms trace (144,000 samples) in a real browser, looked at pixel by
    pixel: the plot is not a block of colour (more than a quarter of its area is still the
    plot's background, and no one colour covers more than a third of it), and the budget
    line is drawn when a windows report gives a budget, not otherwise."""
    browser = _chromium()
    trace = tmp_path / "hour.parquet"
    argv = ["record", "--backend", "sim", "--preset", "a100-72b-tp4", "--duration", "1h"]
    assert cli(*argv, "--interval", "100ms", "--out", trace, "-q").exit_code == 0
    judged = tmp_path / "windows.json"
    judged.write_text(cli("windows", trace, "--budget", "250W", "--json").stdout)
    plain, with_budget = tmp_path / "plain.html", tmp_path / "budget.html"
    assert cli("report", "--trace", trace, "--out", plain).exit_code == 0
    assert cli("report", "--trace", trace, "--windows", judged, "--out", with_budget).exit_code == 0
    for page, budget in ((plain, False), (with_budget, True)):
        background, commonest, line = _plot_pixels(browser, page, tmp_path / f"{page.stem}.png")
        assert background > 0.25, (page.name, background)
        assert commonest < 0.35, (page.name, commonest)
        assert (line > 1000) == budget, (page.name, line)
