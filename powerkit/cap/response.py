"""A job's response to a power cap, from its measured cap curve (``pfi sweep`` or a jobs
table): the share of its reference throughput it keeps under a per-GPU cap.

The curve's points are (cap, tokens/s), the reference (uncapped, or the highest cap) last;
an uncapped reference stands at the GPU's nameplate (a cap at the nameplate caps nothing).
A curve that knows the nameplate of the GPUs it was measured on (a sweep's, or a jobs
table's ``nameplate_w``) applies to a GPU of another nameplate as shares of it: its caps are
scaled by the ratio of the nameplates (a cap at 70 % of an H200 reads as 70 % of an A100).
Between points the rate is read off the upper concave hull of the points (a job never does
worse under a higher cap than the chord between two measured ones says, and the marginal
cost of shedding a watt grows as the cap falls: what lets the ``pfi`` policy shed greedily);
above the reference's cap the rate is 1; a job is never capped below its lowest measured cap
(``floor_w``): the curve says nothing of lower ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from powerkit.core.errors import BadInputError
from powerkit.pfi.allocate import upper_hull
from powerkit.pfi.curves import JobCurve

__all__ = ["Response", "response_of"]


@dataclass(frozen=True)
class Response:
    """A job's kept throughput share against its per-GPU cap (hull vertices, ascending)."""

    job: str
    caps_w: np.ndarray
    rates: np.ndarray  # tokens/s ÷ the reference's, at each cap

    @property
    def floor_w(self) -> float:
        """The lowest cap the curve measured: no lower cap is set."""
        return float(self.caps_w[0])

    @property
    def top_w(self) -> float:
        """The reference's cap: at or above it the job runs at full speed."""
        return float(self.caps_w[-1])

    def cap_for(self, kept: float) -> float:
        """The lowest cap under which the job keeps at least ``kept`` of its throughput (its
        floor when even that keeps more)."""
        if kept >= 1.0:
            return self.top_w
        return float(np.interp(kept, self.rates, self.caps_w))

    def rate(self, cap_w: np.ndarray | float) -> np.ndarray:
        """The share of its reference throughput the job keeps under ``cap_w`` (inf: 1)."""
        c = np.asarray(cap_w, dtype=float)
        return np.where(c >= self.top_w, 1.0, np.interp(c, self.caps_w, self.rates))


def response_of(curve: JobCurve, nameplate_w: float) -> Response:
    """The response of ``curve``'s job on a GPU of ``nameplate_w`` (where its uncapped
    reference stands)."""
    points = curve.points()
    ref = points[-1]
    scale = 1.0 if curve.nameplate_w is None else nameplate_w / curve.nameplate_w
    if not ref.tokens_per_s > 0:
        raise BadInputError(f"job {curve.job!r}: its reference run has no throughput")
    caps = np.array([nameplate_w if math.isinf(p.cap_w) else p.cap_w * scale for p in points])
    rates = np.array([p.tokens_per_s / ref.tokens_per_s for p in points])
    order = np.argsort(caps, kind="stable")
    caps, rates = caps[order], np.minimum(rates[order], 1.0)
    if not np.isfinite(caps).all():
        raise BadInputError(f"job {curve.job!r}: its caps are not finite")
    rates[-1] = 1.0  # (the highest cap is the reference: the job at full speed)
    # the hull of points under a last point of 1 is concave and never falls
    hx, hy = upper_hull(caps, rates)
    return Response(curve.job, hx, hy)
