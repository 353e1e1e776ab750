"""The sensor models on hand-computable signals, their bounds, and the simulator seen through
them (docs/trust.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from powerkit.cells.rolling import rolling_error_w, window_ends
from powerkit.core.errors import BadInputError
from powerkit.sensors import COUNTER, SENSORS, get_sensor, sensor_of
from powerkit.sensors.bounds import (
    combined_half_width,
    counter_bounds,
    local_range,
    power_bounds,
    step_error_w_s,
    supports_window,
)
from powerkit.sensors.sense import Truth, read_counter, sense

STEP = 0.005


def square(seconds: float, period_s: float, low: float, high: float) -> Truth:
    """A square wave: ``high`` in the first half of each period, ``low`` in the second, on the
    5 ms grid (held between grid points as steps of one grid cell)."""
    t = np.arange(round(seconds / STEP) + 1) * STEP
    phase = np.mod(t + 1e-9, period_s) < period_s / 2
    return Truth(0.0, STEP, np.where(phase, high, low)[None, :])


def test_a_point_reading_is_the_power_at_its_time() -> None:
    truth = square(4, 2.0, 100.0, 300.0)
    got = sense(SENSORS["instant"], truth, np.array([0.5, 1.5, 2.5]))
    assert got[0].tolist() == [300.0, 100.0, 300.0]


def test_a_1s_average_of_a_2s_square_wave_is_computed_by_hand() -> None:
    # the wave is 300 W on grid points 0 … 0.995 s, 100 W from 1.0 s, linear between (the
    # 5 ms ramp averages 200 W). At t = 1.5 s the last second holds 0.495 s at 300 W, the
    # ramp, and 0.5 s at 100 W; at 1.0 s: 0.995 s at 300 and the ramp; at 2.0 s the mirror
    truth = square(4, 2.0, 100.0, 300.0)
    got = sense(SENSORS["average_1s"], truth, np.array([1.0, 1.5, 2.0]))
    by_hand = [
        300 * 0.995 + 200 * 0.005,
        300 * 0.495 + 200 * 0.005 + 100 * 0.5,
        100 * 0.995 + 200 * 0.005,
    ]
    assert got[0] == pytest.approx(by_hand)


def test_25ms_of_100ms_sees_only_its_window() -> None:
    # a 100 ms square wave, high for its first 50 ms: the window [u-25 ms, u] at updates
    # u = k*100 ms + 80 ms sees only the low half; at u = k*100 ms + 40 ms only the high half
    truth = square(1, 0.1, 100.0, 300.0)
    a100 = SENSORS["a100-power.draw"]
    low = sense(a100, truth, np.array([0.385, 0.49]), phase_s=0.08)
    high = sense(a100, truth, np.array([0.345, 0.43]), phase_s=0.04)
    assert low[0] == pytest.approx([100.0, 100.0], abs=1e-9)
    assert high[0] == pytest.approx([300.0, 300.0])
    # held between updates: every reading from 0.38 to 0.4799 is the update at 0.38's
    held = sense(a100, truth, np.array([0.38, 0.42, 0.4799]), phase_s=0.08)
    assert held[0].tolist() == [held[0][0]] * 3
    assert a100.seen_share == pytest.approx(0.25) and a100.blind_s == pytest.approx(0.075)


def test_the_h100_sensor_averages_ten_part_time_windows() -> None:
    truth = square(3, 0.1, 100.0, 300.0)
    h100 = SENSORS["h100-power.draw"]
    # updates at k*100 ms + 80 ms see only the low half: ten of them, all 100 W
    assert sense(h100, truth, np.array([2.38]), phase_s=0.08)[0, 0] == pytest.approx(100.0)


def test_the_counter_holds_the_energy_at_its_last_update_in_millijoules() -> None:
    truth = Truth(0.0, STEP, np.full((1, 401), 250.0))
    got = read_counter(COUNTER, truth, np.array([0.0, 0.15, 1.0]))
    assert got[0].tolist() == pytest.approx([0.0, 25.0, 250.0])  # 0.15 s: the 0.1 s update


def test_the_local_range_and_a_steps_bound_by_hand() -> None:
    p = np.array([100.0, 100.0, 300.0, 300.0, 300.0, 300.0])
    # step i: the range of readings i-1 … i+2 (step 3: readings 2 … 5, all 300 W)
    assert local_range(p).tolist() == [200.0, 200.0, 200.0, 0.0, 0.0]
    dt = np.full(5, 0.1)
    # a point reading: u = 1, b = 0.1 * R / 2 = 10 J where the step is near
    assert step_error_w_s(SENSORS["instant"], dt, p).tolist() == pytest.approx(
        [10.0, 10.0, 10.0, 0.0, 0.0]
    )
    # 25 ms of 100 ms: u = 0.75
    assert step_error_w_s(SENSORS["a100-power.draw"], dt, p).tolist() == pytest.approx(
        [7.5, 7.5, 7.5, 0.0, 0.0]
    )
    # a 1 s average read every 0.1 s covers every step: only the ends count
    assert step_error_w_s(SENSORS["average_1s"], dt, p).tolist() == [0.0] * 5


def test_the_power_bounds_of_a_square_wave_by_hand() -> None:
    # one block of 2 s holding 30 J of step bounds: 2 * sqrt(30^2 / 3) = 34.6 J would pass
    # the most the steps can err together, 30 J, which H is then; a 1 s average leaves the
    # steps (each covered) and adds A * r at each end
    t = np.arange(6) * 0.1
    p = np.array([100.0, 100.0, 300.0, 300.0, 300.0, 300.0])
    e = float(np.sum(0.5 * (p[1:] + p[:-1]) * 0.1))
    half = 30.0
    low, high = power_bounds(SENSORS["instant"], t, p, np.ones(5, bool), e)
    assert (low, high) == pytest.approx((e - half, e + half))
    # the 1 s average: the ends' readings 100 and 300 W, each with 200 W of range within
    # its reach: shift A/2 (300 − 100) = 100 J, half-width A/2 (200 + 200) = 200 J
    low, high = power_bounds(SENSORS["average_1s"], t, p, np.ones(5, bool), e)
    assert (low, high) == pytest.approx((e + 100 - 200, e + 100 + 200))
    flat = np.full(6, 250.0)
    assert power_bounds(SENSORS["average_1s"], t, flat, np.ones(5, bool), 125.0) == (125.0, 125.0)
    # steps not integrated (a gap) carry no bound
    low, _ = power_bounds(SENSORS["instant"], t, p, np.zeros(5, bool), e)
    assert low == e
    # blocks are independent: two blocks of 30 J each, 2 * sqrt(2 * 30^2 / 3) = 49.0 J, less
    # than the 60 J of both at their bounds; one block of 30 J: its bounds' sum
    offsets = np.array([0.0, 0.5, 2.0, 2.5])
    b = np.full(4, 15.0)
    assert combined_half_width(offsets, b) == pytest.approx(2 * np.sqrt(2 * 30.0**2 / 3))
    assert combined_half_width(offsets[:2], b[:2]) == pytest.approx(30.0)


def test_a_windows_error_by_hand() -> None:
    """0.5 s windows (5 cells of 0.1 s) over a step from 100 to 300 W read by a point sensor:
    the steps 8, 9 and 10 see the step within their four readings (b = 0.1 × 200 / 2 = 10 J);
    the window over cells 8 … 12 holds all three: 2 × sqrt(5 × 300 / 3) = 44.7 J would pass
    their sum, 30 J, the most they can err together: 30 J / 0.5 s. The window over cells
    6 … 10 holds b of steps 8 … 10 too; the window over 9 … 13 steps 9 and 10, 20 J, where
    2 × sqrt(5 × 200 / 3) = 36.5 J."""
    values = np.array([100.0] * 10 + [300.0] * 10)
    present = np.ones(20, dtype=bool)
    below, above = rolling_error_w(SENSORS["instant"], values, present, 5, 0.1)
    assert below[8] == pytest.approx(30.0 / 0.5)  # window ending at 12
    assert below[6] == pytest.approx(30.0 / 0.5) and below[9] == pytest.approx(20.0 / 0.5)
    assert below[0] == 0.0 and below[-1] == 0.0 and (below == above).all()
    assert supports_window(SENSORS["instant"], 0.5)
    assert not supports_window(SENSORS["average_1s"], 0.5)
    assert not supports_window(SENSORS["a100-power.draw"], 0.05)  # (75 ms never measured)


def test_window_ends_by_hand() -> None:
    cells = np.arange(10)
    first, last = window_ends(10, 4, "rolling")
    assert cells[first].tolist() == list(range(7)) and cells[last].tolist() == list(range(3, 10))
    # tumbling, epoch-aligned blocks of 4 from cell 6 of the epoch: the first block holds the
    # series' cells 0-1 (epoch cells 6-7), then 2-5, then 6-9
    first, last = window_ends(10, 4, "tumbling", first_cell=6)
    assert cells[first].tolist() == [0, 2, 6] and cells[last].tolist() == [1, 5, 9]


def test_the_counter_bounds_by_hand() -> None:
    assert counter_bounds(1000.0, 400.0) == pytest.approx((1000 - 40.001, 1000 + 40.001))


def test_a_trace_semantics_names_its_sensor() -> None:
    assert sensor_of("instant").name == "instant"
    assert sensor_of("instant", "NVIDIA A100-SXM4-80GB").name == "a100-power.draw"
    assert sensor_of("average_1s", "NVIDIA H100 80GB HBM3").name == "h100-power.draw"
    assert sensor_of("nvml_usage").name == "average_1s"
    assert sensor_of("sim_instant", "NVIDIA A100").name == "instant"
    assert sensor_of("unknown") is None and sensor_of("mixed") is None
    with pytest.raises(BadInputError, match="sensor 'nope': one of instant"):
        get_sensor("nope")


@pytest.mark.parametrize("name", sorted(SENSORS))
def test_record_through_a_sensor_with_the_truth(tmp_path: Path, name: str) -> None:
    """The counter of a sensed recording is the truth's energy over the same span to a count
    of the counter and its lag; the power's interval holds the truth."""
    from typer.testing import CliRunner

    from powerkit.cli import app

    out, truth = tmp_path / "s.parquet", tmp_path / "t.parquet"
    run = CliRunner().invoke(
        app,
        [
            "record",
            "--backend",
            "sim",
            "--duration",
            "2m",
            "--interval",
            "100ms",
            "--sensor",
            name,
            "--truth-out",
            str(truth),
            "--out",
            str(out),
            "--json",
        ],
    )
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["truth_out"] == str(truth)
    sensed = json.loads(CliRunner().invoke(app, ["info", str(out), "--json"]).stdout)
    assert sensed["power_semantics"] == name and sensed["energy_method"] == "counter"
    end = sensed["end"]
    true = json.loads(CliRunner().invoke(app, ["info", str(truth), "--to", end, "--json"]).stdout)
    assert true["power_semantics"] == "sim_instant" and true["energy_method"] == "power (instant)"
    # the truth's trace holds one more 5 ms sample after the last sensed time (--to keeps it)
    assert sensed["energy_low_j"] <= true["energy_j"] <= sensed["energy_high_j"]


def test_sensor_and_truth_out_are_refused_where_they_cannot_apply(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from powerkit.cli import app

    out = str(tmp_path / "s.parquet")
    cases = [
        (["--backend", "nvml", "--sensor", "instant"], "--sensor applies to a simulated"),
        (["--backend", "sim", "--realtime", "--truth-out", "t.parquet"], "--truth-out applies"),
        (["--backend", "sim", "--duration", "1m", "--sensor", "x"], "--sensor 'x': one of"),
        (["--backend", "sim", "--duration", "1m", "--truth-out", out], "must differ from --out"),
        (["--backend", "sim", "--duration", "1m", "--truth-out", __file__], "--truth-out "),
    ]
    for args, says in cases:
        run = CliRunner().invoke(app, ["record", *args, "--out", out])
        assert run.exit_code == 2, (args, run.output)
        assert says in run.output, run.output
    assert not Path(out).exists()


def test_sensor_check_reads_the_sensor_off_the_readings(tmp_path: Path) -> None:
    """A simulated recording through a 1 s average looks averaged; through a point sensor it
    looks like points; claiming the one for the other is a finding."""
    from typer.testing import CliRunner

    from powerkit.cli import app

    looks = {}
    for name in ("instant", "average_1s"):
        out = tmp_path / f"{name}.parquet"
        args = ["record", "--backend", "sim", "--preset", "h100-8b", "--duration", "5m"]
        run = CliRunner().invoke(
            app, [*args, "--interval", "100ms", "--sensor", name, "--out", str(out)]
        )
        assert run.exit_code == 0, run.output
        doc = json.loads(
            CliRunner().invoke(app, ["info", str(out), "--sensor-check", "--json"]).stdout
        )
        looks[name] = doc["sensor_check"]["series"][0]["looks"]
        assert doc["sensor_check"]["findings"] == []
        wrong = "average_1s" if name == "instant" else "instant"
        doc = json.loads(
            CliRunner()
            .invoke(app, ["info", str(out), "--sensor-check", "--power-semantics", wrong, "--json"])
            .stdout
        )
        assert any("look like" in f for f in doc["sensor_check"]["findings"]), doc
    assert looks == {"instant": "point", "average_1s": "averaged"}
