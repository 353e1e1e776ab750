"""A breaker on the feed (``powerkit cap --breaker curve.toml``): does the fleet's power trip
it, and how close does it come?

The trip curve (a TOML file, docs/cap.md) gives, for a constant overload ratio x (the power
÷ the breaker's rating; the current ratio, at a constant voltage and power factor), the time
t(x) after which the breaker's thermal (inverse-time) element trips, at a few points; between
them t is read log-log (the way the curves are drawn), beyond the last it is the last
point's time; below the first point's ratio the element never trips. At or above the magnetic
level the breaker trips at once.

The thermal state H integrates the curve over the fleet's power: every cell at a ratio x at
or over the first point's adds cell ÷ t(x); every other cell relaxes H by exp(-cell ÷
``cooling_s``) (none when the file gives no cooling time: the state never relaxes, the
cautious reading). The element trips when H reaches 1: at constant overload, after exactly
t(x). The **margin** is how far from a trip the fleet came at its closest: the smaller of 1
- the highest H and 1 - the highest ratio ÷ the magnetic level (below 0: it tripped).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import bundled_or_given, load_toml
from powerkit.core.tables import Column
from powerkit.core.units import UnitError, parse_power

__all__ = [
    "BREAKER_COLUMNS",
    "Breaker",
    "BreakerResult",
    "BreakerState",
    "bundled_breakers",
    "read_breaker",
]

BUNDLED = Path(__file__).resolve().parents[1] / "data" / "breakers"


@dataclass(frozen=True)
class Breaker:
    """A trip curve: thermal points (ratio, seconds), the magnetic level, the rating (watts,
    or a share of the feed it protects), how fast the thermal state relaxes."""

    name: str
    ratios: tuple[float, ...]  # ascending
    trip_s: tuple[float, ...]  # falling
    magnetic: float
    rating_w: float | None = None  # None: ``rating_share`` of the feed
    rating_share: float = 1.0
    cooling_s: float | None = None  # None: the thermal state never relaxes
    source: str = ""
    path: str = ""

    def rating_for(self, feed_w: float) -> float:
        """The breaker's rated power on a feed of ``feed_w``."""
        return self.rating_w if self.rating_w is not None else self.rating_share * feed_w

    def trip_time(self, ratio: np.ndarray) -> np.ndarray:
        """The thermal element's trip time at each constant overload ``ratio`` (inf: never)."""
        x = np.asarray(ratio, dtype=float)
        lx, lr, lt = np.log(np.maximum(x, 1e-300)), np.log(self.ratios), np.log(self.trip_s)
        t = np.exp(np.interp(lx, lr, lt))  # (beyond the last point: its time)
        return np.where(x >= self.ratios[0], t, np.inf)


@dataclass(frozen=True)
class BreakerResult:
    """How close one fleet's power came to tripping the breaker."""

    rating_w: float
    peak_ratio: float  # the highest power ÷ the rating
    thermal_peak: float  # the thermal state's highest (1: the thermal element trips)
    margin: float  # min(1 - thermal_peak, 1 - peak_ratio / magnetic); below 0: tripped
    tripped_s: float | None  # when it first tripped, after the start (None: never)
    cause: str | None  # "thermal" or "magnetic"


class BreakerState:
    """The breaker's thermal state, fed the fleet's power a block of cells at a time."""

    def __init__(self, breaker: Breaker, rating_w: float, grid_s: float) -> None:
        if not rating_w > 0:
            raise BadInputError(f"breaker {breaker.name!r}: its rating must be positive")
        self.breaker, self.rating_w, self.grid_s = breaker, rating_w, grid_s
        self.heat = self.thermal_peak = self.peak_ratio = 0.0
        self.cells = 0
        self.tripped_s: float | None = None
        self.cause: str | None = None
        cool = breaker.cooling_s
        self.relax = 1.0 if cool is None else math.exp(-grid_s / cool)
        # cells per pass: the relaxation over one stays well inside a float's range
        self.chunk = 1 << 16 if cool is None else max(1, min(1 << 16, int(500 * cool / grid_s)))

    def feed(self, power_w: np.ndarray) -> None:
        """The next cells of the fleet's power."""
        for first in range(0, power_w.size, self.chunk):
            self._pass(np.asarray(power_w[first : first + self.chunk], dtype=float))

    def _pass(self, power_w: np.ndarray) -> None:
        b, grid = self.breaker, self.grid_s
        x = power_w / self.rating_w
        if not x.size:
            return
        self.peak_ratio = max(self.peak_ratio, float(x.max()))
        rate = 1.0 / b.trip_time(x)  # of the thermal state per second (0: relaxing)
        heating = rate > 0
        # H after cell k = P_k (H_0 + sum_{j<=k} b_j / P_j), P_k the product of the
        # relaxations a_j up to k (1 in a heating cell), b_j = rate_j x cell
        log_p = np.cumsum(np.where(heating, 0.0, math.log(self.relax)))
        p = np.exp(log_p)
        after = p * (self.heat + np.cumsum(rate * grid / p))
        before = np.concatenate([[self.heat], after[:-1]])
        self.thermal_peak = max(self.thermal_peak, float(after.max()))
        if self.tripped_s is None:
            t0 = self.cells * grid
            crossed = np.flatnonzero((after >= 1.0) & (before < 1.0) & heating)
            thermal = (
                t0 + crossed[0] * grid + (1.0 - before[crossed[0]]) / rate[crossed[0]]
                if crossed.size
                else math.inf
            )
            instant = np.flatnonzero(x >= b.magnetic)
            magnetic = t0 + instant[0] * grid if instant.size else math.inf
            if min(thermal, magnetic) < math.inf:
                self.tripped_s = min(thermal, magnetic)
                self.cause = "magnetic" if magnetic <= thermal else "thermal"
        self.heat = float(after[-1])
        self.cells += x.size

    def result(self) -> BreakerResult:
        """How close it came (module docstring)."""
        margin = min(1.0 - self.thermal_peak, 1.0 - self.peak_ratio / self.breaker.magnetic)
        return BreakerResult(
            rating_w=self.rating_w,
            peak_ratio=self.peak_ratio,
            thermal_peak=self.thermal_peak,
            margin=margin,
            tripped_s=self.tripped_s,
            cause=self.cause,
        )


def _trip(r: BreakerResult | None) -> str | None:
    if r is None:
        return None
    return "no" if r.tripped_s is None else f"{r.cause} at {r.tripped_s:,.1f} s"


#: the breaker table of ``powerkit cap``: a row per run, uncapped beside capped
BREAKER_COLUMNS = (
    Column("limit", lambda r: f"{r.limit_w / 1e3:,.1f} kW", key=True),
    Column("policy", "policy", text=True),
    Column("rating kW", lambda r: r.breaker.rating_w, ",.1f", scale=1e-3),
    Column("uncapped peak", lambda r: r.breaker_uncapped.peak_ratio, ".3f"),
    Column("uncapped margin", lambda r: r.breaker_uncapped.margin, ".1%"),
    Column("uncapped trips", lambda r: _trip(r.breaker_uncapped), text=True),
    Column("capped peak", lambda r: r.breaker.peak_ratio, ".3f"),
    Column("capped margin", lambda r: r.breaker.margin, ".1%"),
    Column("capped trips", lambda r: _trip(r.breaker), text=True),
)


def bundled_breakers() -> list[str]:
    """The trip curves that ship with powerkit (``--breaker NAME``)."""
    return sorted(p.stem for p in BUNDLED.glob("*.toml"))


def _number(raw: Any, where: str, what: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise BadInputError(f"{where}: {what} must be a number (got {raw!r})")
    value = float(raw)
    if not (math.isfinite(value) and value > 0):
        raise BadInputError(f"{where}: {what} must be a positive finite number (got {raw!r})")
    return value


#: the cooling times a trip curve may give (s): a millisecond to a year
COOLING_RANGE_S = (1e-3, 365 * 86_400.0)


def _cooling_s(raw: Any, where: str) -> float:
    """A trip curve's cooling time, a positive number within :data:`COOLING_RANGE_S` (one
    that is not overflows or underflows the thermal state's decay)."""
    value = _number(raw, where, "cooling_s")
    low, high = COOLING_RANGE_S
    if not low <= value <= high:
        raise BadInputError(f"{where}: cooling_s {raw!r}: from {low:g} s to {high:g} s (a year)")
    return value


def read_breaker(path: Path | str) -> Breaker:
    """Read and check a trip curve (a path, or the name of a bundled one); one line naming
    the point for anything wrong."""
    path = bundled_or_given(path, BUNDLED, option("breaker"))
    doc = load_toml(Path(path), option("breaker"))
    where = f"{option('breaker')} {path}"
    known = {"name", "source", "rating", "cooling_s", "point", "magnetic"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise BadInputError(
            f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    points = doc.get("point")
    if not isinstance(points, list) or not points:
        raise BadInputError(f"{where}: no [[point]] tables (ratio, trip_s)")
    ratios, times = [], []
    for k, p in enumerate(points, start=1):
        if not isinstance(p, dict) or "ratio" not in p or "trip_s" not in p:
            raise BadInputError(f"{where}: point {k}: needs ratio and trip_s")
        ratios.append(_number(p["ratio"], f"{where}: point {k}", "ratio"))
        times.append(_number(p["trip_s"], f"{where}: point {k}", "trip_s"))
        if k > 1 and not (ratios[-1] > ratios[-2] and times[-1] < times[-2]):
            raise BadInputError(
                f"{where}: point {k}: ratios must rise and trip times fall "
                f"from one point to the next"
            )
    mag = doc.get("magnetic")
    if not isinstance(mag, dict) or "ratio" not in mag:
        raise BadInputError(
            f"{where}: needs a [magnetic] table with its ratio (the level at "
            "which the breaker trips at once)"
        )
    magnetic = _number(mag["ratio"], f"{where}: [magnetic]", "ratio")
    if magnetic <= ratios[0]:
        raise BadInputError(
            f"{where}: [magnetic] ratio {magnetic:g} must be above the first "
            f"point's ({ratios[0]:g})"
        )
    rating_w, share = None, 1.0
    rating = doc.get("rating", "100%")
    text = str(rating).strip()
    if text.endswith("%"):  # a share of the feed: above 100 % too (a continuous load's 125 %)
        try:
            value = float(text[:-1])
        except ValueError:
            value = math.nan
        share = _number(value, f"{where}: rating {rating!r}", "the share") / 100
    else:
        try:
            rating_w = parse_power(text).resolve(None)
        except UnitError as exc:
            raise BadInputError(f"{where}: rating {rating!r}: {exc}") from None
    cooling = doc.get("cooling_s")
    return Breaker(
        name=str(doc.get("name", Path(path).stem)),
        ratios=tuple(ratios),
        trip_s=tuple(times),
        magnetic=magnetic,
        rating_w=rating_w,
        rating_share=share,
        cooling_s=None if cooling is None else _cooling_s(cooling, where),
        source=str(doc.get("source", "")),
        path=str(path),
    )
