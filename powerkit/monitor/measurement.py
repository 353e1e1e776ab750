"""What a window of ``powerkit.Monitor`` measured (``end_window``, ``step``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Measurement"]


@dataclass(frozen=True)
class Measurement:
    """One window: its time, energy per GPU and in all, and how the energy was found.

    Attributes:
        name: the window's name (``begin_window(name)``, or ``step N``).
        start_epoch_s: when it began (epoch s).
        time_s: how long it lasted (s).
        energy_j: energy per GPU (J), by GPU index.
        total_energy_j: energy of all its GPUs (J).
        samples: the sampler's readings inside it (its edges' own readings not counted).
        coverage: the share of its time integrated (the worst GPU's; 1: all of it).
        method: ``counter`` where every GPU's energy counter covered it, else ``trapezoid``
            (power integrated over the readings).
        tokens: the tokens it was given (``end_window``/``step(tokens=)``; None: none).
    """

    name: str
    start_epoch_s: float
    time_s: float
    energy_j: dict[int, float]
    total_energy_j: float
    samples: int  # the sampler's readings inside the window (its edges' own not counted)
    coverage: float  # the share of the window's time integrated (the worst GPU's)
    method: str  # "counter" where every GPU's counter covered it, else "trapezoid"
    tokens: int | None = None

    @property
    def tokens_per_j(self) -> float | None:
        """Tokens per joule, where the window was given its tokens."""
        if self.tokens is None or not self.total_energy_j > 0:
            return None
        return self.tokens / self.total_energy_j
