"""Confidence intervals of one proportion (an accuracy): Wilson score and Clopper–Pearson, vectorised.

A percentile bootstrap of an accuracy collapses when every resample is alike: 0 of n correct gives "0.00–0.00",
n of n gives "100.00–100.00", as if the accuracy were known exactly from a handful of images. Both intervals here
have width > 0 for every n ≥ 1, at 0 and at n correct too:

wilson             the score interval (Wilson 1927): the p whose z-test against k/n does not reject, i.e.
                   (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n). Close to nominal coverage, the default.
clopper-pearson    the exact interval from the beta quantiles of k and n: conservative (coverage ≥ the level).

`n = 0` (nothing scored) gives NaN bounds. Differences between two accuracies on the same images are paired and
have their own interval (`evaluator.paired`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError, unknown_name

LEVEL = 0.95


def wilson_interval(n_correct: ArrayLike, n: ArrayLike, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of k/n for each entry of `n_correct` (k) and `n` (any broadcastable int shapes).

    Returns (low, high) float arrays in [0, 1]; NaN where n = 0.
    """
    k, trials = _counts(n_correct, n)
    z = _z(level)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / trials
        scale = 1 + z * z / trials
        centre = (p + z * z / (2 * trials)) / scale
        half = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / scale
    low, high = np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
    low, high = np.where(k == 0, 0.0, low), np.where(k == trials, 1.0, high)  # exact ends, no rounding below 0
    empty = trials == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def clopper_pearson_interval(n_correct: ArrayLike, n: ArrayLike, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson (exact) interval of k/n, shapes as `wilson_interval`; NaN where n = 0."""
    from scipy import special  # here, not at import: scipy.special is ~0.1 s of every command that reads references

    k, trials = _counts(n_correct, n)
    alpha = 1 - _check_level(level)
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, special.betaincinv(k, trials - k + 1, alpha / 2), 0.0)
        high = np.where(k < trials, special.betaincinv(k + 1, trials - k, 1 - alpha / 2), 1.0)
    empty = trials == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


INTERVALS: dict[str, Callable[[ArrayLike, ArrayLike, float], tuple[np.ndarray, np.ndarray]]] = {
    "wilson": wilson_interval,
    "clopper-pearson": clopper_pearson_interval,
}


def proportion_interval(
    n_correct: ArrayLike, n: ArrayLike, method: str = "wilson", level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """The `method` interval (a name in INTERVALS) of k/n; raises EvaluationError listing the methods."""
    if method not in INTERVALS:
        raise unknown_name("interval method", method, INTERVALS)
    return INTERVALS[method](n_correct, n, level)


def _check_level(level: float) -> float:
    if not isinstance(level, float | int) or isinstance(level, bool) or not 0 < level < 1:
        raise EvaluationError(f"level must be in (0, 1), got {level!r}")
    return float(level)


# scipy.special.ndtri((1 + level) / 2) of the usual levels, as it computes them (tests/evaluator/test_intervals.py):
# an interval at these levels does not import scipy.special (~0.1 s)
_Z = {0.9: 1.6448536269514722, 0.95: 1.959963984540054, 0.99: 2.5758293035489004}


def _z(level: float) -> float:
    # the standard normal quantile, as scipy.stats.norm.ppf computes it, without importing scipy.stats (~0.7 s)
    level = _check_level(level)
    if level in _Z:
        return _Z[level]
    from scipy import special

    return float(special.ndtri((1 + level) / 2))


def _counts(n_correct: ArrayLike, n: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    k, trials = np.asarray(n_correct), np.asarray(n)
    for arr, what in ((k, "n_correct"), (trials, "n")):
        if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
            raise EvaluationError(f"{what} must be whole counts, got dtype {arr.dtype}")
    try:
        k, trials = np.broadcast_arrays(k.astype(np.float64), trials.astype(np.float64))
    except ValueError:
        raise EvaluationError(f"n_correct {k.shape} and n {trials.shape} do not broadcast") from None
    if (k < 0).any() or (k > trials).any():
        bad = int(np.flatnonzero(((k < 0) | (k > trials)).ravel())[0])
        raise EvaluationError(f"entry {bad}: n_correct = {k.ravel()[bad]:g} is outside 0..n = {trials.ravel()[bad]:g}")
    return k, trials
