"""Unit parsing: the one parser every option goes through."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from powerkit.core.errors import UnitError
from powerkit.core.units import (
    format_duration,
    format_energy,
    format_power,
    format_span,
    parse_duration,
    parse_durations,
    parse_power,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("250ms", 0.25),
        ("0.5s", 0.5),
        ("30s", 30),
        ("5m", 300),
        ("1h", 3600),
        ("2min", 120),
        (" 1.5 s ", 1.5),
        ("1e3ms", 1.0),
        ("100us", 1e-4),
        ("1d", 86400),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "5 mins", "s", "", "-1s", "0s", "1.2.3s", "nan s", "5x"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(UnitError):
        parse_duration(text)


def test_bare_number_hint() -> None:
    with pytest.raises(UnitError, match="add a unit"):
        parse_duration("0.5")


def test_duration_list_keeps_order() -> None:
    assert parse_durations("0.5s,30s, 5m") == [0.5, 30, 300]
    with pytest.raises(UnitError):
        parse_durations(" , ")


@pytest.mark.parametrize(
    ("text", "watts"),
    [
        ("300W", 300),
        ("0.3kW", 300),
        ("1.2MW", 1.2e6),
        ("500mW", 0.5),
        ("314.6 W", 314.6),
        ("300w", 300),
    ],
)
def test_power(text: str, watts: float) -> None:
    assert parse_power(text).resolve(None) == pytest.approx(watts)


def test_percent_needs_nameplate() -> None:
    spec = parse_power("75%")
    assert spec.is_relative
    assert spec.resolve(400) == pytest.approx(300)
    with pytest.raises(UnitError, match="nameplate"):
        spec.resolve(None)


@pytest.mark.parametrize("text", ["300", "300 V", "-5W", "W", "75 percent", "inf W"])
def test_bad_power(text: str) -> None:
    with pytest.raises(UnitError):
        parse_power(text)


@given(st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False))
def test_duration_roundtrip(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, rel=1e-5)


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False))
def test_power_roundtrip(watts: float) -> None:
    assert parse_power(format_power(watts), allow_zero=True).resolve(None) == pytest.approx(
        watts, rel=1e-5, abs=1e-9
    )


@given(st.text(max_size=12))
def test_parsers_never_crash(text: str) -> None:
    """Any text either parses to a finite positive value or raises UnitError."""
    for parse in (parse_duration, lambda t: parse_power(t).resolve(100.0)):
        try:
            value = parse(text)
        except UnitError:
            continue
        assert math.isfinite(value) and value >= 0


def test_percent() -> None:
    from powerkit.core.units import parse_percent

    assert parse_percent("5%") == pytest.approx(0.05)
    with pytest.raises(UnitError, match="--margin '5': give a percentage"):
        parse_percent("5", "--margin")
    with pytest.raises(UnitError, match="give a percentage"):
        parse_percent("300W")


@pytest.mark.parametrize(
    ("joules", "text"),
    [
        (1140, "1,140 J"),
        (3.5, "3.50 J"),
        (3600 * 316, "316 Wh"),
        (3.6e6 * 1.5, "1.50 kWh"),
        (3.6e9 * 14.8, "14.8 MWh"),
        (3.6e12 * 2, "2.00 GWh"),
        (0, "0 J"),
    ],
)
def test_energy_is_written_in_the_unit_of_its_magnitude(joules: float, text: str) -> None:
    assert format_energy(joules) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (42.5, "42.5 s"),
        (119, "119 s"),
        (600, "10.0 min"),
        (7200, "2.00 h"),
        (86400 * 3.1, "3.10 days"),
    ],
)
def test_a_span_is_written_in_the_unit_of_its_magnitude(seconds: float, text: str) -> None:
    assert format_span(seconds) == text
