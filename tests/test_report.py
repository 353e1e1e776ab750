"""powerkit report: one offline HTML file with a captioned section per trace."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli


def test_report_is_self_contained(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "t.parquet"
    assert cli("record", "--preset", "a100-14b", "--duration", "5m", "--out", trace).exit_code == 0
    smi = tmp_path / "smi.csv"
    smi.write_text(
        "timestamp, index, power.draw [W]\n2024/04/05 06:17:19.635, 0, 58.67 W\n"
        "2024/04/05 06:17:20.135, 0, 60.00 W\n"
    )
    out = tmp_path / "r.html"
    result = cli("report", "--trace", trace, "--trace", smi, "--title", "Node 7", "--out", out)
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
