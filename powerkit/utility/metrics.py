"""What a fleet's power looks like to the utility: ramp rates, dynamic range, and spectrum.

Definitions (docs/utility.md), on a power series P sampled every ``dt`` seconds (the fleet sum on
its grid; missing cells are not used for ramps and ranges, and take the mean for the spectrum):

* **ramp** over an interval D (0.1, 1, 10, 60 s): the largest |P(t + D) − P(t)| over all t
  where both cells are present; as % of the mean power, and as MW/s at site scale
  (the largest change divided by D). D shorter than ``dt`` is not resolved.
* **dynamic range** within a period (1 min, 1 h): the mean power over each clock second
  [s, s + 1) (UTC; P held constant over each cell, so a grid that does not divide 1 s is
  weighted by overlap; a second is complete when present cells cover all of it); within each
  clock period [kT, (k + 1)T) that lies wholly inside the series, max − min of its complete
  seconds' means; the largest over those periods. Periods cut by the series' start or end are
  excluded and counted (``partial_periods``); with none whole, the range is not resolved and
  says why. On a grid coarser than 1 s the seconds take their cell's value: the range is then
  between cell means (``resolution_s``).
* **spectrum**: Welch's estimate of the power spectral density of P − mean (Hann segments
  of a power of two, at most a quarter of the series, 50 % overlap). A band's
  ``variance_share`` is its integral over the variance of P; its ``peak_amplitude_w`` is the
  amplitude of the strongest sinusoid in it, sqrt(2 × the largest bin of the power spectrum).
  A band above the Nyquist frequency (half the sampling rate) is not resolved; one that
  crosses it is clipped to it, and says so. Power averaged over 1 s (NVML's power usage on
  Ampere and newer) attenuates content above about 0.5 Hz: such bands are flagged.
* **dominant**: the strongest bin above the lowest two (the drift), refined by a parabola
  through its neighbours: for synchronous training, the iteration rate.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from powerkit.core.errors import BadInputError

__all__ = [
    "BANDS",
    "DYNAMIC_PERIODS_S",
    "RAMP_INTERVALS_S",
    "Band",
    "Dominant",
    "Ramp",
    "Range",
    "SwingMetrics",
    "second_means",
    "swing_metrics",
]

RAMP_INTERVALS_S = (0.1, 1.0, 10.0, 60.0)
DYNAMIC_PERIODS_S = (60.0, 3600.0)
BANDS = ((0.1, 1.0), (1.0, 5.0), (5.0, 20.0))
_AVERAGED = ("average_1s",)  # semantics whose power is a 1 s average


@dataclass
class Ramp:
    interval_s: float
    max_w: float | None
    max_pct_of_mean: float | None
    site_mw_per_s: float | None
    resolved: bool = True


@dataclass
class Range:
    period_s: float
    max_w: float | None
    max_pct_of_mean: float | None
    site_mw: float | None
    resolved: bool = True
    periods: int = 0  # whole clock periods measured
    partial_periods: int = 0  # periods cut by the series' start or end: excluded
    resolution_s: float = 1.0  # the means compared: 1 s, or the cell when it is longer
    note: str | None = None  # why it is not resolved


@dataclass
class Band:
    low_hz: float
    high_hz: float
    variance_share: float | None
    peak_amplitude_w: float | None
    site_peak_amplitude_mw: float | None
    resolved: bool
    clipped_to_hz: float | None = None  # the band's top was above the Nyquist frequency
    attenuated: bool = False  # averaged power: content above ~0.5 Hz is smoothed away


@dataclass
class Dominant:
    frequency_hz: float | None
    amplitude_w: float | None
    site_amplitude_mw: float | None


@dataclass
class SwingMetrics:
    """The metrics of one power series (``scale``: site watts per series watt)."""

    dt_s: float
    duration_s: float
    mean_w: float
    min_w: float
    max_w: float
    scale: float
    ramps: list[Ramp] = field(default_factory=list)
    dynamic_range: list[Range] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    dominant: Dominant | None = None
    resolution_hz: float | None = None
    notes: list[str] = field(default_factory=list)
    #: the PSD (Hz, W^2/Hz) for figures; not in the JSON
    psd: tuple[np.ndarray, np.ndarray] | None = field(
        default=None, repr=False, metadata={"doc": False}
    )


def _ramp(p: np.ndarray, present: np.ndarray, k: int) -> float | None:
    if k >= p.size:
        return None
    both = present[k:] & present[:-k]
    if not both.any():
        return None
    return float(np.abs(p[k:] - p[:-k])[both].max())


def second_means(
    p: np.ndarray, present: np.ndarray, dt_s: float, start_s: float
) -> tuple[int, np.ndarray]:
    """(first clock second, mean power of each whole clock second inside the series): cell k
    covers [start + k·dt, start + (k + 1)·dt) at its value; NaN for a second that a missing
    cell touches."""
    g_us, t0_us = round(dt_s * 1e6), round(start_s * 1e6)
    end_us = t0_us + p.size * g_us
    first, last = -(-t0_us // 1_000_000), end_us // 1_000_000  # seconds [first, last)
    if last <= first:
        return first, np.empty(0)
    edges = np.arange(first, last + 1, dtype=np.int64) * 1_000_000 - t0_us  # from the start
    energy = np.concatenate([[0.0], np.cumsum(np.where(present, p, 0.0)) * (g_us / 1e6)])
    at = np.interp(edges.astype(np.float64), np.arange(p.size + 1) * float(g_us), energy)
    means = np.diff(at)  # joules over one second: watts
    missing = np.concatenate([[0], np.cumsum(~present)])
    lo = edges[:-1] // g_us  # the first cell a second touches
    hi = np.minimum(-(-edges[1:] // g_us), p.size)  # one past the last
    means[missing[hi] - missing[lo] > 0] = np.nan
    return int(first), means


def _range(first: int, means: np.ndarray, period: int) -> tuple[float | None, int, int]:
    """(largest max − min of complete seconds within a whole clock period, whole periods,
    partial periods) for periods of ``period`` seconds starting at multiples of it."""
    if means.size == 0:
        return None, 0, 0
    last = first + means.size  # seconds [first, last)
    k0, k1 = -(-first // period), last // period  # whole periods [k0, k1)
    whole = max(0, k1 - k0)
    partial = (last - 1) // period - first // period + 1 - whole  # touched, not whole
    if not whole:
        return None, 0, partial
    spans = means[k0 * period - first : k1 * period - first].reshape(k1 - k0, period)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a period of missing seconds only
        ranges = np.nanmax(spans, axis=1) - np.nanmin(spans, axis=1)
    ranges = ranges[np.isfinite(ranges)]
    return (float(ranges.max()) if ranges.size else None), whole, partial


def swing_metrics(
    power_w: np.ndarray,
    dt_s: float,
    *,
    present: np.ndarray | None = None,
    scale: float = 1.0,
    semantics: str = "unknown",
    start_s: float = 0.0,
) -> SwingMetrics:
    """Return the metrics of a regularly sampled power series (see the module docstring);
    ``start_s``: the epoch time where its first cell begins (clock seconds and periods)."""
    p = np.asarray(power_w, dtype=np.float64)
    if p.size < 8:
        raise BadInputError("a power series of fewer than 8 samples has no spectrum to speak of")
    ok = np.ones(p.size, dtype=bool) if present is None else np.asarray(present, dtype=bool)
    if not ok.any():
        raise BadInputError("no sample of the fleet is complete (every cell has a GPU missing)")
    mean = float(p[ok].mean())
    m = SwingMetrics(dt_s, p.size * dt_s, mean, float(p[ok].min()), float(p[ok].max()), scale)
    pct = lambda w: None if w is None or mean <= 0 else 100 * w / mean  # noqa: E731
    for d in RAMP_INTERVALS_S:
        k = round(d / dt_s)
        if d < dt_s * 0.999 or k < 1:
            m.ramps.append(Ramp(d, None, None, None, resolved=False))
            continue
        w = _ramp(p, ok, k)
        site = None if w is None else w * scale / 1e6 / d
        m.ramps.append(Ramp(d, w, pct(w), site))
    first, means = second_means(p, ok, dt_s, start_s)
    for period in DYNAMIC_PERIODS_S:
        w, whole, partial = _range(first, means, int(period))
        r = Range(
            period,
            w,
            pct(w),
            None if w is None else w * scale / 1e6,
            w is not None,
            whole,
            partial,
            max(1.0, dt_s),
        )
        if w is None:
            r.note = (
                f"no whole clock {'minute' if period == 60 else 'hour'} with a complete "
                "second in the series"
                if whole
                else f"the series ({m.duration_s:,.0f} s) holds no whole clock "
                f"{'minute' if period == 60 else 'hour'}"
            )
        m.dynamic_range.append(r)
    _spectrum(m, np.where(ok, p, mean) - mean, semantics)
    if not ok.all():
        m.notes.append(
            f"{100 * (1 - ok.mean()):.2f}% of the cells had a GPU missing: left out "
            "of ramps and ranges, set to the mean for the spectrum"
        )
    return m


def _spectrum(m: SwingMetrics, x: np.ndarray, semantics: str) -> None:
    fs = 1.0 / m.dt_s
    nyquist = fs / 2
    nperseg = int(2 ** np.floor(np.log2(max(8, min(x.size // 4 or x.size, 2**20)))))
    nperseg = min(nperseg, x.size)
    nfft = 4 * nperseg  # zero-padded: finer bins for the dominant frequency
    from scipy.signal import get_window, welch  # (loaded where used)

    f, density = welch(x, fs=fs, nperseg=nperseg, nfft=nfft, detrend=False, scaling="density")
    window = get_window("hann", nperseg)
    # the same estimate as a power spectrum (a sinusoid of amplitude A peaks at A^2 / 2)
    spectrum = density * fs * float((window**2).sum()) / float(window.sum()) ** 2
    df = float(f[1] - f[0])
    m.resolution_hz = fs / nperseg
    m.psd = (f, density)
    variance = float(np.var(x))
    averaged = semantics in _AVERAGED
    for low, high in BANDS:
        top = min(high, nyquist)
        band = Band(
            low,
            high,
            None,
            None,
            None,
            resolved=low < nyquist,
            clipped_to_hz=top if top < high else None,
            attenuated=averaged and high > 0.5,
        )
        if band.resolved:
            sel = (f >= low) & (f < top) if top < nyquist else (f >= low) & (f <= top)
            if sel.any():
                share = float(density[sel].sum() * df) / variance if variance > 0 else 0.0
                amplitude = float(np.sqrt(2 * spectrum[sel].max()))
                band.variance_share = share
                band.peak_amplitude_w = amplitude
                band.site_peak_amplitude_mw = amplitude * m.scale / 1e6
        m.bands.append(band)
    low_bins = max(2, int(np.ceil(2 * m.resolution_hz / df)))  # skip the drift near 0 Hz
    if spectrum.size > low_bins + 2:
        i = low_bins + int(np.argmax(spectrum[low_bins:-1]))
        a, b, c = spectrum[i - 1], spectrum[i], spectrum[i + 1]
        shift = 0.5 * (a - c) / (a - 2 * b + c) if (a - 2 * b + c) != 0 else 0.0
        amplitude = float(np.sqrt(2 * b))
        m.dominant = Dominant(float(f[i] + shift * df), amplitude, amplitude * m.scale / 1e6)
    if averaged:
        m.notes.append(
            "the power is a 1 s average (NVML power usage on this GPU): bands above "
            "0.5 Hz are attenuated, their figures are lower bounds"
        )
    for band in m.bands:
        if not band.resolved:
            m.notes.append(
                f"the {band.low_hz:g}-{band.high_hz:g} Hz band is above the Nyquist "
                f"frequency of {nyquist:g} Hz (sampled every {m.dt_s:g} s): not "
                "resolved"
            )
        elif band.clipped_to_hz is not None:
            m.notes.append(
                f"the {band.low_hz:g}-{band.high_hz:g} Hz band is clipped to "
                f"{band.clipped_to_hz:g} Hz (the Nyquist frequency)"
            )
