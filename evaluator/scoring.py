"""Accuracy of ranked predictions against single-label (ImGT) and multi-label (ReaL, ReGT) references.

Inputs
------
predictions   int array (n_images, k): classes ranked best first; -1 means "no class at this rank" and never
              matches. A 1-D array (n_images,) is read as k = 1. `score_many` takes (n_models, n_images, k).
ok            bool (or 0/1) array (n_images,), or (n_models, n_images) for `score_many`; False marks a failed
              model call. Failed rows are counted in `n_errors` and never scored as wrong. None: all ok.
reference     single labels: int array (n_images,), -1 = no label; or multi-label `LabelSets`.

Every image is exactly one of: an error (not ok), excluded (ok, but its reference set is empty), or scored;
n_errors + n_excluded + n_scored = n_images. An accuracy is n_correct / n_scored, NaN when nothing was scored
(every call failed, or every image of a category is excluded); a reference that labels no image at all is an
`EvaluationError`. Class indices may have any integer dtype; they are compared in the narrowest signed type that
holds n_classes (int16 for ImageNet-1k), which is what makes `score_many` fast. Ranking shifts between two
references are in `evaluator.ranking`.

Rules
-----
top-k             correct if the reference label is among the first k predictions.
ReaL rule         correct if the top-1 prediction (top-k: any of the first k) is in the image's label set.
mean per class    for each class c, the accuracy over the scored images whose set contains c (a multi-label image
                  counts toward each of its classes with its image-level correctness); then the unweighted mean
                  over the classes that have at least one scored image.
bootstrap CI      percentile interval over `n_boot` resamples of the scored images, with replacement, seeded.
                  For an accuracy the number of correct images in a resample is Binomial(n_scored, accuracy)
                  exactly, so the resamples are drawn from that distribution in one vectorised call. Mean
                  per-class accuracy resamples image indices (in chunks) and recomputes every class.
                  The single-model functions bootstrap by default (n_boot = 1000; 0 skips it), `score_many`
                  only when asked; a per-category CI is that category's own interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse

from evaluator.errors import EvaluationError
from evaluator.references import (
    LabelSets,
    any_of_first,
    as_label_sets,
    check_classes,
    check_int_array,
    check_mask,
    match_predictions,
)

N_BOOT = 1000
LEVEL = 0.95


@dataclass(frozen=True)
class Score:
    """One accuracy in [0, 1] (NaN when n_scored == 0) with its counts and, when bootstrapped, its CI."""

    accuracy: float
    n_scored: int
    n_correct: int
    n_errors: int
    n_excluded: int
    ci_low: float | None = None
    ci_high: float | None = None


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

    @property
    def accuracy(self) -> np.ndarray:
        """(n_rows,) float in [0, 1]; NaN for a row with nothing scored."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.n_correct / self.n_scored

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
        )


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
    n_classes: int = 1000,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> Score:
    """Top-k accuracy against one label per image (ImGT): `ref` is int (n_images,), -1 = no label (excluded).

    `pred` (n_images, k') with k' ≥ k, or (n_images,); `ok` (n_images,) bool; classes in 0..n_classes-1.
    `n_boot` = 0 skips the bootstrap CI.
    """
    sets = LabelSets.from_single(check_int_array(ref, "reference labels", ndim=1), n_classes)
    return multilabel_accuracy(pred, sets, k, ok, n_boot=n_boot, seed=seed)


def multilabel_accuracy(
    pred: ArrayLike, ref: LabelSets, k: int = 1, ok: ArrayLike | None = None, *, n_boot: int = N_BOOT, seed: int = 0
) -> Score:
    """ReaL-rule accuracy: top-k is correct when any of the first k predictions is in the image's label set.

    `pred` (n_images, k') with k' ≥ k, or (n_images,); `ok` (n_images,) bool. Images with an empty set are
    excluded from the denominator. `n_boot` = 0 skips the bootstrap CI.
    """
    if not isinstance(ref, LabelSets):
        raise EvaluationError(f"ref must be LabelSets, got {type(ref).__name__}; use topk_accuracy for single labels")
    arr, mask = _check_inputs(pred, ref, k, ok, batched=False)
    _check_boot(n_boot)
    batch = _compute_batch(arr[None], ref, (k,), mask[None])[k]
    score = batch.score(0)
    if n_boot:
        low, high = _binomial_ci(batch.n_correct, batch.n_scored, n_boot, seed)
        score = replace(score, ci_low=float(low[0]), ci_high=float(high[0]))
    return score


def score_many(
    preds: ArrayLike,
    ref: LabelSets | ArrayLike,
    ks: Sequence[int] = (1, 5),
    ok: ArrayLike | None = None,
    *,
    n_classes: int | None = None,
    n_boot: int = 0,
    seed: int = 0,
) -> dict[int, BatchScore]:
    """Score n_models models in one vectorised pass: the path for rescoring stored runs against a new snapshot.

    `preds` int (n_models, n_images, k); `ref` `LabelSets` or single labels (n_images,) (then `n_classes`,
    default 1000); `ok` (n_images,) or (n_models, n_images). Returns {k: BatchScore} for each k in `ks`.
    """
    sets = as_label_sets(ref, n_classes)
    ks = tuple(ks)
    if not ks:
        raise EvaluationError("ks is empty; give at least one k, e.g. (1, 5)")
    arr, mask = _check_inputs(preds, sets, max(ks), ok, batched=True)
    for k in ks:
        _check_k(k, arr.shape[-1])
    _check_boot(n_boot)
    out = _compute_batch(arr, sets, ks, mask)
    if n_boot:
        for k, batch in out.items():
            low, high = _binomial_ci(batch.n_correct, batch.n_scored, n_boot, seed)
            out[k] = replace(batch, ci_low=low, ci_high=high)
    return out


def mean_per_class_accuracy(
    pred: ArrayLike,
    ref: LabelSets | ArrayLike,
    k: int = 1,
    ok: ArrayLike | None = None,
    *,
    n_classes: int | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> PerClassScore:
    """Mean over reference classes of the accuracy on the images of that class (see the module docstring).

    `ref` `LabelSets` or single labels (n_images,); a multi-label image counts toward each of its classes.
    """
    sets = as_label_sets(ref, n_classes)
    arr, mask = _check_inputs(pred, sets, k, ok, batched=False)
    _check_boot(n_boot)
    correct, scored = _correct_and_scored(arr, sets, k, mask)
    member = sets.to_sparse()[scored].astype(np.float64)
    per_class, images = _compute_per_class(member, correct[scored])
    ci = _per_class_ci(member, correct[scored], n_boot, seed) if n_boot else (None, None)
    return PerClassScore(
        float(np.nanmean(per_class)) if np.any(images) else float("nan"),
        per_class,
        images,
        int(scored.sum()),
        int((~mask).sum()),
        int((mask & (sets.counts == 0)).sum()),
        *ci,
    )


def accuracy_by_category(
    pred: ArrayLike,
    ref: LabelSets | ArrayLike,
    categories: ArrayLike,
    k: int = 1,
    ok: ArrayLike | None = None,
    *,
    n_classes: int | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> dict[str, Score]:
    """The accuracy of each category ("A", "B", "M", "Z", "X", "U", ...), keyed in sorted order.

    `categories` (n_images,) strings. A category whose images all have empty sets (e.g. Z) gets NaN accuracy.
    """
    sets = as_label_sets(ref, n_classes)
    arr, mask = _check_inputs(pred, sets, k, ok, batched=False)
    cats = np.asarray(categories).astype(str)
    if cats.shape != (sets.n_images,):
        raise EvaluationError(f"categories has shape {cats.shape}, expected ({sets.n_images},)")
    _check_boot(n_boot)
    correct, scored = _correct_and_scored(arr, sets, k, mask)
    names, codes = np.unique(cats, return_inverse=True)

    def per_category(rows: np.ndarray) -> np.ndarray:
        return np.bincount(codes[rows], minlength=len(names))

    excluded = mask & (sets.counts == 0)
    batch = BatchScore(
        k, per_category(correct & scored), per_category(scored), per_category(~mask), per_category(excluded)
    )
    if n_boot:
        low, high = _binomial_ci(batch.n_correct, batch.n_scored, n_boot, seed)
        batch = replace(batch, ci_low=low, ci_high=high)
    return {name: batch.score(i) for i, name in enumerate(names.tolist())}


def bootstrap_ci(
    correct: ArrayLike, *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the accuracy of `correct`, a bool (n_scored,) array; bounds in [0, 1]."""
    arr = check_mask(correct, "correct", np.shape(correct))
    if arr.ndim != 1 or arr.size == 0:
        raise EvaluationError(f"correct must be a non-empty 1-D array, got shape {arr.shape}")
    _check_boot(n_boot, allow_zero=False)
    if not 0 < level < 1:
        raise EvaluationError(f"level must be in (0, 1), got {level!r}")
    low, high = _binomial_ci(np.array([arr.sum()]), np.array([arr.size]), n_boot, seed, level)
    return float(low[0]), float(high[0])


def oop_rate(out_of_prompt: ArrayLike, ok: ArrayLike | None = None) -> OopRate:
    """Out-of-prompt rate among answered images: `out_of_prompt` and `ok` are bool (n_images,). Errors apart."""
    oop = check_mask(out_of_prompt, "out_of_prompt", np.shape(out_of_prompt))
    if oop.ndim != 1:
        raise EvaluationError(f"out_of_prompt must be 1-D, got shape {oop.shape}")
    mask = np.ones(oop.shape, bool) if ok is None else check_mask(ok, "ok", oop.shape)
    n_oop, n_answered = int((oop & mask).sum()), int(mask.sum())
    return OopRate(n_oop / n_answered if n_answered else float("nan"), n_oop, n_answered, int((~mask).sum()))


# ----------------------------------------------------------------------------------- validation and compute


def _check_k(k: object, width: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise EvaluationError(f"k must be a positive integer, got {k!r}")
    if k > width:
        raise EvaluationError(f"k = {k} but the predictions have only {width} column(s)")
    return int(k)


def _check_boot(n_boot: object, allow_zero: bool = True) -> None:
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < (0 if allow_zero else 1):
        raise EvaluationError(f"n_boot must be an integer ≥ {0 if allow_zero else 1}, got {n_boot!r}")


def _check_inputs(
    pred: ArrayLike, ref: LabelSets, k: int, ok: ArrayLike | None, *, batched: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Predictions as (n_images, k') or (n_models, n_images, k') ints and `ok` as a bool mask of the leading shape."""
    arr = np.asarray(pred)
    if not batched and arr.ndim == 1:
        arr = arr[:, None]
    arr = check_int_array(arr, "predictions", ndim=3 if batched else 2)
    if arr.shape[-2] != ref.n_images:
        raise EvaluationError(f"predictions have {arr.shape[-2]} images but the reference has {ref.n_images}")
    _check_k(k, arr.shape[-1])
    check_classes(arr, "predictions", ref.n_classes)
    if not ref.counts.any():
        raise EvaluationError(f"the reference labels none of its {ref.n_images} images (every set is empty)")
    lead = arr.shape[:-1]
    if ok is None:
        return arr, np.ones(lead, bool)
    shared = batched and np.shape(ok) == lead[1:]  # one mask (n_images,) for every model of a batch
    mask = check_mask(ok, "ok", lead[1:] if shared else lead)
    return arr, np.broadcast_to(mask, lead)


def _correct_and_scored(arr: np.ndarray, ref: LabelSets, k: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per image (n_images,): correct under the ReaL rule at k, and scored (ok with a non-empty set)."""
    correct = any_of_first(match_predictions(arr, ref, k), k)
    return correct, mask & (ref.counts > 0)


def _compute_batch(arr: np.ndarray, ref: LabelSets, ks: Sequence[int], mask: np.ndarray) -> dict[int, BatchScore]:
    """Counts for each k from one membership test of the first max(ks) columns. Trusts its input."""
    hits = match_predictions(arr, ref, max(ks))
    labelled = ref.counts > 0
    scored = mask & labelled
    n_scored = np.count_nonzero(scored, axis=-1)
    n_errors = np.count_nonzero(~mask, axis=-1)
    n_excluded = np.count_nonzero(mask & ~labelled, axis=-1)
    out = {}
    for k in ks:
        n_correct = np.count_nonzero(any_of_first(hits, k) & scored, axis=-1)
        out[k] = BatchScore(k, n_correct, n_scored, n_errors, n_excluded)
    return out


def _binomial_ci(
    n_correct: np.ndarray, n_scored: np.ndarray, n_boot: int, seed: int, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI per row; the correct count of a resample is Binomial(n, p) (module docstring)."""
    rng = np.random.default_rng(seed)
    n = np.maximum(n_scored, 1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n_scored > 0, n_correct / np.maximum(n_scored, 1), 0.0)[:, None]
    draws = rng.binomial(n, p, size=(len(n_scored), n_boot)) / n
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=1)
    empty = n_scored == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def _compute_per_class(member: sparse.csr_matrix, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-class accuracy (n_classes,) (NaN where no image) and images per class, from membership (n, C)."""
    images = np.asarray(member.sum(axis=0)).ravel()
    hits = member.T @ correct.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(images > 0, hits / images, np.nan), images.astype(np.int64)


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
