"""The probes of presence scoring (`evaluator.presence`), after POPE (Li et al. 2023, "Evaluating Object
Hallucination in Large Vision-Language Models", EMNLP 2023), on ImageNet-style label sets.

A probe asks a model "Is there a {class} in the image?" and expects yes or no. POPE asks about three objects an
image holds and three it does not; here each image gets one probe per class of its reference set (truth: yes) and
`n_negatives` probes on classes outside it (truth: no); an image with an empty set gets none (it is excluded, as in
scoring). POPE samples the negatives three ways; here, for image i with set P (never a class of P, `n_negatives`
distinct classes):

random        uniformly among the classes not in P.
popular       the most frequent classes of the reference not in P; a class's frequency is the number of images
              whose set holds it. Ties are drawn at random per image: in ImGT's val set every class holds 50
              images, so popular sampling on ImGT alone is random sampling.
adversarial   the classes most related to P: class c scores Σ_{p ∈ P} related[p, c] for a (C, C) matrix the caller
              supplies (row: a positive class, column: a candidate): co-occurrence counts of a multi-label
              reference, a stored run's confusion counts (row: true class, column: predicted class), or 1 for
              WordNet siblings. The n_negatives best scores are taken; ties (classes scoring 0 when fewer than
              n_negatives are related) are drawn at random per image.

All three take the n_negatives classes of highest score with random tie-breaks (random: every score is equal),
seeded: the same reference, `n_negatives`, sampling, seed and `related` give the same probes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError, unknown_name
from evaluator.references import LabelSets

CHUNK_VALUES = 4_000_000  # (images × classes) scores held at once while sampling negatives


@dataclass(frozen=True, eq=False)
class Probes:
    """Yes/no questions, one per entry: `image` (n_probes,) int row of the reference, `cls` (n_probes,) the class
    asked about, `truth` (n_probes,) bool, whether the class is in the image's set. Ordered by image, each image's
    positives first; `sampling` and `seed` say how the negatives were drawn."""

    image: np.ndarray
    cls: np.ndarray
    truth: np.ndarray
    sampling: str
    seed: int

    def __len__(self) -> int:
        return len(self.image)


def _random_scores(labels: np.ndarray, ref: LabelSets, related: np.ndarray | None) -> np.ndarray:
    return np.zeros((len(labels), ref.n_classes))


def _popular_scores(labels: np.ndarray, ref: LabelSets, related: np.ndarray | None) -> np.ndarray:
    frequency = np.bincount(ref.labels[ref.labels >= 0], minlength=ref.n_classes).astype(np.float64)
    return np.repeat(frequency[None], len(labels), axis=0)


def _adversarial_scores(labels: np.ndarray, ref: LabelSets, related: np.ndarray | None) -> np.ndarray:
    if related is None:
        raise EvaluationError("adversarial sampling needs `related`, a (C, C) score matrix")
    padded = np.vstack([related, np.zeros((1, ref.n_classes))])  # label -1 (padding) reads the zero row
    scores = padded[labels[:, 0]]
    for col in range(1, labels.shape[1]):
        scores += padded[labels[:, col]]
    return scores


# name → (chunk labels, reference, related) → (chunk, n_classes) scores; the top n_negatives are the negatives
SAMPLINGS: dict[str, Callable[[np.ndarray, LabelSets, np.ndarray | None], np.ndarray]] = {
    "random": _random_scores,
    "popular": _popular_scores,
    "adversarial": _adversarial_scores,
}


def probes(
    reference: LabelSets,
    n_negatives: int = 3,
    sampling: str = "random",
    seed: int = 0,
    related: ArrayLike | None = None,
) -> Probes:
    """Probes of every image of `reference` with a non-empty set: its classes (truth yes) and `n_negatives`
    classes sampled outside its set by `sampling` ("random", "popular", "adversarial"; module docstring).

    `related` (n_classes, n_classes) finite numbers, needed by "adversarial" only. Seeded.
    """
    if not isinstance(reference, LabelSets):
        raise EvaluationError(f"reference must be LabelSets, got {type(reference).__name__}")
    if sampling not in SAMPLINGS:
        raise unknown_name("sampling", str(sampling), SAMPLINGS)
    n = _check_negatives(n_negatives, reference)
    matrix = _check_related(related, reference.n_classes, sampling)
    rows = np.flatnonzero(reference.counts > 0)
    rng = np.random.default_rng(seed)
    chunk = max(1, CHUNK_VALUES // reference.n_classes)
    negatives = [
        _top_classes(SAMPLINGS[sampling](reference.labels[part], reference, matrix), reference.labels[part], n, rng)
        for part in (rows[i : i + chunk] for i in range(0, len(rows), chunk))
    ]
    neg = np.concatenate(negatives) if negatives else np.empty((0, n), np.int64)
    pos_rows, pos_cols = np.nonzero(reference.labels[rows] >= 0)
    image = np.concatenate([rows[pos_rows], np.repeat(rows, n)])
    cls = np.concatenate([reference.labels[rows][pos_rows, pos_cols].astype(np.int64), neg.ravel()])
    truth = np.concatenate([np.ones(len(pos_rows), bool), np.zeros(neg.size, bool)])
    order = np.argsort(image, kind="stable")  # by image, positives first
    return Probes(image[order], cls[order], truth[order], sampling, int(seed))


def _top_classes(scores: np.ndarray, labels: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(m, n) int64: per row the n classes of highest score outside the row's set, ties drawn at random."""
    m, n_classes = scores.shape
    rows, cols = np.nonzero(labels >= 0)
    scores[rows, labels[rows, cols]] = -np.inf  # never a positive
    nth = _nth_highest(scores, n)[:, None]
    # keys: above the n-th score in (1, 2], tied with it random in [0, 1), below it in [-1, 0): all distinct
    # within a group, since selection among many equal values is slow
    column = np.arange(n_classes) / n_classes
    key = np.where(scores > nth, 2.0 - column, column - 1.0)
    ties = scores == nth
    key[ties] = rng.random(np.count_nonzero(ties))  # drawn for the tied entries only, in row order
    chosen = np.argpartition(key, n_classes - n, axis=1)[:, n_classes - n :]
    return np.sort(chosen, axis=1).astype(np.int64)


def _nth_highest(scores: np.ndarray, n: int) -> np.ndarray:
    """(m,) the n-th highest score of each row, counting repeats: a value at a time from the top (at most n
    passes; np.partition slows down badly on the many equal scores sampling produces)."""
    work = scores.copy()
    nth, left = np.full(len(scores), -np.inf), np.full(len(scores), n)
    for _ in range(n):
        top = work.max(axis=1)
        hit = work == top[:, None]
        nth = np.where(left > 0, top, nth)
        left -= np.count_nonzero(hit, axis=1)
        if (left <= 0).all():
            break
        work[hit] = -np.inf
    return nth


def _check_negatives(n_negatives: object, reference: LabelSets) -> int:
    if isinstance(n_negatives, bool) or not isinstance(n_negatives, int | np.integer) or n_negatives < 1:
        raise EvaluationError(f"n_negatives must be a positive integer, got {n_negatives!r}")
    most = int(reference.counts.max()) if reference.n_images else 0
    if n_negatives > reference.n_classes - most:
        row = int(np.argmax(reference.counts))
        raise EvaluationError(
            f"n_negatives = {n_negatives} but image {row} holds {most} of {reference.n_classes} classes: "
            f"at most {reference.n_classes - most} negatives"
        )
    return int(n_negatives)


def _check_related(related: ArrayLike | None, n_classes: int, sampling: str) -> np.ndarray | None:
    if related is None:
        if sampling == "adversarial":
            raise EvaluationError("adversarial sampling needs related, a (n_classes, n_classes) score matrix")
        return None
    arr = np.asarray(related)
    if arr.shape != (n_classes, n_classes) or arr.dtype.kind not in "biuf":
        raise EvaluationError(f"related must be numbers of shape ({n_classes}, {n_classes}), got {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        row, col = (int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise EvaluationError(f"related[{row}, {col}] is {arr[row, col]}; every score must be finite")
    return arr
