"""Parse and format durations and power: the one place units are read from user text.

Durations: ``250ms``, ``0.5s``, ``30s``, ``5m``, ``1h`` (also ``us``, ``min``, ``d``).
Power: ``300W``, ``0.3kW``, ``1.2MW``, ``75%`` (of a nameplate given later).
A bare number is refused: a unit typo should never silently mean seconds or watts.
SM clocks are the exception: MHz is the only unit NVML, nvidia-smi and stage profiles use, so
``1410`` means 1410 MHz (``1.41GHz`` and ``1410MHz`` are read too).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from powerkit.core.errors import BadInputError, UnitError, option

__all__ = [
    "MAX_SITE_MW",
    "PER_KWH",
    "PowerSpec",
    "check_site_mw",
    "duration_s",
    "format_duration",
    "format_energy",
    "format_power",
    "format_span",
    "format_value",
    "is_number",
    "list_items",
    "parse_amount",
    "parse_duration",
    "parse_durations",
    "parse_frequencies",
    "parse_gpus",
    "parse_pairs",
    "parse_percent",
    "parse_power",
    "parse_watts",
    "parse_years",
]

_DURATION_UNITS: dict[str, float] = {
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_POWER_UNITS: dict[str, float] = {"mw": 1e-3, "w": 1.0, "kw": 1e3}
_NUMBER = r"(?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
_DURATION_RE = re.compile(_NUMBER + r"\s*(?P<unit>[a-zA-Z]+)")
_POWER_RE = re.compile(_NUMBER + r"\s*(?P<unit>[a-zA-Z]+|%)")


def _number(match: re.Match[str], text: str) -> float:
    value = float(match.group("num"))
    if not math.isfinite(value):
        raise UnitError(f"{text!r}: not a finite number")
    return value


#: the largest site a feed may be given as (100 GW: more than any single grid connection)
MAX_SITE_MW = 100_000.0


def check_site_mw(value: float) -> float:
    """A site's power feed in MW (``--site-mw``): finite, above 0 and at most
    :data:`MAX_SITE_MW`; one line otherwise."""
    if not (math.isfinite(value) and 0 < value <= MAX_SITE_MW):
        raise BadInputError(
            f"{option('site-mw')} {value:g}: a site's feed in MW, above 0 and at most "
            f"{MAX_SITE_MW:,.0f}"
        )
    return value


def parse_duration(text: str, *, allow_zero: bool = False) -> float:
    """Return the duration in seconds for text such as ``"0.5s"`` or ``"5m"``."""
    raw = text.strip()
    match = _DURATION_RE.fullmatch(raw)
    if match is None:
        hint = " (add a unit: 250ms, 0.5s, 30s, 5m, 1h)" if is_number(raw) else ""
        raise UnitError(f"{text!r} is not a duration{hint}")
    unit = match.group("unit")
    if unit not in _DURATION_UNITS:
        raise UnitError(f"{text!r}: unknown duration unit {unit!r} (use ms, s, m, h)")
    seconds = _number(match, text) * _DURATION_UNITS[unit]
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise UnitError(f"{text!r}: a duration must be positive")
    return seconds


def _mhz(item: str, text: str) -> float:
    raw = item.strip().lower()
    scale = 1000.0 if raw.endswith("ghz") else 1.0
    try:
        value = float(raw.removesuffix("ghz").removesuffix("mhz").strip()) * scale
    except ValueError:
        raise UnitError(f"{text!r}: {item.strip()!r} is not an SM clock (MHz)") from None
    if not (math.isfinite(value) and value > 0):
        raise UnitError(f"{text!r}: an SM clock must be a positive number of MHz")
    return value


def parse_frequencies(text: str) -> list[float]:
    """Return SM clocks in MHz for ``"1980,1600,1200"`` or a range ``"1410:810:15"`` (from,
    to, step; both ends included when the step lands on them), order kept."""
    if text.count(":") == 2:
        start, stop, step = (_mhz(x, text) for x in text.split(":"))
        sign = 1.0 if stop >= start else -1.0
        count = math.floor(abs(stop - start) / step + 1e-9) + 1
        return [start + sign * step * k for k in range(count)]
    values = [_mhz(x, text) for x in list_items(text, "SM clocks")]
    if not values:
        raise UnitError(f"{text!r}: no SM clocks given")
    return values


def parse_durations(text: str) -> list[float]:
    """Return seconds for a comma-separated list such as ``"0.5s,30s,5m"`` (order kept)."""
    parts = list_items(text, "")
    if not parts:
        raise UnitError(f"{text!r}: no durations given")
    return [parse_duration(p) for p in parts]


@dataclass(frozen=True)
class PowerSpec:
    """A power given either in watts or as a fraction of a nameplate not yet known."""

    watts: float | None = None
    fraction: float | None = None
    text: str = ""

    def resolve(self, nameplate_w: float | None) -> float:
        """Return watts; a percentage needs the nameplate (TDP) in watts."""
        if self.watts is not None:
            return self.watts
        assert self.fraction is not None
        if nameplate_w is None or not math.isfinite(nameplate_w) or nameplate_w <= 0:
            raise UnitError(
                f"{self.text!r} is a percentage of nameplate, but the nameplate is unknown "
                f"(give {option('nameplate')} or a value in W)"
            )
        return self.fraction * nameplate_w

    @property
    def is_relative(self) -> bool:
        """Return True when the value is a percentage of nameplate."""
        return self.fraction is not None


def parse_power(text: str, *, allow_zero: bool = False) -> PowerSpec:
    """Return a PowerSpec for ``"300W"``, ``"0.3kW"``, ``"1.2MW"`` or ``"75%"``.

    Every power powerkit takes (a budget, a cap, a capacity, a nameplate) must be more than
    zero unless ``allow_zero``; ``-0W`` is negative.
    """
    raw = text.strip()
    match = _POWER_RE.fullmatch(raw)
    if match is None:
        hint = " (add a unit: 300W, 0.3kW, 75%)" if is_number(raw) else ""
        raise UnitError(f"{text!r} is not a power{hint}")
    unit = match.group("unit")
    value = _number(match, text)
    if value < 0 or raw.startswith("-"):
        raise UnitError(f"{text!r}: power must not be negative")
    if value == 0 and not allow_zero:
        raise UnitError(f"{text!r}: power must be more than zero")
    if unit == "%":
        if value > 100:
            # every percentage of nameplate powerkit takes (a budget, a cap, a threshold) is at
            # most the nameplate: 150 % would be a budget never broken, a cap never applied
            raise UnitError(f"{text!r}: a share of nameplate is at most 100% (give watts for more)")
        return PowerSpec(fraction=value / 100.0, text=raw)
    # "mW" is milliwatts, "MW" megawatts: the case matters only here.
    if unit == "MW":
        return PowerSpec(watts=value * 1e6, text=raw)
    key = unit.lower()
    if key not in _POWER_UNITS:
        raise UnitError(f"{text!r}: unknown power unit {unit!r} (use W, kW, MW or %)")
    return PowerSpec(watts=value * _POWER_UNITS[key], text=raw)


def parse_percent(text: str, what: str = "", *, positive: bool = False) -> float:
    """Return the fraction for a percentage such as ``"5%"`` (0.05); ``what`` names the option.

    Every percentage powerkit takes is a share: from 0 % (more than 0 with ``positive``) to
    100 %.
    """
    prefix = f"{what} " if what else ""
    try:
        spec = parse_power(text, allow_zero=True)
    except UnitError:
        spec = PowerSpec(text=text)
    if spec.fraction is None:
        raise UnitError(f"{prefix}{text!r}: give a percentage, e.g. 5%")
    if spec.fraction > 1 or (positive and spec.fraction == 0):
        low = "more than 0 %" if positive else "0 %"
        raise UnitError(f"{prefix}{text!r}: a share from {low} to 100 %")
    return spec.fraction


def format_duration(seconds: float) -> str:
    """Return a short label such as ``"500ms"``, ``"30s"``, ``"5m"`` or ``"1.5h"``."""
    if seconds < 1:
        return f"{_trim(seconds * 1000)}ms"
    if seconds < 60:
        return f"{_trim(seconds)}s"
    if seconds < 3600:
        return f"{_trim(seconds / 60)}m"
    return f"{_trim(seconds / 3600)}h"


def format_power(watts: float) -> str:
    """Return ``"314.6W"`` or ``"1.2kW"``-style text for watts."""
    if abs(watts) >= 1e6:
        return f"{_trim(watts / 1e6)}MW"
    if abs(watts) >= 1e4:
        return f"{_trim(watts / 1e3)}kW"
    return f"{_trim(watts)}W"


def format_energy(joules: float) -> str:
    """Energy for a person to read, its unit chosen by magnitude (J, Wh, kWh, MWh, GWh), three
    significant digits or more: ``"1,140 J"``, ``"316 Wh"``, ``"14.8 MWh"`` (JSON keeps J)."""
    for unit, size in (("GWh", 3.6e12), ("MWh", 3.6e9), ("kWh", 3.6e6), ("Wh", 3.6e3)):
        if abs(joules) >= size:
            return f"{_three(joules / size)} {unit}"
    return f"{_three(joules)} J"


def format_span(seconds: float) -> str:
    """A length of time for a person to read, its unit chosen by magnitude: ``"42.5 s"``,
    ``"12.3 min"``, ``"5.02 h"``, ``"3.10 days"``."""
    for unit, size in (("days", 86_400.0), ("h", 3_600.0), ("min", 60.0)):
        if abs(seconds) >= 2 * size:
            return f"{_three(seconds / size)} {unit}"
    return f"{_three(seconds)} s"


def _three(value: float) -> str:
    """At least three significant digits, with thousands separators (``1,140``, ``14.8``)."""
    size = abs(value)
    if size >= 100 or value == 0:
        return f"{value:,.0f}"
    return f"{value:.1f}" if size >= 10 else f"{value:.2f}"


def format_value(value: float | None, spec: str = ".1f") -> str:
    """Return ``value`` formatted with ``spec``, or "-" when it is missing (tables)."""
    return "-" if value is None else format(value, spec)


def _trim(value: float) -> str:
    return f"{value:.6g}"


def is_number(raw: str) -> bool:
    """Whether ``raw`` parses as a plain number (``"300"``, ``"1e3"``, ``"nan"``)."""
    try:
        float(raw)
    except ValueError:
        return False
    return True


def list_items(text: str, what: str) -> list[str]:
    """The items of a comma-separated list, stripped; an empty one (``1,,2``, ``4,8,``) is
    refused, never dropped in silence."""
    items = [x.strip() for x in text.split(",")]
    if text.strip() and not all(items):
        raise UnitError(f"{what} {text!r}: an empty item between commas".lstrip())
    return [x for x in items if x]


def parse_gpus(text: str | None) -> list[int] | None:
    """``--gpus 0,2`` as a list of GPU indices; None (all GPUs) when not given."""
    if text is None:
        return None
    try:
        gpus = [int(x) for x in list_items(text, option("gpus"))]
    except ValueError:
        raise UnitError(f"{option('gpus')} {text!r}: expected indices such as 0,2") from None
    if not gpus or any(g < 0 for g in gpus):
        raise UnitError(f"{option('gpus')} {text!r}: expected indices such as 0,2")
    return gpus


def parse_pairs(items: list[str], option: str, form: str, example: str) -> dict[str, str]:
    """A repeatable ``option KEY=VALUE`` as a map; ``form`` and ``example`` (``KEY=VALUE``,
    ``model=moe``) are what the error line shows for an item that is not one."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UnitError(f"{option} {item!r}: expected {form}, e.g. {example}")
        out[key.strip()] = value.strip()
    return out


def parse_watts(text: str | None, option: str) -> float | None:
    """A power option that must be watts (never a share of a nameplate); None when absent."""
    if text is None:
        return None
    spec = parse_power(text)
    if spec.is_relative:
        raise UnitError(f"{option} {text!r}: give watts, not a percentage")
    return spec.resolve(None)


def parse_powers(text: str) -> list[PowerSpec]:
    """A comma-separated list of powers, each in watts or a share of a nameplate (``250W,300W``
    or ``60%,100%``: the caps of ``sweep --power-cap`` and ``pfi sweep --caps``)."""
    return [parse_power(x) for x in list_items(text, "powers")]


def parse_counts(text: str, name: str, top: int) -> list[int]:
    """A comma-separated ladder of whole numbers from 1 to ``top`` (``4,8,16``: a knob's
    settings); one line naming the option ``name`` for anything else."""
    try:
        values = [int(x) for x in list_items(text, name)]
    except ValueError:
        raise UnitError(f"{name} {text!r}: expected whole numbers such as 4,8,16") from None
    if not values or any(v < 1 or v > top for v in values):
        raise UnitError(f"{name} {text!r}: expected whole numbers from 1 to {top}")
    return values


def parse_factors(text: str, name: str) -> tuple[float, ...]:
    """A comma-separated list of finite numbers (``1.1,1.2,1.5``: straggler slowdowns)."""
    try:
        values = tuple(float(x) for x in list_items(text, name))
    except ValueError:
        raise UnitError(f"{name} {text!r}: numbers like 1.1,1.2,1.5") from None
    if not values or not all(math.isfinite(v) for v in values):
        raise UnitError(f"{name} {text!r}: numbers like 1.1,1.2,1.5")
    return values


#: the unit a price per kWh may carry (``0.08/kWh``), for :func:`parse_amount`
PER_KWH = r"(?:/\s*[kK][wW][hH])?"


def parse_amount(text: str | float, what: str, unit: str = "") -> float:
    """A number not below zero, a leading ``$`` allowed and, where ``unit`` (a pattern) is
    given, that unit after it (``0.08/kWh`` for a price per kWh); ``what`` names the option."""
    raw = str(text).strip()
    m = re.fullmatch(r"\$?([+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*" + unit, raw)
    if m is None:
        raise UnitError(f"{what} {raw!r} is not a number{' with the unit' if unit else ''}")
    value = float(m.group(1))
    if value < 0:
        raise UnitError(f"{what} {raw!r} must not be negative")
    return value


def parse_years(text: str | float, what: str = "--amortize") -> float:
    """A number of years (``15``, ``15y``, ``15 years``)."""
    raw = str(text).strip()
    m = re.fullmatch(r"(\d+(?:\.\d*)?)\s*(y|yr|years?)?", raw)
    if m is None:
        raise UnitError(f"{what} {raw!r}: give years, e.g. 15y")
    return float(m.group(1))


def duration_s(value: object, name: str) -> float:
    """A duration given as text (``"100ms"``) or a number of seconds, in seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or value <= 0:
            raise BadInputError(f"{name} {value!r}: a positive number of seconds, or e.g. '100ms'")
        return float(value)
    if not isinstance(value, str):
        raise BadInputError(f"{name} {value!r}: a duration such as '100ms', or seconds")
    return parse_duration(value)
