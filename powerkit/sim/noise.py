"""Deterministic noise: standard normal draws that depend only on (seed, GPU, stream, key),
so that a simulated reading is the same however time is split into reads."""

from __future__ import annotations

import numpy as np

__all__ = ["hash_normal"]

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
    return x ^ (x >> np.uint64(31))


def hash_normal(seed: int, gpu: int, stream: int, keys: np.ndarray) -> np.ndarray:
    """Return standard normal draws that depend only on (seed, gpu, stream, key)."""
    base = np.uint64((seed * 1_000_003 + gpu * 7919 + stream * 104_729) & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        h1 = _splitmix64(keys.astype(np.uint64) * np.uint64(2) + base)
        h2 = _splitmix64(h1 ^ np.uint64(0xD6E8FEB86659FD93))
    u1 = ((h1 >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53
    u2 = (h2 >> np.uint64(11)).astype(np.float64) / 2.0**53
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
