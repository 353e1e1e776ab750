"""The figures in docs/, drawn by the program's own models: ``python docs/figures.py`` writes
each anew (plain SVG, no plotting library needed to read it); tests/test_docs_figures.py fails
when one differs from what this script draws now."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"

_W, _H, _LEFT, _TOP, _RIGHT, _BOTTOM = 900, 360, 60, 40, 20, 50
_GREY, _BLUE, _ORANGE = "#9aa0a6", "#1f77b4", "#ff7f0e"

#: a line: (name, colour, stroke width, times in s, values in W)
Line = tuple[str, str, float, np.ndarray, np.ndarray]


def _path(points: list[tuple[float, float]]) -> str:
    return "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in points)


def _chart(
    title: str,
    span_s: float,
    lines: list[Line],
    band: tuple[str, np.ndarray, np.ndarray, np.ndarray] | None = None,
    level: tuple[str, float] | None = None,
) -> str:
    """An SVG chart of ``lines`` over ``span_s`` seconds, with an optional shaded ``band``
    (name, times, low, high) and a horizontal ``level`` (name, W)."""
    values = [v for *_, v in lines] + ([band[2], band[3]] if band else [])
    values += [np.array([level[1]])] if level else []
    low = 50 * np.floor(min(float(np.min(v)) for v in values) / 50)
    high = 50 * np.ceil(max(float(np.max(v)) for v in values) / 50)

    def x(s: float) -> float:
        return _LEFT + (_W - _LEFT - _RIGHT) * s / span_s

    def y(w: float) -> float:
        return _TOP + (_H - _TOP - _BOTTOM) * (1 - (w - low) / (high - low))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{_W}" height="{_H}" fill="white"/>',
        f'<text x="{_LEFT}" y="20" font-size="14">{title}</text>',
    ]
    for w in np.arange(low, high + 1, 50):
        out.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(w):.1f}" y2="{y(w):.1f}" '
            'stroke="#eeeeee"/>'
            f'<text x="{_LEFT - 6}" y="{y(w) + 4:.1f}" text-anchor="end">{w:.0f}</text>'
        )
    step = max(1, int(span_s // 10))
    for s in range(0, int(span_s) + 1, step):
        out.append(f'<text x="{x(s):.1f}" y="{_H - _BOTTOM + 16}" text-anchor="middle">{s}</text>')
    out.append(
        f'<text x="{(_LEFT + _W) / 2}" y="{_H - 12}" text-anchor="middle">seconds</text>'
        f'<text x="14" y="{(_TOP + _H - _BOTTOM) / 2}" '
        f'transform="rotate(-90 14 {(_TOP + _H - _BOTTOM) / 2})" text-anchor="middle">W</text>'
    )
    legend: list[tuple[str, str]] = []
    if band is not None:
        name, t, lo, hi = band
        edge = [(x(a), y(b)) for a, b in zip(t, hi, strict=True)]
        edge += [(x(a), y(b)) for a, b in zip(t[::-1], lo[::-1], strict=True)]
        out.append(
            f'<path d="{_path(edge)} Z" fill="{_ORANGE}" fill-opacity="0.22" stroke="none"/>'
        )
        legend.append((name, "#ffd2a8"))
    for name, colour, width, t, v in lines:
        out.append(
            f'<path d="{_path([(x(a), y(b)) for a, b in zip(t, v, strict=True)])}" '
            f'fill="none" stroke="{colour}" stroke-width="{width}"/>'
        )
        legend.append((name, colour))
    if level is not None:
        out.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(level[1]):.1f}" y2="{y(level[1]):.1f}" '
            'stroke="#d62728" stroke-dasharray="6 4"/>'
        )
        legend.append((level[0], "#d62728"))
    for k, (name, colour) in enumerate(legend):
        lx = _LEFT + 10 + 210 * k
        out.append(
            f'<line x1="{lx}" x2="{lx + 24}" y1="{_TOP - 6}" y2="{_TOP - 6}" '
            f'stroke="{colour}" stroke-width="3"/>'
            f'<text x="{lx + 30}" y="{_TOP - 2}">{name}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _truth(preset: str, seed: int, until_s: float) -> object:
    from powerkit.sensors.sense import TRUTH_STEP_S, Truth
    from powerkit.sim.model import GrpoSim
    from powerkit.sim.presets import get_preset

    grid = np.arange(round(until_s / TRUTH_STEP_S) + 1) * TRUTH_STEP_S
    return Truth(0.0, TRUTH_STEP_S, GrpoSim(get_preset(preset), seed=seed).sample(grid).power_w)


def trust_svg(preset: str = "h100-8b", seed: int = 0, start_s: float = 120.0) -> str:
    """20 s of a simulated job: its true power, and what two sensors read of it every 100 ms."""
    from powerkit.sensors import SENSORS
    from powerkit.sensors.sense import sense

    span = 20.0
    truth = _truth(preset, seed, start_s + span)
    keep = truth.t >= start_s  # type: ignore[attr-defined]
    lines: list[Line] = [
        (
            "true power (every 5 ms)",
            _GREY,
            0.8,
            truth.t[keep] - start_s,  # type: ignore[attr-defined]
            truth.power[0][keep],  # type: ignore[attr-defined]
        )
    ]
    reads = np.arange(start_s, start_s + span + 1e-9, 0.1)
    for name, colour in (("average_1s", _BLUE), ("a100-power.draw", _ORANGE)):
        got = sense(SENSORS[name], truth, reads, phase_s=0.03)[0]  # type: ignore[arg-type]
        # (a logger's reading holds until the next: drawn as steps)
        lines.append((name, colour, 1.6, np.repeat(reads - start_s, 2)[1:], np.repeat(got, 2)[:-1]))
    return _chart(
        f"{preset} (simulated), seed {seed}: true power and two sensors' readings every 100 ms",
        span,
        lines,
    )


def trust_windows_svg(preset: str = "a100-7b", seed: int = 0, start_s: float = 380.0) -> str:
    """60 s of 0.5 s window means of a simulated job: the true means, the means of what the
    A100's part-time sensor read every 100 ms, and where each sensed mean's truth lies."""
    from powerkit.cells.rolling import PrefixSums, rolling, rolling_error_w
    from powerkit.sensors import SENSORS
    from powerkit.sensors.sense import sense

    span, grid, n, budget = 60.0, 0.1, 5, 300.0
    truth = _truth(preset, seed, start_s + span)
    reads = np.arange(start_s - 1.0, start_s + span - 1e-9, grid)
    sensor = SENSORS["a100-power.draw"]
    cells = sense(sensor, truth, reads, phase_s=0.03)[0]  # type: ignore[arg-type]
    true_cells = truth.mean(reads, reads + grid)[0]  # type: ignore[attr-defined]
    present = np.ones(cells.size, dtype=bool)
    means = rolling(PrefixSums(cells, present), n, grid).means
    true_means = rolling(PrefixSums(true_cells, present), n, grid).means
    below, above = rolling_error_w(sensor, cells, present, n, grid)
    t = reads[n - 1 :] + grid - start_s  # (a window is drawn at its end)
    keep = t >= 0
    return _chart(
        f"{preset} (simulated), seed {seed}: 0.5 s window means against a {budget:.0f} W budget",
        span,
        [
            ("true 0.5 s means", _GREY, 1.2, t[keep], true_means[keep]),
            ("a100-power.draw's 0.5 s means", _ORANGE, 1.4, t[keep], means[keep]),
        ],
        band=(
            "where the truth lies",
            t[keep],
            (means - below)[keep],
            (means + above)[keep],
        ),
        level=(f"budget {budget:.0f} W", budget),
    )


#: file name -> the function that draws it
DRAWN: dict[str, Callable[[], str]] = {
    "trust.svg": trust_svg,
    "trust-windows.svg": trust_windows_svg,
}


def main() -> None:
    """Write every figure anew."""
    FIGURES.mkdir(exist_ok=True)
    for name, draw in DRAWN.items():
        (FIGURES / name).write_text(draw())
        print(f"wrote docs/figures/{name}", file=sys.stderr)


if __name__ == "__main__":
    main()
