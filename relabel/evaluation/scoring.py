"""Score one run's aligned predictions against one reference with the `evaluator` functions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluator import EvaluationError, LabelSets
from evaluator.label_uncertainty import UncertainScore, uncertain_accuracies
from evaluator.posteriors import Posteriors
from evaluator.scoring import accuracy_by_category, mean_per_class_accuracy, multilabel_accuracy
from relabel.common.errors import InputError
from relabel.evaluation.references import Reference
from relabel.evaluation.results import RunScore
from relabel.evaluation.runs import Aligned, RunPredictions, align

TOP5 = 5


def score_run(run: RunPredictions, reference: Reference, *, n_boot: int = 1000, seed: int = 0) -> RunScore:
    """Top-1 (with its Wilson interval), top-5 when the run ranks 5 classes, mean per-class accuracy and, for a
    snapshot, top-1 per category, on the images of `reference` that the run predicted. Failed replies count as
    wrong, infrastructure errors are counted apart (`relabel.evaluation.runs`).

    Every accuracy gets its Wilson interval, which needs no resampling. Against a probabilistic snapshot, `n_boot`
    (≥ 1) label draws, each with a resample of the images, seeded, give the expected top-1 and its intervals
    (`score_uncertain`). Raises InputError when the run predicted none of the reference's labelled images.
    """
    aligned = align(run, reference.image_ids)
    labels = subset_labels(reference.labels, aligned.rows)
    if not np.any(labels.counts):
        raise InputError(
            f"run {run.info.name!r} has no prediction for any of the {reference.info.n_labelled} labelled image(s) "
            f"of reference {reference.name!r}; score it against another reference or predict those images"
        )
    pred, ok, failed = aligned.classes, aligned.ok, aligned.failed
    top1 = multilabel_accuracy(pred, labels, 1, ok, failed=failed)
    top5 = multilabel_accuracy(pred, labels, TOP5, ok, failed=failed) if pred.shape[1] >= TOP5 else None
    per_class = mean_per_class_accuracy(pred, labels, 1, ok, failed=failed, n_boot=0)
    per_category = None
    if reference.categories is not None:
        categories = reference.categories[aligned.rows]
        per_category = accuracy_by_category(pred, labels, categories, 1, ok, failed=failed)
    uncertain = score_uncertain(aligned, reference, n_boot=n_boot, seed=seed)
    return RunScore(
        run.info.name,
        reference.name,
        reference.info.n_images,
        len(aligned.rows),
        top1,
        top5,
        per_class.accuracy,
        per_category,
        uncertain=uncertain,
    )


def score_uncertain(
    aligned: Aligned,
    reference: Reference,
    *,
    n_boot: int,
    seed: int,
    posteriors: Posteriors | None = None,
    unrated_noise: float | None = None,
) -> UncertainScore | None:
    """Top-1 of the aligned predictions against the reference's posteriors: against the snapshot's own labels
    (its consensus thresholded them), expected over `n_boot` label draws, with its intervals; None for a
    reference without posteriors or with `n_boot` = 0 (no draws).

    The snapshot's unrated images (category U, no vote: their labels rest on its base source alone) are left out
    of every number (`evaluator.label_uncertainty`: the rated images are no random sample to estimate the base
    source's error rate from), or drawn at `unrated_noise`. `posteriors`: others over the reference's images in
    place of the snapshot's (another aggregation of its votes), scored against them alone."""
    (score,) = score_uncertain_runs(
        [aligned], reference, n_boot=n_boot, seed=seed, posteriors=posteriors, unrated_noise=unrated_noise
    )
    return score


def score_uncertain_runs(
    aligned: Sequence[Aligned],
    reference: Reference,
    *,
    n_boot: int,
    seed: int,
    posteriors: Posteriors | None = None,
    unrated_noise: float | None = None,
) -> list[UncertainScore | None]:
    """`score_uncertain` of every run of `aligned`, number for number, with one set of label draws and image
    resamples for all (`evaluator.label_uncertainty.uncertain_accuracies`). Runs that predicted other images of
    the reference are scored in groups, one per set of images."""
    if reference.posteriors is None or not n_boot:
        return [None] * len(aligned)
    groups: dict[bytes, list[int]] = {}
    for i, a in enumerate(aligned):
        groups.setdefault(np.asarray(a.rows, dtype=np.int64).tobytes(), []).append(i)
    own, base = posteriors is None, reference.posteriors if posteriors is None else posteriors
    out: list[UncertainScore | None] = [None] * len(aligned)
    for members in groups.values():
        scores = _score_same_images([aligned[i] for i in members], reference, n_boot, seed, base, own, unrated_noise)
        for i, score in zip(members, scores):
            out[i] = score
    return out


def _score_same_images(
    aligned: Sequence[Aligned], reference: Reference, n_boot: int, seed: int, posteriors: Posteriors, own: bool,
    unrated_noise: float | None,
) -> list[UncertainScore]:  # fmt: skip
    """The runs of `aligned`, all over the same rows of the reference, against `posteriors` (`own`: the
    reference's, so its own decided labels are the thresholded ones)."""
    rows = aligned[0].rows
    posteriors = posteriors.subset(rows)
    unrated = None if reference.unrated is None else reference.unrated[rows]
    try:
        return uncertain_accuracies(
            [a.classes for a in aligned], posteriors, [a.ok for a in aligned], failed=[a.failed for a in aligned],
            threshold=reference.threshold, n_draws=n_boot, seed=seed,
            decided=subset_labels(reference.labels, rows) if own else None, unrated=unrated,
            unrated_noise=unrated_noise,
        )  # fmt: skip
    except EvaluationError as exc:
        raise InputError(f"reference {reference.name!r}: {exc}") from None


def subset_labels(labels: LabelSets, rows: np.ndarray) -> LabelSets:
    """The label sets of `rows` (all rows: the same object, no copy)."""
    if len(rows) == labels.n_images:
        return labels
    return LabelSets(labels.labels[rows], labels.n_classes)
