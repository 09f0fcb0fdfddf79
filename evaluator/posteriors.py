"""Posteriors: P(class present) of listed (image, class) pairs, the probabilistic labels that
`evaluator.label_uncertainty` scores against and `evaluator.label_draws` draws from. A leaf module, so that both
read it without importing each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError
from evaluator.references import LabelSets, check_classes, check_n_classes

THRESHOLD = 0.9


@dataclass(frozen=True, eq=False)
class Posteriors:
    """P(class present) of the listed (image, class) pairs of `n_images` images; pairs not listed are absent.

    `rows` (m,) image indices in 0..n_images-1, `classes` (m,) in 0..n_classes-1, `probs` (m,) in [0, 1]; no pair
    twice. The arrays are copied and made read-only.
    """

    rows: np.ndarray
    classes: np.ndarray
    probs: np.ndarray
    n_images: int
    n_classes: int = 1000

    def __post_init__(self) -> None:
        n_images, n_classes = _check_count(self.n_images, "n_images"), check_n_classes(self.n_classes)
        rows, classes = _ints(self.rows, "rows"), _ints(self.classes, "classes")
        probs = np.array(self.probs, dtype=np.float64)
        if not (rows.shape == classes.shape == probs.shape) or rows.ndim != 1:
            raise EvaluationError(f"rows, classes and probs must be 1-D of one length, got {rows.shape}, "
                                  f"{classes.shape}, {probs.shape}")  # fmt: skip
        _check_range(rows, n_images, "rows")
        check_classes(classes, "posterior classes", n_classes)
        _check_probs(rows, classes, probs)
        _check_unique(rows, classes, n_classes)
        for name, arr in (("rows", rows), ("classes", classes), ("probs", probs)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "n_images", n_images)
        object.__setattr__(self, "n_classes", n_classes)

    @classmethod
    def from_dicts(cls, posteriors: Sequence[Mapping[int, float]], n_classes: int = 1000) -> Posteriors:
        """From one {class: posterior} mapping per image; an empty mapping: no class can be present."""
        rows = np.repeat(np.arange(len(posteriors)), [len(p) for p in posteriors])
        classes = np.fromiter((c for p in posteriors for c in p), dtype=np.int64, count=len(rows))
        probs = np.fromiter((v for p in posteriors for v in p.values()), dtype=np.float64, count=len(rows))
        return cls(rows, classes, probs, len(posteriors), n_classes)

    def subset(self, images: ArrayLike) -> Posteriors:
        """The posteriors of `images` (distinct indices in 0..n_images-1), in that order."""
        picked = _ints(images, "images")
        _check_range(picked, self.n_images, "images")
        position = np.full(self.n_images, -1, dtype=np.int64)
        position[picked] = np.arange(len(picked))
        if (position[picked] != np.arange(len(picked))).any():  # an image listed twice keeps its last place only
            raise EvaluationError("images lists an image twice")
        keep = position[self.rows] >= 0
        # picked from checked posteriors by distinct images: valid as they are, so not checked again
        return _trusted(position[self.rows[keep]], self.classes[keep], self.probs[keep], len(picked), self.n_classes)

    def label_sets(self, threshold: float = THRESHOLD) -> LabelSets:
        """The sets {c : p_c ≥ threshold} (classes in ascending order); an image with none has an empty set."""
        keep = self.probs >= _check_threshold(threshold)
        rows, classes = self.rows[keep], self.classes[keep]
        keys = rows * self.n_classes + classes  # distinct: no pair twice
        if len(keys) > 1 and not bool((keys[1:] > keys[:-1]).all()):  # stored posteriors come in this order
            order = np.argsort(keys)
            rows, classes = rows[order], classes[order]
        counts = np.bincount(rows, minlength=self.n_images)
        labels = np.full((self.n_images, max(int(counts.max(initial=0)), 1)), -1, dtype=np.int64)
        labels[rows, np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)] = classes
        return LabelSets(labels, self.n_classes)


def _trusted(rows: np.ndarray, classes: np.ndarray, probs: np.ndarray, n_images: int, n_classes: int) -> Posteriors:
    """Posteriors from arrays known to be valid (int64 rows and classes, float64 probs, taken from checked
    posteriors), without checking them again."""
    out = object.__new__(Posteriors)
    for name, value in (("rows", rows), ("classes", classes), ("probs", probs)):
        value.setflags(write=False)
        object.__setattr__(out, name, value)
    object.__setattr__(out, "n_images", int(n_images))
    object.__setattr__(out, "n_classes", int(n_classes))
    return out


def _check_threshold(threshold: object) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, float | int) or not 0 < threshold <= 1:
        raise EvaluationError(f"threshold must be in (0, 1], got {threshold!r}")
    return float(threshold)


def _check_count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise EvaluationError(f"{what} must be a whole number ≥ 0, got {value!r}")
    return int(value)


def _ints(values: ArrayLike, what: str) -> np.ndarray:
    arr = np.array(values)
    if arr.size == 0:
        return arr.astype(np.int64).reshape(-1)
    if arr.dtype.kind not in "iu":
        raise EvaluationError(f"{what} must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _check_range(rows: np.ndarray, n_images: int, what: str) -> None:
    bad = np.flatnonzero((rows < 0) | (rows >= n_images))
    if len(bad):
        raise EvaluationError(f"{what} entry {int(bad[0])} is image {int(rows[bad[0]])}, outside 0..{n_images - 1}")


def _check_probs(rows: np.ndarray, classes: np.ndarray, probs: np.ndarray) -> None:
    bad = np.flatnonzero(~((probs >= 0) & (probs <= 1)))  # NaN fails both
    if len(bad):
        i = int(bad[0])
        where = f"image {int(rows[i])} class {int(classes[i])}"
        raise EvaluationError(f"{where}: posterior {float(probs[i])!r} is not in [0, 1]")


def _check_unique(rows: np.ndarray, classes: np.ndarray, n_classes: int) -> None:
    keys = rows * n_classes + classes
    ordered = np.sort(keys)
    twice = np.flatnonzero(ordered[1:] == ordered[:-1])
    if len(twice):
        key = int(ordered[twice[0]])
        raise EvaluationError(f"image {key // n_classes} lists class {key % n_classes} twice")
