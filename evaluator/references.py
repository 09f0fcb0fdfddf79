"""References to score against: multi-label `LabelSets`, and the validation shared by every scoring function.

A reference gives each image a set of correct classes. `LabelSets` stores the sets as a padded int array
(n_images, max_labels) with -1 padding at the end of each row, so membership of a prediction is a handful of
vectorised comparisons (one per label column, on only the rows that have that many labels) rather than a
(n_images × n_classes) table. An empty row excludes the image from scoring: the ReaL convention for images whose
raters found no class, or category Z/X images of a ReGT snapshot. A single-label reference (ImGT) is the special
case max_labels = 1, with -1 for "no label".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError

if TYPE_CHECKING:
    from scipy import sparse

IMAGENET_CLASSES = 1000


def check_n_classes(n_classes: object) -> int:
    """`n_classes` as an int ≥ 1."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, int | np.integer) or n_classes < 1:
        raise EvaluationError(f"n_classes must be a positive integer, got {n_classes!r}")
    return int(n_classes)


def check_int_array(values: ArrayLike, what: str, ndim: int) -> np.ndarray:
    """`values` as an integer numpy array of `ndim` dimensions (no copy when it already is one)."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):
        raise EvaluationError(f"{what} must be integer class indices, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise EvaluationError(f"{what} must have {ndim} dimension(s), got shape {arr.shape}")
    return arr.astype(np.int64) if arr.dtype.kind == "f" else arr


def check_classes(arr: np.ndarray, what: str, n_classes: int) -> None:
    """Every value of `arr` is a class in 0..n_classes-1 or the padding -1; the message names the first bad one."""
    if arr.size == 0 or (arr.min() >= -1 and arr.max() < n_classes):
        return
    where = tuple(int(i) for i in np.argwhere((arr < -1) | (arr >= n_classes))[0])
    value = int(arr[where])
    place = f"model {where[0]}, row {where[1]}" if arr.ndim == 3 else f"row {where[0]}"
    raise EvaluationError(f"{what} {place} has class {value}, outside 0..{n_classes - 1} (-1 = none)")


def check_mask(values: ArrayLike, what: str, shape: tuple[int, ...]) -> np.ndarray:
    """A boolean mask of `shape`; accepts bools or the integers 0 and 1."""
    arr = np.asarray(values)
    if arr.shape != shape:
        raise EvaluationError(f"{what} has shape {arr.shape}, expected {shape}")
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind not in "iu" or (arr.size and not np.isin(arr, (0, 1)).all()):
        raise EvaluationError(f"{what} must be booleans (or 0/1), got dtype {arr.dtype}")
    return arr.astype(bool)


@dataclass(frozen=True, eq=False)
class LabelSets:
    """The correct classes of each image: `labels` is (n_images, max_labels) int, -1 padding at the row ends.

    Rows may not repeat a class, and every class is in 0..n_classes-1. The array is copied and made read-only.
    """

    labels: np.ndarray
    n_classes: int = IMAGENET_CLASSES

    def __post_init__(self) -> None:
        n_classes = check_n_classes(self.n_classes)
        labels = check_int_array(self.labels, "label sets", ndim=2)
        check_classes(labels, "label sets", n_classes)
        _check_packed(labels)
        labels = labels.astype(_working_dtype(n_classes))  # a copy, so the caller cannot change it under us
        labels.setflags(write=False)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "n_classes", n_classes)

    @classmethod
    def from_lists(cls, sets: Sequence[Sequence[int]], n_classes: int = IMAGENET_CLASSES) -> LabelSets:
        """From one list of classes per image (e.g. ReaL's `real.json`); an empty list excludes the image."""
        lengths = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
        width = int(lengths.max()) if len(sets) else 0
        flat = np.fromiter((c for s in sets for c in s), dtype=np.int64, count=int(lengths.sum()))
        labels = np.full((len(sets), max(width, 1)), -1, dtype=np.int64)
        rows = np.repeat(np.arange(len(sets)), lengths)
        cols = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        labels[rows, cols] = flat
        return cls(labels, n_classes)

    @classmethod
    def from_single(cls, labels: ArrayLike, n_classes: int = IMAGENET_CLASSES) -> LabelSets:
        """From one label per image, shape (n_images,), -1 for "no label" (the image is excluded)."""
        if np.ndim(labels) == 2:
            raise EvaluationError("reference labels are 2-D; build LabelSets(...) for a multi-label reference")
        arr = check_int_array(labels, "reference labels", ndim=1)
        check_classes(arr, "reference labels", check_n_classes(n_classes))
        return cls(arr[:, None], n_classes)

    @property
    def n_images(self) -> int:
        return int(self.labels.shape[0])

    @cached_property
    def counts(self) -> np.ndarray:
        """(n_images,) int: the size of each image's set; 0 means the image is excluded."""
        return np.count_nonzero(self.labels >= 0, axis=1)

    @cached_property
    def rows_by_column(self) -> tuple[np.ndarray, ...]:
        """For label column j ≥ 1, the rows that have more than j labels (column 0 is compared on all rows)."""
        return tuple(np.flatnonzero(self.counts > j) for j in range(1, self.labels.shape[1]))

    def to_lists(self) -> list[list[int]]:
        """One list of classes per image, the inverse of `from_lists`."""
        return [row[row >= 0].tolist() for row in self.labels]

    def to_sparse(self) -> sparse.csr_matrix:
        """(n_images, n_classes) boolean CSR matrix; entry (i, c) is True when class c is in image i's set."""
        from scipy import sparse  # here, not at import: scipy.sparse is ~0.2 s of every command that reads references

        rows, cols = np.nonzero(self.labels >= 0)
        data = np.ones(len(rows), dtype=bool)
        return sparse.csr_matrix((data, (rows, self.labels[rows, cols])), shape=(self.n_images, self.n_classes))


def _working_dtype(n_classes: int) -> type[np.signedinteger]:
    """The narrowest signed int that holds every class and -1: comparisons on it move the fewest bytes."""
    return np.int16 if n_classes <= np.iinfo(np.int16).max else np.int32 if n_classes < 2**31 else np.int64


def _check_packed(labels: np.ndarray) -> None:
    """Classes come first in each row, then -1 padding; no class twice in a row."""
    present = labels >= 0
    gaps = np.flatnonzero((present[:, 1:] & ~present[:, :-1]).any(axis=1))
    if len(gaps):
        row = int(gaps[0])
        raise EvaluationError(f"label sets row {row} has a class after -1 padding: {labels[row].tolist()}")
    ordered = np.sort(labels, axis=1)
    twice = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
    if twice.any():
        row, col = (int(i) for i in np.argwhere(twice)[0])
        raise EvaluationError(f"label sets row {row} lists class {int(ordered[row, col])} twice")


def as_label_sets(ref: LabelSets | ArrayLike, n_classes: int | None) -> LabelSets:
    """A `LabelSets`, or single labels (n_images,) turned into one; `n_classes` defaults to 1000 for the latter."""
    if isinstance(ref, LabelSets):
        if n_classes is not None and check_n_classes(n_classes) != ref.n_classes:
            raise EvaluationError(f"n_classes={n_classes} but the label sets have n_classes={ref.n_classes}")
        return ref
    return LabelSets.from_single(ref, IMAGENET_CLASSES if n_classes is None else n_classes)


def check_k(k: object, width: int) -> int:
    """`k` as an int in 1..width (the columns of the predictions)."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise EvaluationError(f"k must be a positive integer, got {k!r}")
    if k > width:
        raise EvaluationError(f"k = {k} but the predictions have only {width} column(s)")
    return int(k)


def check_boot(n_boot: object, allow_zero: bool = True) -> None:
    """`n_boot` is an int ≥ 0 (≥ 1 without `allow_zero`)."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < (0 if allow_zero else 1):
        raise EvaluationError(f"n_boot must be an integer ≥ {0 if allow_zero else 1}, got {n_boot!r}")


def check_predictions(
    pred: ArrayLike, ref: LabelSets, k: int, ok: ArrayLike | None, failed: ArrayLike | None, *, batched: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predictions as (n_images, k') or (n_models, n_images, k') ints, and the answered (`ok`) and failed masks
    of the leading shape."""
    arr = np.asarray(pred)
    if not batched and arr.ndim == 1:
        arr = arr[:, None]
    arr = check_int_array(arr, "predictions", ndim=3 if batched else 2)
    if arr.shape[-2] != ref.n_images:
        raise EvaluationError(f"predictions have {arr.shape[-2]} images but the reference has {ref.n_images}")
    check_k(k, arr.shape[-1])
    check_classes(arr, "predictions", ref.n_classes)
    if not ref.counts.any():
        raise EvaluationError(f"the reference labels none of its {ref.n_images} images (every set is empty)")
    lead = arr.shape[:-1]
    answered = _lead_mask(ok, "ok", lead, batched, default=True)
    wrong = _lead_mask(failed, "failed", lead, batched, default=False)
    both = answered & wrong
    if both.any():
        where = tuple(int(i) for i in np.argwhere(both)[0])
        place = f"model {where[0]}, image {where[1]}" if len(where) == 2 else f"image {where[0]}"
        raise EvaluationError(f"failed marks {place}, which is ok (answered); failed may mark only failed calls")
    return arr, answered, wrong


def _lead_mask(values: ArrayLike | None, what: str, lead: tuple[int, ...], batched: bool, default: bool) -> np.ndarray:
    if values is None:
        return np.full(lead, default)
    shared = batched and np.shape(values) == lead[1:]  # one mask (n_images,) for every model of a batch
    mask = check_mask(values, what, lead[1:] if shared else lead)
    return np.broadcast_to(mask, lead)


def correct_and_scored(
    arr: np.ndarray, ref: LabelSets, k: int, answered: np.ndarray, wrong: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per image: correct under the ReaL rule at k (answered images only), and scored (answered or failed, with
    a non-empty set). Trusts its input."""
    correct = any_of_first(match_predictions(arr, ref, k), k) & answered
    return correct, (answered | wrong) & (ref.counts > 0)


def match_predictions(pred: np.ndarray, ref: LabelSets, k: int) -> np.ndarray:
    """(..., n_images, k) bool: whether each of the first k predictions is in the image's set. Trusts its input.

    Rows with an empty set come out arbitrary (a -1 prediction "matches" the -1 padding); callers mask them.
    """
    dtype = _working_dtype(ref.n_classes)
    pred = pred[..., :k].astype(dtype, copy=False)
    labels = ref.labels.astype(dtype, copy=False)
    hits = pred == labels[:, 0, None]
    for col, rows in enumerate(ref.rows_by_column, start=1):
        if len(rows):
            hits[..., rows, :] |= pred[..., rows, :] == labels[rows, col, None]
    return hits


def any_of_first(hits: np.ndarray, k: int) -> np.ndarray:
    """(..., n_images) bool: some of the first k columns of `hits` is True (a column loop beats `.any(-1)`)."""
    out = hits[..., 0].copy()
    for col in range(1, k):
        out |= hits[..., col]
    return out
