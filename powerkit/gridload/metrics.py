"""What a fleet's power looks like to the utility: ramp rates, dynamic range, and spectrum.

Definitions (docs/grid.md), on a power series P sampled every ``dt`` seconds (the fleet sum on
its grid; missing cells are not used for ramps and ranges, and take the mean for the spectrum):

* **ramp** over an interval D (0.1, 1, 10, 60 s): the largest |P(t + D) − P(t)| over all t
  where both cells are present; as % of the mean power, and as MW/s at site scale
  (the largest change divided by D). D shorter than ``dt`` is not resolved.
* **dynamic range** over a period (1 min, 1 h): 1 s means are taken (blocks of 1 s), then
  within each period (tumbling) max − min of them; the largest over the periods.
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

from dataclasses import dataclass, field

import numpy as np
from scipy.signal import get_window, welch

from powerkit.errors import BadInputError

__all__ = [
    "BANDS",
    "DYNAMIC_PERIODS_S",
    "RAMP_INTERVALS_S",
    "Band",
    "Dominant",
    "GridMetrics",
    "Ramp",
    "Range",
    "grid_metrics",
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
class GridMetrics:
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
    psd: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)


def _ramp(p: np.ndarray, present: np.ndarray, k: int) -> float | None:
    if k >= p.size:
        return None
    both = present[k:] & present[:-k]
    if not both.any():
        return None
    return float(np.abs(p[k:] - p[:-k])[both].max())


def _range(p: np.ndarray, present: np.ndarray, per_s: int, period: int) -> float | None:
    """Largest (max − min) of 1 s means within a tumbling period (``per_s`` cells a second,
    ``period`` seconds); a second with a missing cell is left out."""
    seconds = p.size // per_s
    if seconds < 2:
        return None
    blocks = p[: seconds * per_s].reshape(seconds, per_s)
    full = present[: seconds * per_s].reshape(seconds, per_s).all(axis=1)
    means = np.where(full, blocks.mean(axis=1), np.nan)
    periods = max(1, seconds // period)
    spans = means[: periods * period].reshape(periods, -1) if seconds >= period else means[None]
    with np.errstate(all="ignore"):
        ranges = np.nanmax(spans, axis=1) - np.nanmin(spans, axis=1)
    ranges = ranges[np.isfinite(ranges)]
    return float(ranges.max()) if ranges.size else None


def grid_metrics(
    power_w: np.ndarray,
    dt_s: float,
    *,
    present: np.ndarray | None = None,
    scale: float = 1.0,
    semantics: str = "unknown",
) -> GridMetrics:
    """Return the metrics of a regularly sampled power series (see the module docstring)."""
    p = np.asarray(power_w, dtype=np.float64)
    if p.size < 8:
        raise BadInputError("a power series of fewer than 8 samples has no spectrum to speak of")
    ok = np.ones(p.size, dtype=bool) if present is None else np.asarray(present, dtype=bool)
    if not ok.any():
        raise BadInputError("no sample of the fleet is complete (every cell has a GPU missing)")
    mean = float(p[ok].mean())
    m = GridMetrics(dt_s, p.size * dt_s, mean, float(p[ok].min()), float(p[ok].max()), scale)
    pct = lambda w: None if w is None or mean <= 0 else 100 * w / mean  # noqa: E731
    for d in RAMP_INTERVALS_S:
        k = round(d / dt_s)
        if d < dt_s * 0.999 or k < 1:
            m.ramps.append(Ramp(d, None, None, None, resolved=False))
            continue
        w = _ramp(p, ok, k)
        site = None if w is None else w * scale / 1e6 / d
        m.ramps.append(Ramp(d, w, pct(w), site))
    per_s = round(1.0 / dt_s)
    for period in DYNAMIC_PERIODS_S:
        if dt_s > 1.0 or abs(per_s * dt_s - 1.0) > 1e-6 or m.duration_s < period / 60:
            m.dynamic_range.append(Range(period, None, None, None, resolved=False))
            continue
        w = _range(p, ok, per_s, int(period))
        m.dynamic_range.append(Range(period, w, pct(w), None if w is None else w * scale / 1e6))
    _spectrum(m, np.where(ok, p, mean) - mean, semantics)
    if not ok.all():
        m.notes.append(f"{100 * (1 - ok.mean()):.2f}% of the cells had a GPU missing: left out "
                       "of ramps and ranges, set to the mean for the spectrum")  # fmt: skip
    return m


def _spectrum(m: GridMetrics, x: np.ndarray, semantics: str) -> None:
    fs = 1.0 / m.dt_s
    nyquist = fs / 2
    nperseg = int(2 ** np.floor(np.log2(max(8, min(x.size // 4 or x.size, 2**20)))))
    nperseg = min(nperseg, x.size)
    nfft = 4 * nperseg  # zero-padded: finer bins for the dominant frequency
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
        band = Band(low, high, None, None, None, resolved=low < nyquist,
                    clipped_to_hz=top if top < high else None,
                    attenuated=averaged and high > 0.5)  # fmt: skip
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
        m.notes.append("the power is a 1 s average (NVML power usage on this GPU): bands above "
                       "0.5 Hz are attenuated, their figures are lower bounds")  # fmt: skip
    for band in m.bands:
        if not band.resolved:
            m.notes.append(f"the {band.low_hz:g}-{band.high_hz:g} Hz band is above the Nyquist "
                           f"frequency of {nyquist:g} Hz (sampled every {m.dt_s:g} s): not "
                           "resolved")  # fmt: skip
        elif band.clipped_to_hz is not None:
            m.notes.append(f"the {band.low_hz:g}-{band.high_hz:g} Hz band is clipped to "
                           f"{band.clipped_to_hz:g} Hz (the Nyquist frequency)")  # fmt: skip
