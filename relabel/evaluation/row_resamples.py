"""Each row's top-1 on its own images, over the same bootstrap draws for every row.

The draws are `evaluator.paired.JointBootstrap`'s resamples of a reference's n images: they depend on n and the seed
only, never on which rows are resampled. Row k's value in draw b is Σ_i c_bi · correct_ki / Σ_i c_bi · scored_ki,
with c_bi how often draw b took image i. Both sums are integers below 2^24 (they add up at most n draws), so they
are exact in float32 whatever the order of addition: a row's values are bit for bit the same whichever other rows
are stacked beside it. A row usually scores nearly every image, so its denominator is taken as n minus the draws
of the few images it did not score, which saves a second matrix product over all images.
"""

from __future__ import annotations

import numpy as np

from evaluator.errors import EvaluationError
from evaluator.paired import JointBootstrap


def resample_top1(correct: np.ndarray, scored: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, k): the top-1 of each of k rows on its `scored` images in each of `n_boot` draws of the n images.

    `correct`, `scored`: bool (k, n); `correct` counts only where `scored`. NaN where a draw holds none of a row's
    images. Raises EvaluationError for mismatched shapes or more than 2^24 images (float32 sums would round).
    """
    if correct.ndim != 2 or correct.shape != scored.shape or not correct.shape[1]:
        raise EvaluationError(
            f"correct and scored must be (k, n) of the same shape, got {correct.shape}, {scored.shape}"
        )
    k, n = correct.shape
    if n >= 2**24:
        raise EvaluationError(f"{n} images: float32 sums of draws are exact only below 2^24 images")
    values = np.ascontiguousarray(correct & scored, dtype=np.float32)
    holes = [np.flatnonzero(~row) for row in scored]
    out = []
    for counts in JointBootstrap(n, n_boot, seed).counts():
        totals = values @ counts.T  # (k, chunk)
        seen = np.empty_like(totals)
        for row, missing in enumerate(holes):
            seen[row] = n - counts[:, missing].sum(axis=1) if len(missing) else n
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append((totals.astype(np.float64) / seen.astype(np.float64)).T)
    return np.concatenate(out) if out else np.zeros((0, k))
