"""Uncertainty for the book's comparisons: bootstrap intervals through scipy.stats.bootstrap.

Every interval is a percentile-BCa bootstrap (scipy's default method) with a seeded
generator, so a rerun with the same seed gives the same interval.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy import stats


def _vector(values, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError(f"{name} must be a 1-D sequence of at least 2 values, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _bootstrap(data: tuple, statistic: Callable, paired: bool, confidence: float,
               n_resamples: int, seed: int) -> tuple[float, float]:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if np.ptp(np.concatenate(data)) == 0 and not paired:
        return float(data[0][0]), float(data[0][0])  # a constant sample: the interval is a point
    res = stats.bootstrap(data, statistic, paired=paired, confidence_level=confidence,
                          n_resamples=n_resamples, vectorized=False,
                          rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def bootstrap_ci(values, statistic: Callable = np.mean, confidence: float = 0.95,
                 n_resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(statistic(values), low, high): a bootstrap interval for one sample."""
    x = _vector(values, "values")
    low, high = _bootstrap((x,), statistic, False, confidence, n_resamples, seed)
    return float(statistic(x)), low, high


def paired_bootstrap_diff(a, b, confidence: float = 0.95, n_resamples: int = 2000,
                          seed: int = 0) -> tuple[float, float, float]:
    """(mean(a - b), low, high) resampling the pairs (a_i, b_i) together.

    Pairing matters: a model and a baseline scored on the same items share each item's
    difficulty, and resampling items (not the two columns separately) keeps that.
    """
    x, y = _vector(a, "a"), _vector(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same length, got {x.size} and {y.size}")
    d = x - y
    if np.ptp(d) == 0:
        return float(d[0]), float(d[0]), float(d[0])
    low, high = _bootstrap((x, y), lambda u, v: np.mean(u - v), True, confidence, n_resamples, seed)
    return float(d.mean()), low, high


def mean_std(values, digits: int = 3) -> str:
    """'mean ± std' with the sample standard deviation (ddof=1); one value has no spread."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("mean_std needs at least one value")
    sd = x.std(ddof=1) if x.size > 1 else 0.0
    return f"{x.mean():.{digits}f} ± {sd:.{digits}f}"
