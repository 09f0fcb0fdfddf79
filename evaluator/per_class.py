"""Mean per-class accuracy: the accuracy of each class over the images counted toward it, averaged over classes.

`mean_per_class_accuracy` counts a multi-label image toward each class of its reference set (with its image-level
correctness); `class_mean_accuracy` takes one class per image from the caller, which is how Shankar et al.
(2020) average: by the image's original ImageNet label. Classes without a scored image are left out of the mean.
The interval is a percentile bootstrap over `n_boot` resamples of the scored images (seeded, in chunks), since a
mean of class accuracies is not one proportion.

`per_class_shift` sets one model's top-1 per class under two references side by side on the same images, with a
paired bootstrap interval of each class's difference (which classes gain and which lose when the labels change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError
from evaluator.intervals import LEVEL, wilson_interval
from evaluator.references import (
    LabelSets,
    as_label_sets,
    check_boot,
    check_mask,
    check_predictions,
    correct_and_scored,
)

if TYPE_CHECKING:  # scipy.sparse is imported where a membership matrix is made (`LabelSets.to_sparse`)
    from scipy import sparse

N_BOOT = 1000


@dataclass(frozen=True, eq=False)
class PerClassScore:
    """Mean per-class accuracy; `per_class` (n_classes,) is NaN for a class without scored images."""

    accuracy: float
    per_class: np.ndarray
    images_per_class: np.ndarray
    n_scored: int
    n_errors: int
    n_excluded: int
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def n_classes_scored(self) -> int:
        """Classes with at least one scored image: the classes the mean is over."""
        return int(np.count_nonzero(self.images_per_class))


def mean_per_class_accuracy(
    pred: ArrayLike,
    ref: LabelSets | ArrayLike,
    k: int = 1,
    ok: ArrayLike | None = None,
    *,
    failed: ArrayLike | None = None,
    n_classes: int | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> PerClassScore:
    """Mean over reference classes of the accuracy on the images of that class (see the module docstring).

    `ref` `LabelSets` or single labels (n_images,); a multi-label image counts toward each of its classes.
    `n_boot` = 0 skips the bootstrap interval.
    """
    sets = as_label_sets(ref, n_classes)
    arr, answered, wrong = check_predictions(pred, sets, k, ok, failed, batched=False)
    check_boot(n_boot)
    correct, scored = correct_and_scored(arr, sets, k, answered, wrong)
    return _per_class_score(sets, scored, correct, answered | wrong, n_boot, seed)


def _class_counts(sets: LabelSets, scored: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-class accuracy (n_classes,) (NaN where no image) and images per class over the `scored` images of
    `sets`, each image counted toward each of its classes with its `correct` (n_images,)."""
    labels = sets.labels[scored]
    rows, cols = np.nonzero(labels >= 0)
    classes = labels[rows, cols]
    images = np.bincount(classes, minlength=sets.n_classes)
    hits = np.bincount(classes, weights=correct[scored][rows].astype(np.float64), minlength=sets.n_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(images > 0, hits / images, np.nan), images.astype(np.int64)


def class_mean_accuracy(
    correct: ArrayLike,
    classes: ArrayLike,
    scored: ArrayLike | None = None,
    *,
    n_classes: int = 1000,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> PerClassScore:
    """The accuracy of each class over the images counted toward it, averaged over the classes that have any.

    `correct`, `scored` bool (n_images,); `classes` int (n_images,) in 0..n_classes-1, the one class each image
    counts toward (-1: none, the image is excluded). Unscored images are errors. Shankar et al.'s metric uses this
    with the original label as the class. `n_boot` = 0 skips the bootstrap interval.
    """
    labels = LabelSets.from_single(classes, n_classes)
    hits = check_mask(correct, "correct", (labels.n_images,))
    mask = np.ones(labels.n_images, bool) if scored is None else check_mask(scored, "scored", (labels.n_images,))
    check_boot(n_boot)
    rows = mask & (labels.counts > 0)
    return _per_class_score(labels, rows, hits, mask, n_boot, seed)


def _per_class_score(
    sets: LabelSets, scored: np.ndarray, correct: np.ndarray, counted: np.ndarray, n_boot: int, seed: int
) -> PerClassScore:
    """The score over the `scored` images of `sets` (`correct`, `counted` (n_images,)); the membership matrix (and
    scipy) only for the bootstrap interval."""
    per_class, images = _class_counts(sets, scored, correct)
    ci: tuple[float | None, float | None] = (None, None)
    if n_boot:
        ci = _per_class_ci(sets.to_sparse()[scored].astype(np.float64), correct[scored], n_boot, seed)
    return _summary(per_class, images, int(scored.sum()), counted, sets.counts == 0, ci)


def _summary(
    per_class: np.ndarray, images: np.ndarray, n_scored: int, counted: np.ndarray, empty: np.ndarray,
    ci: tuple[float | None, float | None],
) -> PerClassScore:  # fmt: skip
    return PerClassScore(
        float(np.nanmean(per_class)) if np.any(images) else float("nan"),
        per_class,
        images,
        n_scored,
        int((~counted).sum()),
        int((counted & empty).sum()),
        *ci,
    )


def _per_class_ci(
    member: sparse.csr_matrix, correct: np.ndarray, n_boot: int, seed: int, level: float = LEVEL
) -> tuple[float, float]:
    """Percentile bootstrap CI of mean per-class accuracy: resample images, recompute every class, in chunks."""
    n = len(correct)
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    member_t, correct_t = member.T.tocsr(), member.T.multiply(correct[None, :]).tocsr()
    chunk = max(1, 2_000_000 // n)
    means = []
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        draws = rng.integers(0, n, size=(size, n)) + (np.arange(size) * n)[:, None]
        weights = np.bincount(draws.ravel(), minlength=size * n).reshape(size, n).T.astype(np.float64)
        seen, hits = member_t @ weights, correct_t @ weights  # (C, size) each
        with np.errstate(invalid="ignore", divide="ignore"):
            means.append(np.nanmean(np.where(seen > 0, hits / seen, np.nan), axis=0))
    low, high = np.quantile(np.concatenate(means), [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


@dataclass(frozen=True, eq=False)
class ClassShift:
    """Top-1 of one model per class under two references on the same images (the class of each image given, e.g.
    its original label). Every array is (n_classes,): `n_images` images of the class in common, right under a
    only (`n_only_a`), under b only (`n_only_b`), under a and under b; `ci_low`/`ci_high` bound the difference
    b − a (NaN where the class has no image, or no interval was computed)."""

    n_images: np.ndarray
    n_correct_a: np.ndarray
    n_correct_b: np.ndarray
    n_only_a: np.ndarray
    n_only_b: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray

    @property
    def accuracy_a(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.n_images > 0, self.n_correct_a / np.maximum(self.n_images, 1), np.nan)

    @property
    def accuracy_b(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.n_images > 0, self.n_correct_b / np.maximum(self.n_images, 1), np.nan)

    @property
    def difference(self) -> np.ndarray:
        """b − a per class, in [−1, 1]; NaN for a class without images."""
        return self.accuracy_b - self.accuracy_a


def per_class_shift(
    correct_a: ArrayLike,
    correct_b: ArrayLike,
    classes: ArrayLike,
    common: ArrayLike | None = None,
    *,
    n_classes: int = 1000,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
    intervals_for: ArrayLike | None = None,
) -> ClassShift:
    """Per class, top-1 under reference a and under b on the images in `common` whose class is that class.

    `correct_a`, `correct_b`, `common` bool (n_images,); `classes` int (n_images,) in 0..n_classes-1 (-1: in no
    class). The interval of each class's difference is a paired bootstrap within the class: its images are
    resampled with replacement, so its (only a, only b, rest) counts are Multinomial(n_c, observed shares), drawn
    for every class at once; a class with no image right under one reference only gets ± the Wilson upper bound
    of 0 in n_c. `n_boot` = 0 leaves the intervals NaN; `intervals_for` (class indices) limits them to those
    classes (the others NaN), e.g. the classes a report shows.
    """
    labels = LabelSets.from_single(classes, n_classes)
    a = check_mask(correct_a, "correct_a", (labels.n_images,))
    b = check_mask(correct_b, "correct_b", (labels.n_images,))
    keep = np.ones(labels.n_images, bool) if common is None else check_mask(common, "common", (labels.n_images,))
    check_boot(n_boot)
    cls = labels.labels[:, 0].astype(np.int64)
    keep = keep & (cls >= 0)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(cls[keep & mask], minlength=labels.n_classes)

    n = count(np.ones_like(keep))
    only_a, only_b = count(a & ~b), count(b & ~a)
    wanted = np.arange(labels.n_classes) if intervals_for is None else _class_indices(intervals_for, labels.n_classes)
    low, high = np.full(labels.n_classes, np.nan), np.full(labels.n_classes, np.nan)
    low[wanted], high[wanted] = _shift_interval(n[wanted], only_a[wanted], only_b[wanted], n_boot, level, seed)
    return ClassShift(n, count(a), count(b), only_a, only_b, low, high)


def _class_indices(values: ArrayLike, n_classes: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or (arr.size and (arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() >= n_classes)):
        raise EvaluationError(f"intervals_for must be class indices in 0..{n_classes - 1}, got {values!r}")
    return arr.astype(np.int64)


def _shift_interval(
    n: np.ndarray, only_a: np.ndarray, only_b: np.ndarray, n_boot: int, level: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of (only_b − only_a) / n per class over multinomial resamples (`per_class_shift`)."""
    nan = np.full(len(n), np.nan)
    if not n_boot:
        return nan, nan.copy()
    safe = np.maximum(n, 1)
    shares = np.stack([only_a, only_b, n - only_a - only_b], axis=1) / safe[:, None]
    shares[n == 0] = (0.0, 0.0, 1.0)
    draws = np.random.default_rng(seed).multinomial(safe, shares, size=(n_boot, len(n)))  # (n_boot, C, 3)
    low, high = np.quantile((draws[..., 1] - draws[..., 0]) / safe, [(1 - level) / 2, (1 + level) / 2], axis=0)
    flat = (only_a + only_b) == 0
    bound = wilson_interval(np.zeros_like(n), safe, level)[1]
    low, high = np.where(flat, -bound, low), np.where(flat, bound, high)
    return np.where(n == 0, np.nan, low), np.where(n == 0, np.nan, high)
