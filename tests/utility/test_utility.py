"""powerkit utility: metrics against hand-computed signals, remedies' constraints and energy, the
spec, and the command on simulated synchronous training at 20 ms."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from powerkit.core.errors import BadInputError
from powerkit.utility.metrics import swing_metrics
from powerkit.utility.mitigate import (
    ROUND_TRIP,
    Mitigation,
    floor,
    parse_mitigations,
    ramp,
    storage,
)
from powerkit.utility.spec import bundled_specs, judge, read_spec
from tests.conftest import Cli

DT = 0.02
T = np.arange(0, 600, DT)


def square(period: float = 5.0, duty: float = 0.6, high: float = 1000.0, low: float = 400.0):  # type: ignore[no-untyped-def]
    return np.where((T % period) < duty * period, high, low)


def test_square_wave_fundamental_and_harmonics_where_theory_puts_them() -> None:
    m = swing_metrics(square(), DT)
    # a pulse train of height H and duty D: harmonic k has amplitude (2H / k pi) |sin(k pi D)|
    h, d = 600.0, 0.6
    amp = lambda k: 2 * h / (k * np.pi) * abs(np.sin(k * np.pi * d))  # noqa: E731
    assert m.dominant is not None
    assert m.dominant.frequency_hz == pytest.approx(0.2, abs=1e-3)
    assert m.dominant.amplitude_w == pytest.approx(amp(1), rel=0.02)
    low, mid, high_band = m.bands
    assert low.peak_amplitude_w == pytest.approx(amp(1), rel=0.02)  # 0.2 Hz
    assert mid.peak_amplitude_w == pytest.approx(amp(6), rel=0.03)  # 1.2 Hz (the 5th is 0)
    assert high_band.peak_amplitude_w == pytest.approx(
        max(amp(k) for k in range(25, 100)), rel=0.05
    )
    # every band's share of the variance adds up to what lies between 0.1 and 20 Hz
    variance = sum(b.variance_share for b in m.bands)  # type: ignore[misc]
    assert 0.97 < variance <= 1.0
    ramps = {r.interval_s: r.max_w for r in m.ramps}
    assert ramps[0.1] == ramps[1.0] == 600 and ramps[10.0] == 0  # the period divides 10 s
    assert m.dynamic_range[0].max_w == pytest.approx(600)


def test_a_pure_ramp_and_white_noise() -> None:
    slope = 2.0  # W per s
    m = swing_metrics(100 + slope * T, DT)
    for r in m.ramps:
        assert r.max_w == pytest.approx(slope * r.interval_s, rel=1e-6)
    # 1 s means within a minute: from the first to the last second, 59 s apart
    assert m.dynamic_range[0].max_w == pytest.approx(slope * 59, rel=1e-6)
    noise = np.random.default_rng(0).normal(500, 20, T.size)
    n = swing_metrics(noise, DT)
    nyquist = 0.5 / DT
    for b in n.bands:  # white: each band holds its share of the bandwidth
        assert b.variance_share == pytest.approx((b.high_hz - b.low_hz) / nyquist, rel=0.1)


def test_slow_sampling_and_averaged_power_are_reported() -> None:
    coarse = swing_metrics(np.tile([100.0, 200.0], 300), 0.5, semantics="average_1s")
    resolved = {(b.low_hz, b.high_hz): b for b in coarse.bands}
    assert resolved[(0.1, 1.0)].resolved and resolved[(0.1, 1.0)].clipped_to_hz is None
    assert not resolved[(1.0, 5.0)].resolved and not resolved[(5.0, 20.0)].resolved
    assert not coarse.ramps[0].resolved  # 0.1 s < 0.5 s sampling
    assert resolved[(0.1, 1.0)].attenuated
    assert any("not resolved" in n for n in coarse.notes)
    assert any("1 s average" in n for n in coarse.notes)
    at_10hz = swing_metrics(square(), 0.1)
    assert at_10hz.bands[2].clipped_to_hz == pytest.approx(5.0)  # 5-20 Hz clipped to Nyquist


def test_remedies_hold_their_constraints_and_conserve_energy() -> None:
    p = square()
    plate = 1200.0
    m = Mitigation("floor", 0.6)
    f = floor(p, 0.6 * plate, DT, m)
    assert f.power_w.min() >= 0.6 * plate - 1e-9
    assert f.extra_energy_j == pytest.approx(((f.power_w - p) * DT).sum())
    r = ramp(p, 0.05 * plate, DT, Mitigation("ramp", 0.05))
    steps = np.abs(np.diff(r.power_w))
    assert steps.max() <= 0.05 * plate * DT + 1e-9  # the limit holds at every step
    deferred = r.slowdown_pct / 100 * p.mean() * p.size * DT
    assert (r.power_w * DT).sum() == pytest.approx((p * DT).sum() + r.extra_energy_j - deferred)
    s = storage(p, DT, 30.0, Mitigation("storage", None))
    assert s.storage_kwh is not None and s.storage_kw is not None
    # the grid supplies the load plus the losses; the battery stays within its capacity
    assert (s.power_w * DT).sum() == pytest.approx((p * DT).sum() + s.extra_energy_j, rel=1e-9)
    net = p - s.power_w
    eff = np.sqrt(ROUND_TRIP)
    soc = np.concatenate(([0.0], np.cumsum(np.where(net > 0, -net / eff, -net * eff) * DT)))
    level = soc - soc.min()
    assert level.max() <= s.storage_kwh * 3.6e6 + 1e-6 and level.min() >= 0
    assert abs(soc[-1]) < 1e-6 * abs(soc).max() + 1e-3  # losses made up: it ends where it began
    smoothed = swing_metrics(s.power_w, DT)
    assert (
        smoothed.bands[0].peak_amplitude_w < 0.05 * swing_metrics(p, DT).bands[0].peak_amplitude_w
    )  # type: ignore[operator]


def test_parse_remedies() -> None:
    got = parse_mitigations("floor:60%,ramp:2%/s,storage:auto,fill:80%,storage:2MWh")
    assert [(m.kind, m.value) for m in got] == [
        ("floor", 0.6),
        ("ramp", 0.02),
        ("storage", None),
        ("fill", 0.8),
        ("storage", 2000.0),
    ]
    for bad in ("floor:60", "ramp:2%", "storage:lots", "cap:50%", "floor:150%", "fill:-5%"):
        with pytest.raises(BadInputError):
            parse_mitigations(bad)


def test_a_spec_that_passes_and_one_that_fails(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert bundled_specs() == ["site-100mw", "swings-pct"]
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "t"\n[[rule]]\nmetric = "ramp"\ninterval_s = 1.0\n'
        'limit_pct_of_mean = 100.0\n[[rule]]\nmetric = "band"\nlow_hz = 0.1\n'
        "high_hz = 1.0\nlimit_pct_of_mean = 10.0\n"
    )
    gentle = swing_metrics(500 + 5 * np.sin(2 * np.pi * 0.2 * T), DT)
    results = judge(read_spec(spec), gentle)
    assert all(r.passed for r in results) and all(r.margin > 0 for r in results)  # type: ignore[operator]
    harsh = judge(read_spec(spec), swing_metrics(square(), DT))
    band = next(r for r in harsh if r.rule.startswith("band"))
    assert not band.passed and band.margin < 0  # type: ignore[operator]
    spec.write_text('[[rule]]\nmetric = "band"\nlow_hz = 0.2\nhigh_hz = 1.0\nlimit_mw = 1\n')
    with pytest.raises(BadInputError, match="rule 1: band rules use the bands"):
        read_spec(spec)
    spec.write_text('[[rule]]\nmetric = "wobble"\n')
    with pytest.raises(BadInputError, match="rule 1: metric must be one of"):
        read_spec(spec)


def test_grid_on_synchronous_training_at_20ms(cli: Cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Dense pretraining on 8 H200 at 20 ms, 128 aligned copies (1,024 GPUs, one synchronous
    job), scaled to 100 MW: the dominant frequency is the simulated iteration rate."""
    from powerkit.sim import GrpoSim, get_preset

    trace = tmp_path / "pre.parquet"
    r = cli(
        "record",
        "--backend",
        "sim",
        "--preset",
        "h200-dense-pretrain",
        "--duration",
        "20m",
        "--interval",
        "20ms",
        "--out",
        trace,
    )
    assert r.exit_code == 0, r.stderr
    sim = GrpoSim(get_preset("h200-dense-pretrain"), seed=0)
    sim.sample(np.arange(0, 1200, 1.0))
    rate = 1 / float(np.diff(sim.step_starts()).mean())
    page = tmp_path / "grid.html"
    doc = cli.json(
        "utility",
        f"{trace}:128",
        "--site-mw",
        "100",
        "--spec",
        "swings-pct",
        "--mitigate",
        "floor:60%,ramp:5%/s,storage:auto",
        "--html",
        page,
    )
    assert doc["gpus"] == 1024 and doc["replicas"] == 140
    assert doc["dominant"]["frequency_hz"] == pytest.approx(rate, rel=0.03)
    assert {"low_hz", "high_hz", "variance_share", "peak_amplitude_w", "resolved"} <= set(
        doc["bands"][0]
    )
    assert [r["interval_s"] for r in doc["ramps"]] == [0.1, 1.0, 10.0, 60.0]
    assert {"rule", "limit", "value", "pass", "margin"} <= set(doc["spec"][0])
    names = [m["name"] for m in doc["mitigations"]]
    assert names[:3] == ["floor:60%", "ramp:5%/s", "storage:auto"] and len(names) == 6
    for m in doc["mitigations"]:
        assert {"residual", "extra_energy_j", "slowdown_pct", "storage_kwh", "storage_kw"} <= set(m)
    assert doc["cheapest"] in names
    # the knob that implements each remedy on a GPU (an H200, 700 W: 5 %/s is 35 W/s)
    knobs = {m["name"]: m["knob"] for m in doc["mitigations"]}
    assert knobs["floor:60%"] == "power smoothing floor 60 % of TGP (smoothing set --floor 60)"
    assert "ramp 35 W/s a GPU (smoothing set --ramp-up 35 --ramp-down 35)" in knobs["ramp:5%/s"]
    assert knobs["storage:auto"] == "a battery at the site (no GPU knob)"
    assert page.read_text().count("<figcaption>") == 2
    report = tmp_path / "report.html"
    grid_json = tmp_path / "grid.json"
    r = cli("utility", trace, "--json")
    grid_json.write_text(r.stdout)
    assert cli("report", "--utility", grid_json, "--out", report).exit_code == 0
    r = cli("utility", trace, "--spec", "nope.toml")
    assert r.exit_code == 2 and "bundled examples: site-100mw, swings-pct" in r.stderr


def test_the_old_name_grid_still_runs_and_warns_once(cli: Cli, tmp_path: Path) -> None:
    """`powerkit grid` (this command's name until this release) gives what `utility` gives,
    with one warning; `report --grid FILE` names the option it is now."""
    trace = tmp_path / "t.parquet"
    r = cli(
        "record",
        "--backend",
        "sim",
        "--preset",
        "h200-dense-pretrain",
        "--duration",
        "2m",
        "--interval",
        "100ms",
        "--out",
        trace,
    )
    assert r.exit_code == 0, r.stderr
    new = cli("utility", f"{trace}:4", "--json")
    old = cli("grid", f"{trace}:4", "--json")
    assert old.exit_code == 0 and json.loads(old.stdout) == json.loads(new.stdout)
    assert old.stderr.count("`powerkit grid` is now `powerkit utility`") == 1
    assert "powerkit grid" not in new.stderr
    doc = tmp_path / "u.json"
    doc.write_text(new.stdout)
    r = cli("report", "--grid", doc, "--out", tmp_path / "r.html")
    assert r.exit_code == 2 and "report --grid FILE is now --utility FILE" in r.stderr
    assert not (tmp_path / "r.html").exists()
