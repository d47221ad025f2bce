"""Intervals for comparing two stages or arms evaluated on the same questions.

A difference in mean F1 between two evaluations of the same questions is judged by a paired bootstrap: resample
questions with replacement, recompute the mean per-question difference, and take the percentile interval. Pairing
removes the between-question variance that unpaired intervals carry, which on 40-100 questions is most of it.

A training curve's trend is judged by `quarter_gain`: the mean of its last quarter of logged steps minus the mean of
its first quarter (each quarter's mean smooths the step-to-step noise, without the lag of a moving average).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bootstrap_mean(values: Sequence[float], *, n_resamples: int = 10_000, confidence: float = 0.95,
                   seed: int = 0) -> tuple[float, float, float]:
    """(mean, lower, upper) of the percentile interval of the mean over `n_resamples` resamples of `values`."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or not len(x):
        raise ValueError(f"bootstrap_mean needs a non-empty list of scores; got shape {x.shape}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_resamples, len(x)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(x.mean()), float(low), float(high)


def paired_bootstrap(before: Sequence[float], after: Sequence[float], *, n_resamples: int = 10_000,
                     confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(mean of after - before, lower, upper) of the percentile interval over `n_resamples` paired resamples."""
    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"paired_bootstrap needs two equally long, non-empty score lists; got {a.shape} and {b.shape}")
    # pairing: the interval of the mean per-question difference
    return bootstrap_mean(b - a, n_resamples=n_resamples, confidence=confidence, seed=seed)


def quarter_gain(values: Sequence[float]) -> dict[str, float]:
    """{"first": mean of the first quarter, "last": mean of the last quarter, "gain": last - first, "points": how
    many values} of a curve's logged values in step order (missing values, NaN, are dropped first; a quarter holds
    at least one value). Fewer than two values give NaN means: no trend to speak of."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if len(x) < 2:
        return {"first": float("nan"), "last": float("nan"), "gain": float("nan"), "points": len(x)}
    k = max(1, len(x) // 4)
    first, last = float(x[:k].mean()), float(x[-k:].mean())
    return {"first": first, "last": last, "gain": last - first, "points": len(x)}


__all__ = ["bootstrap_mean", "paired_bootstrap", "quarter_gain"]
