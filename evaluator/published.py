"""Metrics as their authors defined them, for references whose paper prescribes its own reading.

Shankar et al. (2020), "Evaluating Machine Accuracy on ImageNet" (ICML), with the procedure recommended for
`imagenet2012_multilabel` in TensorFlow Datasets:

1. images marked problematic are skipped;
2. a prediction is correct when it is among the image's correct labels or its unclear labels (lenient with
   "unclear");
3. accuracy is computed per class, the class being the image's original ImageNet label, and averaged over the
   classes.

The ReGT-style reading of the same file (`evaluator.scoring.multilabel_accuracy` on the proposed labels) differs
on each point: problematic images are scored, unclear labels never count, and the accuracy is pooled over images.
Both are legitimate; only this one is comparable with the numbers of the paper.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError
from evaluator.per_class import N_BOOT, PerClassScore, class_mean_accuracy
from evaluator.references import (
    LabelSets,
    any_of_first,
    check_int_array,
    check_mask,
    check_predictions,
    match_predictions,
)


def shankar_accuracy(
    pred: ArrayLike,
    correct_labels: LabelSets,
    unclear_labels: LabelSets,
    original_labels: ArrayLike,
    problematic: ArrayLike,
    k: int = 1,
    ok: ArrayLike | None = None,
    *,
    failed: ArrayLike | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> PerClassScore:
    """Shankar et al.'s multi-label accuracy (module docstring) of `pred` (n_images, k') or (n_images,).

    `correct_labels`, `unclear_labels`: the sets of each image; `original_labels` int (n_images,), -1 = unknown
    (the image is skipped); `problematic`, `ok`, `failed` bool (n_images,). Failed replies count as wrong, other
    failed calls are errors (as in `evaluator.scoring`). `n_excluded` counts the skipped images; `n_boot` = 0
    skips the bootstrap interval of the class mean.
    """
    for sets, what in ((correct_labels, "correct_labels"), (unclear_labels, "unclear_labels")):
        if not isinstance(sets, LabelSets):
            raise EvaluationError(f"{what} must be LabelSets, got {type(sets).__name__}")
    if unclear_labels.n_images != correct_labels.n_images or unclear_labels.n_classes != correct_labels.n_classes:
        raise EvaluationError(
            f"unclear_labels cover {unclear_labels.n_images} images of {unclear_labels.n_classes} classes, "
            f"correct_labels {correct_labels.n_images} of {correct_labels.n_classes}"
        )
    n = correct_labels.n_images
    original = check_int_array(original_labels, "original_labels", ndim=1)
    if original.shape != (n,):
        raise EvaluationError(f"original_labels has shape {original.shape}, expected ({n},)")
    skip = check_mask(problematic, "problematic", (n,))
    everything = LabelSets.from_single(np.zeros(n, np.int64), correct_labels.n_classes)  # validation only
    arr, answered, wrong = check_predictions(pred, everything, k, ok, failed, batched=False)
    hits = any_of_first(match_predictions(arr, correct_labels, k), k) & (correct_labels.counts > 0)
    hits |= any_of_first(match_predictions(arr, unclear_labels, k), k) & (unclear_labels.counts > 0)
    classes = np.where(skip, -1, original)
    return class_mean_accuracy(
        hits & answered, classes, answered | wrong, n_classes=correct_labels.n_classes, n_boot=n_boot, seed=seed
    )
