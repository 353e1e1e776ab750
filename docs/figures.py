"""The figures in docs/, drawn by the program's own models: ``python docs/figures.py`` writes
each anew (plain SVG, no plotting library needed to read it); tests/test_docs_figures.py fails
when one differs from what this script draws now."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"

_W, _H, _LEFT, _TOP, _RIGHT, _BOTTOM = 900, 360, 60, 40, 20, 50
_COLOURS = {
    "true power (every 5 ms)": "#9aa0a6",
    "average_1s": "#1f77b4",
    "a100-power.draw": "#ff7f0e",
}


def _path(t: np.ndarray, p: np.ndarray, x: object, y: object) -> str:
    points = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in zip(t, p, strict=True))  # type: ignore[operator]
    return f"M{points.replace(' ', ' L')}"


def trust_svg(preset: str = "h100-8b", seed: int = 0, start_s: float = 120.0) -> str:
    """20 s of a simulated job: its true power, and what two sensors read of it every 100 ms."""
    from powerkit.sensors import SENSORS
    from powerkit.sensors.sense import TRUTH_STEP_S, Truth, sense
    from powerkit.sim.model import GrpoSim
    from powerkit.sim.presets import get_preset

    span = 20.0
    grid = np.arange(round((start_s + span) / TRUTH_STEP_S) + 1) * TRUTH_STEP_S
    truth = Truth(0.0, TRUTH_STEP_S, GrpoSim(get_preset(preset), seed=seed).sample(grid).power_w)
    keep = grid >= start_s
    t_true, p_true = grid[keep] - start_s, truth.power[0][keep]
    reads = np.arange(start_s, start_s + span + 1e-9, 0.1)
    lines = {"true power (every 5 ms)": (t_true, p_true)}
    for name in ("average_1s", "a100-power.draw"):
        got = sense(SENSORS[name], truth, reads, phase_s=0.03)[0]
        # (a logger's reading holds until the next: drawn as steps)
        t_step = np.repeat(reads - start_s, 2)[1:]
        p_step = np.repeat(got, 2)[:-1]
        lines[name] = (t_step, p_step)
    low = float(min(p.min() for _, p in lines.values()))
    high = float(max(p.max() for _, p in lines.values()))
    low, high = 50 * np.floor(low / 50), 50 * np.ceil(high / 50)

    def x(s: float) -> float:
        return _LEFT + (_W - _LEFT - _RIGHT) * s / span

    def y(w: float) -> float:
        return _TOP + (_H - _TOP - _BOTTOM) * (1 - (w - low) / (high - low))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{_W}" height="{_H}" fill="white"/>',
        f'<text x="{_LEFT}" y="20" font-size="14">{preset} (simulated), seed {seed}: '
        "true power and two sensors' readings every 100 ms</text>",
    ]
    for w in np.arange(low, high + 1, 50):
        out.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(w):.1f}" y2="{y(w):.1f}" '
            'stroke="#eeeeee"/>'
            f'<text x="{_LEFT - 6}" y="{y(w) + 4:.1f}" text-anchor="end">{w:.0f}</text>'
        )
    for s in range(0, int(span) + 1, 2):
        out.append(f'<text x="{x(s):.1f}" y="{_H - _BOTTOM + 16}" text-anchor="middle">{s}</text>')
    out.append(
        f'<text x="{(_LEFT + _W) / 2}" y="{_H - 12}" text-anchor="middle">seconds</text>'
        f'<text x="14" y="{(_TOP + _H - _BOTTOM) / 2}" '
        f'transform="rotate(-90 14 {(_TOP + _H - _BOTTOM) / 2})" text-anchor="middle">W</text>'
    )
    for k, (name, (t, p)) in enumerate(lines.items()):
        width = 0.8 if k == 0 else 1.6
        out.append(
            f'<path d="{_path(t, p, x, y)}" fill="none" stroke="{_COLOURS[name]}" '
            f'stroke-width="{width}"/>'
        )
        lx = _LEFT + 10 + 230 * k
        out.append(
            f'<line x1="{lx}" x2="{lx + 24}" y1="{_TOP - 6}" y2="{_TOP - 6}" '
            f'stroke="{_COLOURS[name]}" stroke-width="3"/>'
            f'<text x="{lx + 30}" y="{_TOP - 2}">{name}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


#: file name -> the function that draws it
DRAWN = {"trust.svg": trust_svg}


def main() -> None:
    """Write every figure anew."""
    FIGURES.mkdir(exist_ok=True)
    for name, draw in DRAWN.items():
        (FIGURES / name).write_text(draw())
        print(f"wrote docs/figures/{name}", file=sys.stderr)


if __name__ == "__main__":
    main()
