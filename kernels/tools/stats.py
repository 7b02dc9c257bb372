"""The statistics of a ladder run: rounds, medians with their spread, and whether a step is more than noise.

Every contender is timed once per round, the rounds interleaved, so slow drifts of the GPU (clocks, heat, a
neighbour's work) touch all contenders alike. A ratio between two contenders is taken inside each round, where
both ran under the same conditions, and only then summarised over the rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    """The median of some values and the range they cover."""

    median: float
    low: float
    high: float

    def scaled(self, factor: float) -> Spread:
        """The same spread in other units (e.g. a ratio as a percentage)."""
        return Spread(self.median * factor, self.low * factor, self.high * factor)

    @property
    def within_noise(self) -> bool:
        """For a ratio: whether its range includes 1, i.e. the rounds disagree on which side is faster."""
        return self.low <= 1.0 <= self.high


def spread(values: Sequence[float]) -> Spread:
    """Median and min–max of the values."""
    if not values:
        raise ValueError("no values to summarise")
    return Spread(statistics.median(values), min(values), max(values))


def round_medians(samples: Sequence[Sequence[float]]) -> list[float]:
    """One value per round: the median of that round's repeats."""
    return [statistics.median(repeats) for repeats in samples]


def ratio_spread(numerators: Sequence[float], denominators: Sequence[float]) -> Spread:
    """The per-round ratios numerator / denominator, summarised: a ratio of times measured side by side."""
    if len(numerators) != len(denominators):
        raise ValueError(f"ratios need as many rounds on both sides, got {len(numerators)} and {len(denominators)}")
    return spread([a / b for a, b in zip(numerators, denominators, strict=True)])


def verdict(step: Spread) -> str:
    """A speed-up read with its spread: faster or slower only when every round agrees."""
    if step.within_noise:
        return "within noise"
    return "faster" if step.low > 1.0 else "slower"


def rotated(names: Sequence[str], round_index: int) -> list[str]:
    """The order of one round: the contenders shifted by one place per round, so none always runs first."""
    shift = round_index % len(names) if names else 0
    return [*names[shift:], *names[:shift]]
