"""Intervals for comparing two stages or arms evaluated on the same questions.

A difference in mean F1 between two evaluations of the same questions is judged by a paired bootstrap: resample
questions with replacement, recompute the mean per-question difference, and take the percentile interval. Pairing
removes the between-question variance that unpaired intervals carry, which on 40-100 questions is most of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def paired_bootstrap(before: Sequence[float], after: Sequence[float], *, n_resamples: int = 10_000,
                     confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(mean of after - before, lower, upper) of the percentile interval over `n_resamples` paired resamples."""
    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"paired_bootstrap needs two equally long, non-empty score lists; got {a.shape} and {b.shape}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    diff = b - a
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(n_resamples, len(diff)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(diff.mean()), float(low), float(high)


__all__ = ["paired_bootstrap"]
