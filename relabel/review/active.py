"""Which image to review next: the expected benefit of one more review, from the consensus and the stored runs.

Pure numpy (no database). The consensus gives P(class present) for each (image, class) pair the votes asked about
(`relabel.votes.posteriors`, posteriors as `rows`, `classes`, `probs`; a pair not listed is absent for sure). One more
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

**The learned order** (`relabel.planning.simulation`'s ``learned``) drops the posteriors' own word on their doubt:
a Dawid-Skene fit on one answer per pair is over-confident (one wrong yes lands near 0.98 and is never flagged),
so min(p, 1 - p) ranks mostly by chance. Instead the images reviewed so far say what a review changes: each
reviewed item's features before its review (`flip_features`) and whether its exported decision flipped since
fit a small logistic regression (`fit_flip_model`, Newton steps with a ridge, numpy only); P(an image's label set
changes) = 1 - the product of 1 - P(flip) over its items (`change_probability`); the gain of a review is that
times the chance the reviewed set is right (`settled_chance`, the reviewed images' own fit by number of
candidates), `learned_benefit`. None of it reads a reference.

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

from relabel.common.errors import InputError

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


# The learned order: what a review changed on the images reviewed so far predicts what it changes on the others.
FLIP_FEATURES = (
    "log odds",
    "log odds squared",
    "exported",
    "original",
    "original x log odds",
    "answer yes",
    "answer maybe",
    "a run's top-1",
    "log candidates",
    "worker accuracy",
    "other yes answers",
    "original said no",
)
_LOGIT_CAP = 8.0  # log odds beyond ±8 (posteriors past 0.9997) carry no more information on a flip


@dataclass(frozen=True)
class FlipModel:
    """A logistic regression of "the item's exported decision flips when its image is reviewed" on
    `flip_features`: `weights` (F + 1,) the intercept then one weight per standardised feature, `mean` and
    `scale` (F,) the standardisation of the training features."""

    weights: np.ndarray
    mean: np.ndarray
    scale: np.ndarray


def flip_features(
    probs: np.ndarray,
    exported: np.ndarray,
    original: np.ndarray,
    answer: np.ndarray,
    top1_hit: np.ndarray,
    candidates: np.ndarray,
    worker_accuracy: np.ndarray,
    rows: np.ndarray,
) -> np.ndarray:
    """(I, F) the features of `FLIP_FEATURES` for I items before their image's review: `probs` the posterior,
    `exported` (bool) the item is in the exported label set, `original` (bool) it is an original label, `answer`
    the code (no / maybe / yes: 0 / 1 / 2) of the one answer it has, `top1_hit` (bool) a stored run's top-1 is
    its class, `candidates` the number of items of its image, `worker_accuracy` the balanced accuracy in [0, 1]
    the fit gives the worker of that answer, `rows` its image index (for the yes answers on the image's other
    items and whether the image's original label was answered no)."""
    p = np.clip(np.asarray(probs, dtype=np.float64), 1e-12, 1 - 1e-12)
    logit = np.clip(np.log(p) - np.log1p(-p), -_LOGIT_CAP, _LOGIT_CAP) / _LOGIT_CAP
    orig = np.asarray(original, dtype=np.float64)
    answer = np.asarray(answer)
    columns = (
        logit, logit**2, np.asarray(exported, dtype=np.float64), orig, orig * logit,
        (answer == 2).astype(np.float64), (answer == 1).astype(np.float64), np.asarray(top1_hit, dtype=np.float64),
        np.log(np.maximum(np.asarray(candidates, dtype=np.float64), 1.0)), np.asarray(worker_accuracy, np.float64),
    )  # fmt: skip
    rows = np.asarray(rows, dtype=np.int64)
    n = int(rows.max()) + 1 if len(rows) else 0
    yes = (answer == 2).astype(np.float64)
    others = np.bincount(rows, weights=yes, minlength=n)[rows] - yes
    denied = np.bincount(rows, weights=orig * (answer == 0), minlength=n)[rows] > 0
    return np.stack([*columns, np.log1p(others), denied.astype(np.float64)], axis=1)


def fit_flip_model(features: np.ndarray, flipped: np.ndarray, ridge: float = 1.0, iterations: int = 30) -> FlipModel:
    """A `FlipModel` fitted by Newton's method (iteratively reweighted least squares) with an L2 penalty `ridge`
    on the weights (not the intercept), so that a handful of reviews, or none that flipped anything, still give
    finite weights. `features` (n, F) from `flip_features`, `flipped` (n,) bool: the decision changed."""
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(flipped, dtype=np.float64)
    if x.ndim != 2 or len(x) != len(y) or not len(y):
        raise InputError(f"a flip model needs features (n, F) and n outcomes, n ≥ 1; got {x.shape} and {y.shape}")
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    design = np.c_[np.ones(len(x)), (x - mean) / scale]
    penalty = np.full(design.shape[1], float(ridge))
    penalty[0] = 0.0
    rate = (y.sum() + 0.5) / (len(y) + 1.0)  # start at the base rate, kept off 0 and 1
    w = np.zeros(design.shape[1])
    w[0] = np.log(rate / (1 - rate))
    for _ in range(iterations):
        p = _sigmoid(design @ w)
        gradient = design.T @ (y - p) - penalty * w
        hessian = (design * (p * (1 - p))[:, None]).T @ design + np.diag(penalty) + 1e-9 * np.eye(len(w))
        delta = np.linalg.solve(hessian, gradient)
        w += delta
        if np.abs(delta).max() < 1e-8:
            break
    return FlipModel(w, mean, scale)


def flip_probability(model: FlipModel, features: np.ndarray) -> np.ndarray:
    """(I,) P(the item's exported decision flips on review) under `model`, for `features` (I, F)."""
    design = (np.asarray(features, dtype=np.float64) - model.mean) / model.scale
    return _sigmoid(model.weights[0] + design @ model.weights[1:])


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # 1 / (1 + exp(-z)) without overflow


def change_probability(rows: np.ndarray, p_flip: np.ndarray, n_images: int) -> np.ndarray:
    """(n_images,) P(a review changes the image's exported label set) = 1 - the product over its items (`rows`
    their image index) of 1 - P(flip), the flips taken as independent; 0 for an image without items."""
    rows = np.asarray(rows, dtype=np.int64)
    stay = np.log1p(-np.clip(np.asarray(p_flip, dtype=np.float64), 0.0, 1.0 - 1e-12))
    return -np.expm1(np.bincount(rows, weights=stay, minlength=n_images))


def settled_chance(rows: np.ndarray, probs: np.ndarray, reviewed: np.ndarray, cap: int = 12) -> np.ndarray:
    """(n_images,) the chance that an image's label set is right once reviewed, as the reviewed images' own fit
    states it: the geometric mean, over the reviewed images with as many items (`cap` or more counted as `cap`),
    of the product of max(p, 1 - p) over their items; an image's label set has more ways to be wrong the more
    candidates it has. `rows`, `probs`: the items' image index and current posterior; `reviewed` (n_images,)
    bool. Item counts no reviewed image has take the lowest chance seen (1 before any review)."""
    rows = np.asarray(rows, dtype=np.int64)
    reviewed = np.asarray(reviewed, dtype=bool)
    p = np.asarray(probs, dtype=np.float64)
    n_images = len(reviewed)
    log_sure = np.bincount(rows, weights=np.log(np.maximum(np.maximum(p, 1 - p), 1e-12)), minlength=n_images)
    k = np.minimum(np.bincount(rows, minlength=n_images), cap)
    count = np.bincount(k[reviewed], minlength=cap + 1)
    total = np.bincount(k[reviewed], weights=log_sure[reviewed], minlength=cap + 1)
    mean = np.full(cap + 1, np.nan)
    mean[count > 0] = total[count > 0] / count[count > 0]
    mean[count == 0] = np.nanmin(mean) if (count > 0).any() else 0.0
    return np.exp(mean[k])


def learned_benefit(change: np.ndarray, settled: np.ndarray) -> np.ndarray:
    """(n_images,) the expected gain in right label sets from one review: the set changes (`change`, from
    `change_probability`) and the new set is right (`settled`, from `settled_chance`). Taking the reviewed
    set as the truth, the set is right now only if the review changes nothing, so the gain P(right after) -
    P(right now) is P(right after) · P(change)."""
    return np.asarray(change, dtype=np.float64) * np.asarray(settled, dtype=np.float64)
