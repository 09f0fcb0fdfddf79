"""How many more reviews, in the active order, until the scores of the stored runs stop moving. Pure numpy.

From the consensus (posteriors as `rows`, `classes`, `probs`, as in `relabel.review.active`) and the stored runs'
top-1 classes, q[r, i] = P(run r's top-1 on image i is in the image's label set)
(`relabel.review.active.correct_probability`). Run r's count of correct images is a sum of independent coins
(the label sets of different images are independent, as in the evaluator's label draws), so:

* **top-1 now** (points): 100 · Σ_i q[r, i] / n_r over the n_r images the run is scored on;
* **half-width** of its top-1 interval from label uncertainty: the normal approximation
  100 · 1.96 · sqrt(Σ_i q(1 - q)) / n_r of the interval `evaluator.label_uncertainty` draws (its "label interval":
  the images fixed, only the label sets drawn). The evaluator also drops an image from a draw whose drawn set is
  empty; the approximation keeps n_r fixed;
* **ranking stability**: the runs ordered by top-1 now, best first; for each adjacent pair (r above s) the
  difference D = correct_r / n_r - correct_s / n_s has mean Δ (the difference now) and variance the sum over images
  of Var(x_ri / n_r - x_si / n_s), where x is "the run's top-1 is in the label set". On an image where the two runs
  share a top-1 the two x are the same coin, so the term is (1/n_r - 1/n_s)² q(1 - q) (zero for runs scored on the
  same images); where their top-1s differ the two classes are independent (as the evaluator draws them), so the
  terms add: q_r(1 - q_r)/n_r² + q_s(1 - q_s)/n_s². P(the pair keeps its order) = Φ(Δ / sd(D)) (normal
  approximation); the ranking's stability is the product over adjacent pairs (as if the pairs' differences were
  independent: exact for two runs, an approximation beside the union bound 1 - Σ(1 - P) for more). Two runs with
  the same top-1 now are *tied*: their order is a coin however many images are reviewed.

**Forecast.** Reviews walk the active order (`relabel.review.active.active_order`, highest expected benefit first,
computed once from the posteriors now) over the images not excluded (already reviewed: they are not served again).
Assumed: a review *settles* an image, so its q become 0 or 1: its terms leave every variance above, and the
expected values (top-1 now, Δ) stay as they are. With `residual` ρ > 0 a review leaves ρ of each of its image's
terms instead (a few answers more narrow an image's label set without settling it). The variance after k reviews
is the sum of the terms of the images not yet reviewed (plus ρ times those reviewed), so the reviews needed for a
criterion are the first k where it holds: (a) every run's half-width
is within `target_halfwidth`; (b) the ranking's stability reaches `stability`. None when the pool cannot get
there: a tie, or images left out of the pool (excluded) keeping too much variance. What the assumptions leave out:
a real review may leave an image uncertain (a few answers more, not the truth), refitting the consensus moves the
posteriors of images nobody reviewed, and the active order changes as they move; and posteriors fitted on too few
shared answers move a lot as answers come, so the forecast can be far off either way (`relabel plan` prints a
caution then, `relabel.votes.fit.shared_caution`). `bench/bench_plan.py` measures the forecast against the review
simulator on ReaL's raters.

Example:
    >>> import numpy as np
    >>> q = np.array([[0.5, 1.0, 1.0, 0.0]])
    >>> halfwidths(q, np.array([4])).round(2).tolist()
    [24.5]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from relabel.common.errors import InputError
from relabel.review.active import NO_RUN, active_order, correct_probability, review_benefit

Z95 = 1.96  # two-sided 95 % normal quantile of the half-width
TARGET_HALFWIDTH = 0.25  # points of top-1
STABILITY = 0.95
TIE = 1e-12  # top-1 shares closer than this are tied
# the share of an image's variance a review leaves, as `relabel plan` assumes by default: chosen on one seed of
# bench/bench_plan.py's replay of ReaL's raters (a review there reveals the image's other answers), checked on two
# others (BENCHMARKS.md). `forecast` itself defaults to 0: a review settles the image.
REVIEW_RESIDUAL = 0.35


@dataclass(frozen=True)
class Ranking:
    """`order` the runs (indices) by top-1 now, best first (ties by index); `probability[p]` that the adjacent pair
    (order[p], order[p + 1]) keeps its order; `stability` their product; `tied[p]` the pair's top-1 is the same."""

    order: np.ndarray
    probability: np.ndarray
    stability: float
    tied: np.ndarray


@dataclass(frozen=True)
class Plan:
    """What `forecast` states. Per run (index as in `top1`): `top1_now` (points), `halfwidth_now` (points) and
    `reviews_per_run` until its half-width is within `target_halfwidth` (None: not within the pool). Reviews until
    (a) every run is within the target (`reviews_halfwidth`) and (b) the ranking holds with `stability`
    (`reviews_ranking`); None where the pool cannot get there. `ranking` now; `pool` the images the active order
    can still serve; `order` that order (image indices); `residual` the share of an image's variance a review was
    assumed to leave; `after_pool[p]` the probability that the adjacent pair p of `ranking` keeps its order once
    the whole pool is reviewed (the difference held where it is): the pairs that keep (b) out of reach."""

    top1_now: np.ndarray
    halfwidth_now: np.ndarray
    reviews_per_run: list[int | None]
    reviews_halfwidth: int | None
    reviews_ranking: int | None
    ranking: Ranking
    pool: int
    order: np.ndarray
    target_halfwidth: float
    stability: float
    residual: float = 0.0
    after_pool: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def reviews(self) -> int | None:
        """Reviews until both criteria hold; None when one of them cannot."""
        if self.reviews_halfwidth is None or self.reviews_ranking is None:
            return None
        return max(self.reviews_halfwidth, self.reviews_ranking)


def halfwidths(q: np.ndarray, n: np.ndarray) -> np.ndarray:
    """(n_runs,) the half-width in points of each run's 95 % top-1 interval from label uncertainty,
    100 · 1.96 · sqrt(Σ q(1 - q)) / n (module docstring). `q` (n_runs, n_images) as `correct_probability` gives it
    (0 on images a run is not scored on), `n` (n_runs,) the images each run is scored on (NaN where 0)."""
    q = np.atleast_2d(np.asarray(q, dtype=np.float64))
    return _halfwidth((q * (1.0 - q)).sum(axis=1), _counts(n, len(q)))


def expected_top1(q: np.ndarray, n: np.ndarray) -> np.ndarray:
    """(n_runs,) each run's expected top-1 in points, 100 · Σ q / n (NaN where n is 0)."""
    q = np.atleast_2d(np.asarray(q, dtype=np.float64))
    n = _counts(n, len(q))
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * q.sum(axis=1) / np.where(n > 0, n, np.nan)


def ranking_stability(q: np.ndarray, top1: np.ndarray, n: np.ndarray) -> Ranking:
    """The probability that the current order of the runs' expected top-1 holds (module docstring). `q`, `top1`
    (n_runs, n_images): as for `correct_probability` (NO_RUN where a run has no top-1); `n` (n_runs,) the images
    each run is scored on (at least 1)."""
    q, top1, n = _check_runs(q, top1, n)
    mean = q.sum(axis=1) / n
    order, delta, terms = _pair_terms(q, top1, n, mean)
    probability = np.array([_keeps(d, v) for d, v in zip(delta, terms.sum(axis=1))])
    return Ranking(order, probability, float(np.prod(probability)), delta <= TIE)


def forecast(
    rows: np.ndarray,
    classes: np.ndarray,
    probs: np.ndarray,
    n_images: int,
    top1: np.ndarray,
    *,
    scored: np.ndarray | None = None,
    exclude: np.ndarray | None = None,
    run_weight: float = 1.0,
    seed: int = 0,
    target_halfwidth: float = TARGET_HALFWIDTH,
    stability: float = STABILITY,
    residual: float = 0.0,
) -> Plan:
    """Reviews in the active order until each run's top-1 half-width is within `target_halfwidth` points and the
    ranking holds with probability `stability` (module docstring: what is assumed).

    `rows`, `classes`, `probs`: the posteriors of the listed (image, class) pairs of `n_images` images; `top1`
    (n_runs, n_images) the runs' top-1 classes (NO_RUN: none); `scored` (n_runs, n_images) bool the images each run
    is scored on (default: where it has a top-1; a failed reply is scored, as wrong, with NO_RUN); `exclude`
    (n_images,) bool images the order no longer serves (reviewed already); `run_weight` and `seed` those of the
    active order (`relabel.review.active`); `residual` in [0, 1) the share of an image's variance a review leaves
    (0: it settles the image). InputError for a run scored on no image or a target out of range."""
    if not target_halfwidth > 0:
        raise InputError(f"the half-width target must be above 0 points, got {target_halfwidth}")
    if not 0.5 < stability < 1:
        raise InputError(f"the ranking's stability must lie in (0.5, 1), got {stability}")
    if not 0 <= residual < 1:
        raise InputError(f"the residual share of a reviewed image's variance must lie in [0, 1), got {residual}")
    top1 = np.atleast_2d(np.asarray(top1, dtype=np.int64))
    q = correct_probability(rows, classes, probs, n_images, top1)
    counted = top1 >= 0 if scored is None else np.atleast_2d(np.asarray(scored, dtype=bool))
    if counted.shape != top1.shape:
        raise InputError(f"scored must have the shape of top1 {top1.shape}, got {counted.shape}")
    q = np.where(counted, q, 0.0)
    n = counted.sum(axis=1)
    q, top1, n = _check_runs(q, top1, n)
    order = active_order(review_benefit(rows, classes, probs, n_images, top1, run_weight), seed, exclude)
    # remaining[:, k]: the variance left after the first k reviews (images never served keep theirs)
    run_left = _remaining(q * (1.0 - q), order, residual)
    needed = (target_halfwidth * n / (100.0 * Z95)) ** 2
    per_run = [_first(run_left[r] <= needed[r]) for r in range(len(q))]
    ranking = ranking_stability(q, top1, n)
    _, delta, terms = _pair_terms(q, top1, n, q.sum(axis=1) / n)
    pair_left = _remaining(terms, order, residual)
    return Plan(
        expected_top1(q, n),
        halfwidths(q, n),
        per_run,
        None if None in per_run else max(per_run, default=0),  # type: ignore[type-var]
        _first_stable(delta, pair_left, stability),
        ranking,
        len(order),
        order,
        float(target_halfwidth),
        float(stability),
        float(residual),
        np.array([_keeps(d, v) for d, v in zip(delta, pair_left[:, -1])]),
    )


def _counts(n: np.ndarray, n_runs: int) -> np.ndarray:
    n = np.atleast_1d(np.asarray(n, dtype=np.float64))
    if n.shape != (n_runs,):
        raise InputError(f"n must hold one count per run ({n_runs}), got shape {n.shape}")
    return n


def _halfwidth(variance: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * Z95 * np.sqrt(np.maximum(variance, 0.0)) / np.where(n > 0, n, np.nan)


def _check_runs(q: np.ndarray, top1: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = np.atleast_2d(np.asarray(q, dtype=np.float64))
    top1 = np.atleast_2d(np.asarray(top1, dtype=np.int64))
    if q.shape != top1.shape:
        raise InputError(f"q and top1 must have one shape (n_runs, n_images), got {q.shape} and {top1.shape}")
    n = _counts(n, len(q))
    empty = np.flatnonzero(n <= 0)
    if len(empty):
        raise InputError(f"run {int(empty[0])} is scored on no image: nothing to plan for it")
    return q, top1, n


def _pair_terms(
    q: np.ndarray, top1: np.ndarray, n: np.ndarray, mean: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(run order best first, Δ (n_runs - 1,) of each adjacent pair, the per-image terms of Var(D)
    (n_runs - 1, n_images))."""
    order = np.lexsort((np.arange(len(mean)), -mean))
    upper, lower = order[:-1], order[1:]
    delta = mean[upper] - mean[lower]
    w_up, w_low = (1.0 / n[upper])[:, None], (1.0 / n[lower])[:, None]
    v_up, v_low = q[upper] * (1.0 - q[upper]), q[lower] * (1.0 - q[lower])
    shared = (top1[upper] == top1[lower]) & (top1[upper] != NO_RUN)
    # a shared top-1 is one coin: (w_up - w_low)² q(1 - q); different top-1s are independent coins
    terms = np.where(shared, (w_up - w_low) ** 2 * v_up, w_up**2 * v_up + w_low**2 * v_low)
    return order, delta, terms


def _remaining(terms: np.ndarray, order: np.ndarray, residual: float = 0.0) -> np.ndarray:
    """(rows, len(order) + 1): the sum of `terms` (rows, n_images) left after the first k images of `order`, each
    reviewed image keeping `residual` of its term; images outside `order` are never removed. Suffix sums, so with
    no residual the last column is exactly the never-served part; the columns never grow."""
    never = np.ones(terms.shape[1], bool)
    never[order] = False
    kept = terms[:, never].sum(axis=1, keepdims=True)
    served = terms[:, order]
    suffix = np.concatenate([np.cumsum(served[:, ::-1], axis=1)[:, ::-1], np.zeros((len(terms), 1))], axis=1)
    if residual:
        suffix = (1.0 - residual) * suffix + residual * suffix[:, :1]
    return suffix + kept


def _first(ok: np.ndarray) -> int | None:
    """The first index where `ok` (monotone: once True, True) holds; None when it never does."""
    return int(np.argmax(ok)) if ok.any() else None


def _keeps(delta: float, variance: float) -> float:
    """Φ(Δ / sd): P(a pair keeps its order); a tie is a coin (0.5)."""
    if delta <= TIE:
        return 0.5
    if variance <= 0:
        return 1.0
    return 0.5 * (1.0 + math.erf(delta / math.sqrt(2.0 * variance)))


def _stability_at(delta: np.ndarray, pair_left: np.ndarray, k: int) -> float:
    return float(np.prod([_keeps(d, v) for d, v in zip(delta, pair_left[:, k])]))


def _first_stable(delta: np.ndarray, pair_left: np.ndarray, stability: float) -> int | None:
    """The fewest reviews after which the ranking holds with `stability`; the stability only grows with the
    reviews (each variance only shrinks), so a binary search."""
    last = pair_left.shape[1] - 1
    if _stability_at(delta, pair_left, last) < stability:
        return None
    lo, hi = 0, last
    while lo < hi:
        mid = (lo + hi) // 2
        if _stability_at(delta, pair_left, mid) >= stability:
            hi = mid
        else:
            lo = mid + 1
    return lo
