"""What-if remedies applied to a power series P (W, every ``dt`` s) with nameplate N (W).

* ``floor:X%`` — the GPUs never draw less than X % of N (a GPU power floor): P' = max(P, X N).
  Cost: the energy added, Σ (P' − P) dt. No slowdown.
* ``fill:X%`` — software fills the dips with work up to X % of N (burn kernels during the
  communication phases): the same P' = max(P, X N) and the same energy, with the work done by
  the job's own GPUs; it differs from a floor in who provides it, not in the grid's view.
* ``ramp:R%/s`` — power follows the workload but changes at most R % of N per second. When
  the workload asks for more than the limited power, the difference is work deferred (a
  backlog, served as soon as the ramp allows: phases stretch); when it asks for less than the
  limited power can fall to, the excess is burned. Cost: the energy burned, and a slowdown
  estimated as the work still deferred at the end over the mean power (the stretch the job
  cannot catch up). Energy is conserved: Σ P' dt = Σ P dt + burned − deferred at the end.
* ``storage:KWH|auto`` — a battery supplies P − G, where the grid sees G, the moving average of
  P over a window (centred) raised by the constant that leaves the battery as charged at the
  end as at the start (the grid makes up its losses); round-trip efficiency
  ``ROUND_TRIP`` (charging and discharging each sqrt of it). The capacity is the range of the
  state of charge, the power rating the largest |P − G|. ``auto`` tries windows from 1 s to
  10 min and keeps the smallest battery whose G passes the spec; a given capacity keeps the
  smoothest G (longest window) that fits in it. Cost: the losses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from powerkit.core.errors import BadInputError, option
from powerkit.core.units import list_items

__all__ = [
    "ROUND_TRIP",
    "STORAGE_WINDOWS_S",
    "Applied",
    "Mitigation",
    "apply",
    "parse_mitigations",
    "storage",
]

#: round-trip efficiency of a Li-ion battery system (AC to AC), a common planning figure
ROUND_TRIP = 0.85
STORAGE_WINDOWS_S = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)


@dataclass(frozen=True)
class Mitigation:
    """One remedy: ``kind`` floor|fill|ramp|storage and its parameter (a share of nameplate,
    a share per second, or kWh; None: auto)."""

    kind: str
    value: float | None

    @property
    def label(self) -> str:
        if self.kind == "storage":
            return "storage:auto" if self.value is None else f"storage:{self.value:g}kWh"
        unit = "%/s" if self.kind == "ramp" else "%"
        assert self.value is not None
        return f"{self.kind}:{100 * self.value:g}{unit}"

    def knob(self, gpu_nameplate_w: float) -> str:
        """What implements the remedy on each GPU of nameplate ``gpu_nameplate_w`` (W): NVIDIA
        power smoothing's floor and ramp rates (Blackwell; ``powerkit smoothing set``), work in
        the dips, or a battery."""
        if self.kind == "storage":
            return "a battery at the site (no GPU knob)"
        assert self.value is not None
        if self.kind == "fill":
            return "software: the job's own work (or burn kernels) in the dips"
        if self.kind == "floor":
            pct = f"{100 * self.value:g}"
            return f"power smoothing floor {pct} % of TGP (smoothing set {option('floor')} {pct})"
        rate = f"{self.value * gpu_nameplate_w:.0f}"
        return (
            f"power smoothing ramp {rate} W/s a GPU "
            f"(smoothing set {option('ramp-up')} {rate} {option('ramp-down')} {rate})"
        )


@dataclass
class Applied:
    """A remedy applied: the grid's power, its costs."""

    mitigation: Mitigation
    power_w: np.ndarray
    extra_energy_j: float
    slowdown_pct: float = 0.0
    storage_kwh: float | None = None
    storage_kw: float | None = None
    window_s: float | None = None
    note: str | None = None


_ITEM = re.compile(r"^(floor|fill|ramp|storage):(.+)$")


def parse_mitigations(text: str) -> list[Mitigation]:
    """``floor:60%,ramp:2%/s,storage:auto,fill:80%`` (also ``storage:500kWh``, ``storage:2MWh``)."""
    out = []
    for item in list_items(text, option("mitigate")):
        m = _ITEM.match(item.lower())
        if m is None:
            raise BadInputError(
                f"{option('mitigate')} {item!r}: one of floor:X%, fill:X%, ramp:R%/s, "
                "storage:KWH|auto"
            )
        kind, arg = m.groups()
        if kind == "storage":
            if arg == "auto":
                out.append(Mitigation(kind, None))
                continue
            scale = 1000.0 if arg.endswith("mwh") else 1.0
            number = arg.removesuffix("mwh").removesuffix("kwh")
            value = _number(number, item) * scale
        else:
            number = arg.removesuffix("/s") if kind == "ramp" else arg
            if not number.endswith("%") or (kind == "ramp") != arg.endswith("/s"):
                want = "R%/s" if kind == "ramp" else "X%"
                raise BadInputError(f"{option('mitigate')} {item!r}: give {kind}:{want}")
            value = _number(number[:-1], item) / 100
            if kind != "ramp" and value > 1:
                raise BadInputError(f"{option('mitigate')} {item!r}: at most 100% of nameplate")
        if value <= 0:
            raise BadInputError(f"{option('mitigate')} {item!r}: must be positive")
        out.append(Mitigation(kind, value))
    if not out:
        raise BadInputError(f"{option('mitigate')}: give at least one remedy")
    return out


def _number(text: str, item: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadInputError(f"{option('mitigate')} {item!r}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise BadInputError(f"{option('mitigate')} {item!r}: not a finite number")
    return value


def floor(p: np.ndarray, level_w: float, dt: float, m: Mitigation) -> Applied:
    out = np.maximum(p, level_w)
    return Applied(m, out, float((out - p).sum() * dt))


def ramp(p: np.ndarray, rate_w_per_s: float, dt: float, m: Mitigation) -> Applied:
    """Rate-limited power with deferred work (see the module docstring)."""
    step = rate_w_per_s * dt
    out = np.empty_like(p)
    level, backlog, burned = float(p[0]), 0.0, 0.0
    for i, demand_w in enumerate(p.tolist()):
        want = demand_w + backlog / dt
        level = min(max(want, level - step), level + step)
        if level >= want:
            burned += (level - want) * dt
            backlog = 0.0
        else:
            backlog = (want - level) * dt
        out[i] = level
    mean = float(p.mean())
    slowdown = 100 * backlog / (mean * p.size * dt) if mean > 0 else 0.0
    return Applied(m, out, burned, slowdown)


def storage(p: np.ndarray, dt: float, window_s: float, m: Mitigation) -> Applied:
    """The grid sees the moving average of P over ``window_s``, raised by the constant that
    leaves the battery as charged at the end as at the start (it makes up the losses); the
    battery covers the rest."""
    n = max(1, round(window_s / dt))
    from scipy.ndimage import uniform_filter1d  # (loaded where used)

    smooth = uniform_filter1d(p, size=n, mode="nearest")
    e = math.sqrt(ROUND_TRIP)  # charging and discharging efficiency

    def drawn(offset: float) -> tuple[np.ndarray, np.ndarray]:
        net = p - (smooth + offset)  # >0: the battery discharges
        return net, np.where(net > 0, -net / e, -net * e) * dt

    lo, hi = -float(np.abs(p).max()) - 1.0, float(np.abs(p).max()) + 1.0
    for _ in range(60):  # the end state of charge grows with the offset: bisect it to zero
        mid = 0.5 * (lo + hi)
        if drawn(mid)[1].sum() < 0:
            lo = mid
        else:
            hi = mid
    net, change = drawn(0.5 * (lo + hi))
    grid = p - net
    soc = np.concatenate(([0.0], np.cumsum(change)))
    capacity_j = float(soc.max() - soc.min())
    losses = float((grid - p).sum() * dt)
    return Applied(
        m, grid, losses, 0.0, capacity_j / 3.6e6, float(np.abs(net).max()) / 1e3, window_s
    )


def apply(
    p: np.ndarray,
    dt: float,
    nameplate_w: float,
    m: Mitigation,
    *,
    passes: Callable[[np.ndarray], bool] | None = None,
) -> Applied:
    """Apply one remedy to ``p``. ``storage:auto`` needs ``passes(power) -> bool`` (the spec);
    without one it takes the longest window."""
    if m.kind in ("floor", "fill"):
        assert m.value is not None
        return floor(p, m.value * nameplate_w, dt, m)
    if m.kind == "ramp":
        assert m.value is not None
        return ramp(p, m.value * nameplate_w, dt, m)
    tries = [storage(p, dt, w, m) for w in STORAGE_WINDOWS_S if w > dt]
    if not tries:
        raise BadInputError("storage: the series is sampled more coarsely than 10 min")
    if m.value is None:
        ok = [a for a in tries if passes is None or passes(a.power_w)]
        if not ok:
            best = tries[-1]
            best.note = "no window up to 10 min passes the spec: the longest is shown"
            return best
        return min(ok, key=lambda a: a.storage_kwh or 0.0)
    fits = [a for a in tries if (a.storage_kwh or 0.0) <= m.value]
    if fits:
        return fits[-1]
    tries[0].note = f"even a 1 s window needs {tries[0].storage_kwh:.3g} kWh, more than {m.value:g}"
    return tries[0]
