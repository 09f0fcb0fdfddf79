"""Accuracy of ranked predictions against single-label (ImGT) and multi-label (ReaL, ReGT) references.

Inputs
------
predictions   int array (n_images, k): classes ranked best first; -1 means "no class at this rank" and never
              matches. A 1-D array (n_images,) is read as k = 1. `score_many` takes (n_models, n_images, k).
ok            bool (or 0/1) array (n_images,), or (n_models, n_images) for `score_many`; False marks a failed
              model call. None: all ok.
failed        bool array of the shape of `ok`: of the failed calls, those that count as wrong because the model
              itself failed (it replied, but the reply could not be used: a broken numbered format, a refusal).
              A failed call not marked here is an error of the infrastructure (HTTP, timeout, an unreadable
              image): no answer exists, so it is counted in `n_errors` and never scored. None: every failed call
              is such an error. `failed` may not mark an ok image.
reference     single labels: int array (n_images,), -1 = no label; or multi-label `LabelSets`.

Every image is exactly one of: an error (not ok, not failed), excluded (its reference set is empty), or scored;
n_errors + n_excluded + n_scored = n_images. A failed image with a non-empty set is scored as wrong and also
counted in `n_failed`, so the accuracy excluding failures is n_correct / (n_scored − n_failed). An accuracy is
n_correct / n_scored, NaN when nothing was scored; a reference that labels no image at all is an
`EvaluationError`. Class indices may have any integer dtype; they are compared in the narrowest signed type that
holds n_classes (int16 for ImageNet-1k), which is what makes `score_many` fast. Two accuracies on the same images
are compared in `evaluator.paired`; ranking shifts between two references are in `evaluator.ranking`.

Rules
-----
top-k             correct if the reference label is among the first k predictions.
ReaL rule         correct if the top-1 prediction (top-k: any of the first k) is in the image's label set.
mean per class    for each class c, the accuracy over the scored images whose set contains c (a multi-label image
                  counts toward each of its classes with its image-level correctness); then the unweighted mean
                  over the classes that have at least one scored image. `class_mean_accuracy` groups by one class
                  per image instead (Shankar et al.'s metric groups by the original label).
interval          of an accuracy (one proportion): the Wilson score interval by default, or Clopper–Pearson
                  (`evaluator.intervals`); both stay wide at 0 and n correct, where a bootstrap collapses. None
                  skips it. Mean per-class accuracy (not a proportion) gets a percentile bootstrap over `n_boot`
                  resamples of the scored images, seeded, in chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError, unknown_name
from evaluator.intervals import INTERVALS, LEVEL, proportion_interval
from evaluator.per_class import PerClassScore, class_mean_accuracy, mean_per_class_accuracy
from evaluator.references import (
    LabelSets,
    any_of_first,
    as_label_sets,
    check_int_array,
    check_k,
    check_mask,
    check_predictions,
    correct_and_scored,
    match_predictions,
)

__all__ = [  # the per-class functions live in evaluator.per_class; they are read from here too
    "BatchScore",
    "OopRate",
    "PerClassScore",
    "Score",
    "accuracy_by_category",
    "class_mean_accuracy",
    "image_outcomes",
    "mean_per_class_accuracy",
    "multilabel_accuracy",
    "oop_rate",
    "score_many",
    "topk_accuracy",
]

INTERVAL = "wilson"


@dataclass(frozen=True)
class Score:
    """One accuracy in [0, 1] (NaN when n_scored == 0) with its counts and its interval (None when skipped).

    `n_failed` of the `n_scored` images are failed replies, scored as wrong; `n_errors` are apart.
    """

    accuracy: float
    n_scored: int
    n_correct: int
    n_errors: int
    n_excluded: int
    ci_low: float | None = None
    ci_high: float | None = None
    n_failed: int = 0

    @property
    def accuracy_excluding_failures(self) -> float:
        """n_correct over the answered scored images (failed replies left out); NaN when none was answered."""
        answered = self.n_scored - self.n_failed
        return self.n_correct / answered if answered else float("nan")


@dataclass(frozen=True, eq=False)
class BatchScore:
    """Top-k scores of several rows at once (models, or categories): every array is (n_rows,)."""

    k: int
    n_correct: np.ndarray
    n_scored: np.ndarray
    n_errors: np.ndarray
    n_excluded: np.ndarray
    ci_low: np.ndarray | None = None
    ci_high: np.ndarray | None = None
    n_failed: np.ndarray | None = None  # None: no failure counted as wrong

    @property
    def accuracy(self) -> np.ndarray:
        """(n_rows,) float in [0, 1]; NaN for a row with nothing scored."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.n_correct / self.n_scored

    @property
    def accuracy_excluding_failures(self) -> np.ndarray:
        """(n_rows,) n_correct over the answered scored images; NaN for a row with none."""
        failed = 0 if self.n_failed is None else self.n_failed
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.n_correct / (self.n_scored - failed)

    def score(self, row: int) -> Score:
        """The `Score` of one row of the batch (a model, or a category)."""
        low, high = self.ci_low, self.ci_high
        return Score(
            float(self.accuracy[row]),
            int(self.n_scored[row]),
            int(self.n_correct[row]),
            int(self.n_errors[row]),
            int(self.n_excluded[row]),
            None if low is None else float(low[row]),
            None if high is None else float(high[row]),
            0 if self.n_failed is None else int(self.n_failed[row]),
        )


@dataclass(frozen=True)
class OopRate:
    """Share of answered (ok) images whose answer was out of prompt; NaN when nothing was answered."""

    rate: float
    n_oop: int
    n_answered: int
    n_errors: int


# ---------------------------------------------------------------------------------------------- public API


def topk_accuracy(
    pred: ArrayLike,
    ref: ArrayLike,
    k: int = 1,
    ok: ArrayLike | None = None,
    *,
    failed: ArrayLike | None = None,
    n_classes: int = 1000,
    interval: str | None = INTERVAL,
    level: float = LEVEL,
) -> Score:
    """Top-k accuracy against one label per image (ImGT): `ref` is int (n_images,), -1 = no label (excluded).

    `pred` (n_images, k') with k' ≥ k, or (n_images,); `ok`, `failed` (n_images,) bool; classes in
    0..n_classes-1. `interval`: "wilson", "clopper-pearson" or None (no interval).
    """
    sets = LabelSets.from_single(check_int_array(ref, "reference labels", ndim=1), n_classes)
    return multilabel_accuracy(pred, sets, k, ok, failed=failed, interval=interval, level=level)


def multilabel_accuracy(
    pred: ArrayLike,
    ref: LabelSets,
    k: int = 1,
    ok: ArrayLike | None = None,
    *,
    failed: ArrayLike | None = None,
    interval: str | None = INTERVAL,
    level: float = LEVEL,
) -> Score:
    """ReaL-rule accuracy: top-k is correct when any of the first k predictions is in the image's label set.

    `pred` (n_images, k') with k' ≥ k, or (n_images,); `ok`, `failed` (n_images,) bool. Images with an empty
    set are excluded from the denominator; failed replies count as wrong (module docstring).
    """
    if not isinstance(ref, LabelSets):
        raise EvaluationError(f"ref must be LabelSets, got {type(ref).__name__}; use topk_accuracy for single labels")
    arr, answered, wrong = check_predictions(pred, ref, k, ok, failed, batched=False)
    _check_interval(interval)
    batch = _compute_batch(arr[None], ref, (k,), answered[None], wrong[None])[k]
    return _with_interval(batch, interval, level).score(0)


def score_many(
    preds: ArrayLike,
    ref: LabelSets | ArrayLike,
    ks: Sequence[int] = (1, 5),
    ok: ArrayLike | None = None,
    *,
    failed: ArrayLike | None = None,
    n_classes: int | None = None,
    interval: str | None = INTERVAL,
    level: float = LEVEL,
) -> dict[int, BatchScore]:
    """Score n_models models in one vectorised pass: the path for rescoring stored runs against a new snapshot.

    `preds` int (n_models, n_images, k); `ref` `LabelSets` or single labels (n_images,) (then `n_classes`,
    default 1000); `ok`, `failed` (n_images,) or (n_models, n_images). Returns {k: BatchScore} for each k in `ks`.
    """
    sets = as_label_sets(ref, n_classes)
    ks = tuple(ks)
    if not ks:
        raise EvaluationError("ks is empty; give at least one k, e.g. (1, 5)")
    arr, answered, wrong = check_predictions(preds, sets, max(ks), ok, failed, batched=True)
    for k in ks:
        check_k(k, arr.shape[-1])
    _check_interval(interval)
    out = _compute_batch(arr, sets, ks, answered, wrong)
    return {k: _with_interval(batch, interval, level) for k, batch in out.items()}


def image_outcomes(
    preds: ArrayLike,
    ref: LabelSets | ArrayLike,
    k: int = 1,
    ok: ArrayLike | None = None,
    *,
    failed: ArrayLike | None = None,
    n_classes: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per image: (correct, scored), two bool arrays of the leading shape of `preds` ((n_images,) for
    (n_images, k) predictions, (n_models, n_images) for (n_models, n_images, k)).

    `scored` marks the images an accuracy counts (answered or failed, with a non-empty set); `correct` the scored
    ones right under the ReaL rule at k. These are what paired comparisons and joint bootstraps resample.
    """
    sets = as_label_sets(ref, n_classes)
    batched = np.ndim(preds) == 3
    arr, answered, wrong = check_predictions(preds, sets, k, ok, failed, batched=batched)
    correct, scored = correct_and_scored(arr, sets, k, answered, wrong)
    return correct & scored, scored


def accuracy_by_category(
    pred: ArrayLike,
    ref: LabelSets | ArrayLike,
    categories: ArrayLike,
    k: int = 1,
    ok: ArrayLike | None = None,
    *,
    failed: ArrayLike | None = None,
    n_classes: int | None = None,
    interval: str | None = INTERVAL,
    level: float = LEVEL,
) -> dict[str, Score]:
    """The accuracy of each category ("A", "B", "M", "Z", "X", "U", ...), keyed in sorted order.

    `categories` (n_images,) strings. A category whose images all have empty sets (e.g. Z) gets NaN accuracy.
    """
    sets = as_label_sets(ref, n_classes)
    arr, answered, wrong = check_predictions(pred, sets, k, ok, failed, batched=False)
    cats = np.asarray(categories).astype(str)
    if cats.shape != (sets.n_images,):
        raise EvaluationError(f"categories has shape {cats.shape}, expected ({sets.n_images},)")
    _check_interval(interval)
    correct, scored = correct_and_scored(arr, sets, k, answered, wrong)
    names, codes = np.unique(cats, return_inverse=True)

    def per_category(rows: np.ndarray) -> np.ndarray:
        return np.bincount(codes[rows], minlength=len(names))

    counted = answered | wrong
    batch = BatchScore(
        k,
        per_category(correct & scored),
        per_category(scored),
        per_category(~counted),
        per_category(counted & (sets.counts == 0)),
        n_failed=per_category(wrong & scored),
    )
    batch = _with_interval(batch, interval, level)
    return {name: batch.score(i) for i, name in enumerate(names.tolist())}


def oop_rate(out_of_prompt: ArrayLike, ok: ArrayLike | None = None) -> OopRate:
    """Out-of-prompt rate among answered images: `out_of_prompt` and `ok` are bool (n_images,). Errors apart."""
    oop = check_mask(out_of_prompt, "out_of_prompt", np.shape(out_of_prompt))
    if oop.ndim != 1:
        raise EvaluationError(f"out_of_prompt must be 1-D, got shape {oop.shape}")
    mask = np.ones(oop.shape, bool) if ok is None else check_mask(ok, "ok", oop.shape)
    n_oop, n_answered = int((oop & mask).sum()), int(mask.sum())
    return OopRate(n_oop / n_answered if n_answered else float("nan"), n_oop, n_answered, int((~mask).sum()))


# ----------------------------------------------------------------------------------- validation and compute


def _check_interval(interval: str | None) -> None:
    if interval is not None and interval not in INTERVALS:
        raise unknown_name("interval method", str(interval), INTERVALS)


def _compute_batch(
    arr: np.ndarray, ref: LabelSets, ks: Sequence[int], answered: np.ndarray, wrong: np.ndarray
) -> dict[int, BatchScore]:
    """Counts for each k from one membership test of the first max(ks) columns. Trusts its input."""
    hits = match_predictions(arr, ref, max(ks))
    labelled = ref.counts > 0
    counted = answered | wrong if wrong.any() else answered
    scored = counted & labelled
    n_scored = np.count_nonzero(scored, axis=-1)
    n_errors = np.count_nonzero(~counted, axis=-1)
    n_excluded = np.count_nonzero(counted & ~labelled, axis=-1)
    n_failed = np.count_nonzero(wrong & labelled, axis=-1)
    right = answered & labelled
    out = {}
    for k in ks:
        n_correct = np.count_nonzero(any_of_first(hits, k) & right, axis=-1)
        out[k] = BatchScore(k, n_correct, n_scored, n_errors, n_excluded, n_failed=n_failed)
    return out


def _with_interval(batch: BatchScore, interval: str | None, level: float) -> BatchScore:
    if interval is None:
        return batch
    low, high = proportion_interval(batch.n_correct, batch.n_scored, interval, level)
    return replace(batch, ci_low=low, ci_high=high)
