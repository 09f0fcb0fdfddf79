"""Which image to review next: the expected benefit of one more review, from the consensus and the stored runs.

Pure numpy (no database). The consensus gives P(class present) for each (image, class) pair the votes asked about
(`relabel.posteriors`, posteriors as `rows`, `classes`, `probs`; a pair not listed is absent for sure). One more
review of an image is assumed to settle it, so its benefit is what stays uncertain about it now:

* **label errors**: the expected number of wrong decisions in the image's best estimate (a class is in when its
  posterior reaches 0.5), the sum of min(p, 1 - p) over its pairs; with calibrated posteriors that is the number
  of pair errors a review is expected to fix;
* **runs at stake**: for each stored run, q = P(its top-1 class is in the image's label set) (the posterior of
  that pair, 0 when the pair is not listed); the run's top-1 on the image is right or wrong with chance q, so its
  score moves by min(q, 1 - q) in expectation when a review settles it. Runs that disagree on an uncertain image
  add up; so do runs that share an uncertain top-1.

`benefit = label_errors + run_weight * sum over runs of min(q, 1 - q)`. The active order serves the highest
benefit first (ties by a seeded shuffle, so it is reproducible); an image with no benefit (nothing uncertain) is
never worth a review before one that has some. The variance q(1 - q) of each run's correctness on each image is
what `relabel plan` sums into the width of a run's top-1 interval from label uncertainty.

Example:
    >>> import numpy as np
    >>> b = review_benefit(np.array([0, 1]), np.array([5, 7]), np.array([0.55, 0.99]), 2, top1=np.array([[5, 7]]))
    >>> active_order(b).tolist()
    [0, 1]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from relabel.errors import InputError

AT_STAKE = 0.05  # a run's top-1 counts as at stake on an image when min(q, 1 - q) reaches this
NO_RUN = -1  # a run's top-1 where it did not score the image


@dataclass(frozen=True)
class Benefit:
    """Per image (index 0..n_images-1): `score` the expected benefit of one more review (module docstring),
    `label_errors` the expected wrong pair decisions, `run_risk` the sum over runs of min(q, 1 - q),
    `runs_at_stake` how many runs have min(q, 1 - q) ≥ AT_STAKE, `focus` the class whose posterior is nearest 0.5
    (-1 for an image without pairs) and `focus_prob` its posterior (NaN without pairs)."""

    score: np.ndarray
    label_errors: np.ndarray
    run_risk: np.ndarray
    runs_at_stake: np.ndarray
    focus: np.ndarray
    focus_prob: np.ndarray


def _pairs(rows: np.ndarray, classes: np.ndarray, probs: np.ndarray, n_images: int) -> tuple[np.ndarray, ...]:
    rows, classes = np.asarray(rows, dtype=np.int64), np.asarray(classes, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64)
    if not (rows.shape == classes.shape == probs.shape) or rows.ndim != 1:
        raise InputError(f"rows, classes and probs must be 1-D of one length, got {rows.shape}, {classes.shape}, "
                         f"{probs.shape}")  # fmt: skip
    if len(rows) and (rows.min() < 0 or rows.max() >= n_images):
        raise InputError(f"posterior rows must lie in 0..{n_images - 1}, got {int(rows.min())}..{int(rows.max())}")
    if len(probs) and not (np.all(probs >= 0) and np.all(probs <= 1)):
        raise InputError("posteriors must lie in [0, 1]")
    return rows, classes, probs


def correct_probability(
    rows: np.ndarray, classes: np.ndarray, probs: np.ndarray, n_images: int, top1: np.ndarray
) -> np.ndarray:
    """(n_runs, n_images) q: the chance that each run's top-1 (`top1` (n_runs, n_images) class indices, NO_RUN
    where the run did not score the image) is in the image's label set; 0 where the pair is not listed or the run
    did not score the image."""
    rows, classes, probs = _pairs(rows, classes, probs, n_images)
    top1 = np.atleast_2d(np.asarray(top1, dtype=np.int64))
    if top1.shape[1] != n_images:
        raise InputError(f"top1 must have one column per image ({n_images}), got {top1.shape[1]}")
    q = np.zeros(top1.shape, dtype=np.float64)
    if not len(rows):
        return q
    n_classes = int(max(classes.max(), top1.max(initial=0))) + 1
    key = rows * n_classes + classes
    order = np.argsort(key, kind="stable")
    key, sorted_probs = key[order], probs[order]
    for r in range(top1.shape[0]):
        scored = top1[r] >= 0
        wanted = np.arange(n_images, dtype=np.int64) * n_classes + np.where(scored, top1[r], 0)
        at = np.clip(np.searchsorted(key, wanted), 0, len(key) - 1)
        hit = scored & (key[at] == wanted)
        q[r, hit] = sorted_probs[at[hit]]
    return q


def review_benefit(
    rows: np.ndarray,
    classes: np.ndarray,
    probs: np.ndarray,
    n_images: int,
    top1: np.ndarray | None = None,
    run_weight: float = 1.0,
) -> Benefit:
    """The expected benefit of one more review of each of `n_images` images (module docstring). `rows`, `classes`,
    `probs`: the listed pairs' image index, class index and posterior; `top1` (n_runs, n_images): the stored runs'
    top-1 classes (NO_RUN where a run did not score an image; None: no runs)."""
    rows, classes, probs = _pairs(rows, classes, probs, n_images)
    if run_weight < 0:
        raise InputError(f"run_weight must be at least 0, got {run_weight}")
    doubt = np.minimum(probs, 1.0 - probs)
    label_errors = np.bincount(rows, weights=doubt, minlength=n_images).astype(np.float64)
    focus, focus_prob = np.full(n_images, -1, dtype=np.int64), np.full(n_images, np.nan)
    if len(rows):
        # per image, the pair with the largest doubt (ties: the lower class index)
        order = np.lexsort((classes, -doubt, rows))
        first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
        focus[rows[first]], focus_prob[rows[first]] = classes[first], probs[first]
    if top1 is None or np.size(top1) == 0:
        run_risk, at_stake = np.zeros(n_images), np.zeros(n_images, dtype=np.int64)
    else:
        q = correct_probability(rows, classes, probs, n_images, top1)
        risk = np.minimum(q, 1.0 - q)
        run_risk, at_stake = risk.sum(axis=0), (risk >= AT_STAKE).sum(axis=0).astype(np.int64)
    return Benefit(label_errors + run_weight * run_risk, label_errors, run_risk, at_stake, focus, focus_prob)


def active_order(benefit: Benefit, seed: int = 0, exclude: np.ndarray | None = None) -> np.ndarray:
    """Image indices, highest benefit first; ties in a seeded shuffle. `exclude` (bool, n_images): images left
    out (already reviewed, say)."""
    n = len(benefit.score)
    tiebreak = np.random.default_rng(seed).permutation(n)
    order = np.lexsort((tiebreak, -benefit.score))
    if exclude is not None:
        order = order[~np.asarray(exclude, dtype=bool)[order]]
    return order


def reason(benefit: Benefit, image: int, class_name: Callable[[int], str]) -> str:
    """One line saying why `image` is next, e.g. "P(tabby cat) = 0.55; changes 3 runs' top-1"."""
    c = int(benefit.focus[image])
    if c < 0:
        return "no votes yet"
    parts = [f"P({class_name(c)}) = {benefit.focus_prob[image]:.2f}"]
    k = int(benefit.runs_at_stake[image])
    if k:
        parts.append("changes 1 run's top-1" if k == 1 else f"changes {k} runs' top-1")
    elif benefit.label_errors[image] >= AT_STAKE:
        parts.append(f"{benefit.label_errors[image]:.2f} expected label errors")
    return "; ".join(parts)


def score_variance(q: np.ndarray, images: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """(n_runs,) the variance of each run's count of correct images from label uncertainty alone, sum of
    q(1 - q) over `images` (None: all), with q from `correct_probability`."""
    q = np.atleast_2d(q)
    if images is not None:
        q = q[:, np.asarray(images, dtype=np.int64)]
    return (q * (1.0 - q)).sum(axis=1)
