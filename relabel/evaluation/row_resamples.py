"""Each row's top-1 on its own images, over the same bootstrap draws for every row.

The draws are `evaluator.paired.JointBootstrap`'s resamples of a reference's n images: they depend on n and the seed
only, never on which rows are resampled. Row k's value in draw b is Σ_i c_bi · correct_ki / Σ_i c_bi · scored_ki,
with c_bi how often draw b took image i. Both sums are integers below 2^24 (they add up at most n draws), so they
are exact in float32 whatever the order of addition: a row's values are bit for bit the same whichever other rows
are stacked beside it. Rows usually score nearly the same images, so a row's denominator is taken as the draws of
the images any row scored minus those of the few it did not (rows with the same images share it), which saves a
second matrix product over all images.
"""

from __future__ import annotations

import numpy as np

from evaluator.errors import EvaluationError
from evaluator.paired import JointBootstrap

BLAS_ROWS = 8  # rows from which the resampled sums are a BLAS product (see `resample_top1`)


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
    masks, which = _distinct(scored)
    base = np.logical_or.reduce(masks, axis=0)
    seen_base = np.ascontiguousarray(base, dtype=np.float32)
    # each distinct mask's images drawn: the draws of the images any row scored minus those it did not, or the
    # draws of its own images, whichever sums fewer columns
    plans = [(True, np.flatnonzero(base & ~m)) if (base & ~m).sum() <= m.sum() else (False, np.flatnonzero(m))
             for m in masks]  # fmt: skip
    out = []
    for counts in JointBootstrap(n, n_boot, seed).counts():
        # a few rows: einsum's loops, since a BLAS product of a few rows wakes BLAS's threads, which then spin for
        # more CPU time than the product takes; many rows: BLAS, whose blocked product einsum's plain loops trail
        # by 10x (the sums are the same either way: whole numbers, exact in float32)
        totals = values @ counts.T if k >= BLAS_ROWS else np.einsum("kn,cn->kc", values, counts)  # (k, chunk)
        drawn = np.einsum("cn,n->c", counts, seen_base)  # (chunk,)
        seen = np.stack([drawn - counts[:, idx].sum(axis=1) if minus else counts[:, idx].sum(axis=1)
                         for minus, idx in plans])  # fmt: skip
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append((totals.astype(np.float64) / seen[which].astype(np.float64)).T)
    return np.concatenate(out)


def _distinct(scored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of `scored` (m, n), and for each row the index of its distinct row (k,)."""
    first: dict[bytes, int] = {}  # a mask's bits -> the first row that has it
    for row, mask in enumerate(scored):
        first.setdefault(np.packbits(mask).tobytes(), row)
    position = {row: i for i, row in enumerate(first.values())}
    which = np.array([position[first[np.packbits(mask).tobytes()]] for mask in scored])
    return scored[list(first.values())], which
