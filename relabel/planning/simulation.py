"""Replay a review on answers that were given already: how fast does each review order reach the labels?

Pure numpy (no database). A `Pool` holds every answer a team has on its (image, class) items (ReaL's 85 raters,
say), the original (ImGT) labels, a reference label set per image to measure against (ReaL) and the stored runs'
top-1. `simulate` replays a review of it:

* **start**: one answer per item, drawn at random (seeded) among the workers who answered it, plus the original
  labels through the original-label rule (`keep_original`: an ImGT class stays unless the answers make it less
  likely than not);
* **a review** of an image reveals every remaining answer on all its items (one more look settles what the
  whole crowd would say about it);
* **after every `step` reviews** the consensus is rebuilt from the revealed answers (Dawid-Skene by default,
  `relabel.votes.aggregation`; EM starts from the last step's posteriors and stops after `refit_iter` iterations, since
  one answer per pair leaves it creeping for thousands of iterations: on ReaL's raters the warm refits measure as the
  cold ones did and take 0.7 s instead of 4.4 s on 49,778 images; `warm=False`: cold fits. A warm start stays in the
  basin of the last fit, so where one answer per pair leaves the fit label-switched (a pool whose workers are all
  alike), the cold and warm refits can part), decided as a snapshot decides (`relabel.votes.posteriors`: accepted at
  `threshold`, an original class at `keep_original`; an uncertain image exports its best estimate, the classes at
  posterior ≥ 0.5) and measured: agreement with the reference on the items (pairs) and on whole rated label sets, and
  each run's top-1 against the exported labels with the 95 % half-width of that top-1 from label uncertainty alone
  (`relabel.review.active.score_variance`). One `Step` at 0 reviews and one after every `step`.

Orders (`ORDERS`), each picking the next `step` images that are not reviewed yet:

* ``random``: a seeded permutation of the images, fixed at the start;
* ``disputed``: the studio's queue priority (`relabel.review.queue.priority`) as far as its signals exist here,
  recomputed after each refit: UNCERTAIN_WEIGHT for an image the current fit leaves uncertain
  (`relabel.votes.aggregation.uncertain`), plus the suggestion weight when the first stored run's top-1 is not the
  image's (first) original class, or the sum of all weights for an image without an original class. The
  classifier's confidence (no scores here), prior relabels (the reference is the yardstick, not evidence) and
  disputed studio decisions (one answer per item until a review) do not exist in a pool and add nothing. Ties:
  a seeded shuffle, as the queue breaks them;
* ``active``: the expected benefit of one more review (`relabel.review.active.review_benefit`, with the runs'
  top-1) from the current posteriors, highest first, recomputed after each refit (`active_order`);
* ``learned``: what reviews changed so far predicts what the next ones change. When an image is chosen, its
  items' features (`relabel.review.active.flip_features`: posterior, exported decision, the one answer and its
  worker's fitted accuracy, original label, a run's top-1, candidates, the image's other yes answers) and
  exported decisions are kept; after each refit a logistic flip model (`fit_flip_model`) is fitted on the
  reviewed items, outcome: the exported decision differs now. An image's gain is P(its label set changes)
  (`change_probability`) times the chance that a reviewed set is right (`settled_chance`), highest first
  (`learned_benefit`). The first step, with nothing reviewed, takes the random order. It reads the revealed
  answers and the fits, never the reference; the run weight does not enter it.

The defaults are a snapshot's without a calibration (threshold 0.9, original kept at 0.5): calibrating against
the reference would fit the yardstick. Example:

    >>> steps = simulate(pool, "active", step=250, budget=8000)          # doctest: +SKIP
    >>> [(s.reviews, round(s.set_agreement, 4)) for s in steps][:2]      # doctest: +SKIP
    [(0, 0.6123), (250, 0.6302)]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from relabel.common.errors import InputError, unknown_name
from relabel.review.active import (
    FLIP_FEATURES,
    NO_RUN,
    FlipModel,
    active_order,
    change_probability,
    correct_probability,
    fit_flip_model,
    flip_features,
    flip_probability,
    learned_benefit,
    review_benefit,
    score_variance,
    settled_chance,
)
from relabel.votes.aggregation import (
    METHODS,
    Aggregate,
    FitOptions,
    Votes,
    aggregate,
    check_threshold,
    decide,
    uncertain,
)
from relabel.votes.posteriors import BEST_ESTIMATE

ORDERS = ("random", "disputed", "active", "learned")
THRESHOLD, KEEP_ORIGINAL = 0.9, 0.5  # a snapshot's defaults without a calibration (snapshots.UNCALIBRATED_DEFAULTS)
# relabel.review.queue's weights (importing the queue would bring the database along); a test keeps them equal
SUGGESTION_WEIGHT, ALL_WEIGHTS = 1.0, 5.0
UNCERTAIN_WEIGHT = ALL_WEIGHTS + 1.0
Z95 = 1.96
REFIT_ITER = 100  # EM iterations at most in a warm-started refit (a cold fit: FitOptions.max_iter)


@dataclass(frozen=True)
class Pool:
    """All the answers to replay. `votes`: every answer (`votes.item_image` the image index of each item);
    `pairs` (I, 2): image index, class index of each item; `original` (I,) bool: the class is an original (ImGT)
    label of its image; `n_images`: images 0..n_images-1, each with at least one item; `reference`: the label set
    of each image to measure against (None: none); `top1` (n_runs, n_images): each stored run's top-1 class
    (`NO_RUN` where it did not score the image); `run_names`: one per row of `top1`. Build with `make_pool`."""

    votes: Votes
    pairs: np.ndarray
    original: np.ndarray
    n_images: int
    reference: list[frozenset[int]] | None
    top1: np.ndarray
    run_names: tuple[str, ...]

    def __post_init__(self) -> None:
        n_items = self.votes.n_items
        if self.pairs.shape != (n_items, 2) or self.original.shape != (n_items,):
            raise InputError(f"pool: pairs {self.pairs.shape} and original {self.original.shape} need {n_items} items")
        if not np.array_equal(self.pairs[:, 0], self.votes.item_image):
            raise InputError("pool: pairs[:, 0] must be the image index of each item (votes.item_image)")
        if n_items and (np.bincount(self.pairs[:, 0], minlength=self.n_images) == 0).any():
            raise InputError(f"pool: every image of 0..{self.n_images - 1} needs an item")
        if self.top1.ndim != 2 or self.top1.shape != (len(self.run_names), self.n_images):
            raise InputError(f"pool: top1 {self.top1.shape} needs one row per run and one column per image")
        if self.reference is not None and len(self.reference) != self.n_images:
            raise InputError(f"pool: {len(self.reference)} reference label sets for {self.n_images} images")

    @property
    def answers_per_item(self) -> np.ndarray:
        """(I,) how many answers each item has."""
        return np.bincount(self.votes.item, minlength=self.votes.n_items)


def make_pool(
    votes: Votes,
    classes: np.ndarray,
    *,
    original: Sequence[Collection[int]],
    reference: Sequence[Collection[int]] | None = None,
    top1: np.ndarray | None = None,
    run_names: Sequence[str] = (),
) -> Pool:
    """A checked `Pool` from `votes` (item images 0..n-1), the class of each item `classes` (I,), each image's
    `original` labels and `reference` label set (sequences of n), and the runs' `top1` (n_runs, n)."""
    n = votes.n_images
    if len(original) != n:
        raise InputError(f"pool: {len(original)} original label sets for {n} images")
    pairs = np.stack([votes.item_image, np.asarray(classes, dtype=np.intp)], axis=1)
    is_original = np.fromiter((c in original[i] for i, c in pairs.tolist()), bool, len(pairs))
    runs = np.zeros((0, n), np.int64) if top1 is None else np.atleast_2d(np.asarray(top1, dtype=np.int64))
    ref = None if reference is None else [frozenset(int(c) for c in r) for r in reference]
    return Pool(votes, pairs, is_original, n, ref, runs, tuple(run_names))


@dataclass(frozen=True)
class State:
    """The simulated workspace after `reviews` reviews: `reviewed` (n_images,) bool; the posteriors of all items
    as `rows` (image index), `classes`, `probs`; `accepted` (I,) bool: the item is in the exported label set (an
    accepted class, or the best estimate of an uncertain image, as a snapshot exports); `revealed` (N,) bool: the
    pool's answers the fit read."""

    reviews: int
    reviewed: np.ndarray
    rows: np.ndarray
    classes: np.ndarray
    probs: np.ndarray
    accepted: np.ndarray
    revealed: np.ndarray


@dataclass(frozen=True)
class Step:
    """What was measured after `reviews` reviews: `pair_agreement` and `set_agreement` (shares in [0, 1]) of the
    exported labels with the reference over the rated images (NaN without a reference); `run_top1` (n_runs,)
    each run's top-1 in % against the exported labels over the images it scored; `halfwidth` (n_runs,) the 95 %
    half-width of that top-1 in points from label uncertainty alone; `seconds`: the time the step took (choosing
    the images, refitting, deciding, measuring)."""

    reviews: int
    pair_agreement: float
    set_agreement: float
    run_top1: np.ndarray
    halfwidth: np.ndarray
    seconds: float


def simulate(
    pool: Pool,
    order: str,
    step: int,
    budget: int,
    seed: int = 0,
    threshold: float = THRESHOLD,
    keep_original: float | None = KEEP_ORIGINAL,
    on_step: Callable[[Step, State], None] | None = None,
    *,
    method: str = "ds",
    explore: float = 0.0,
    run_weight: float = 1.0,
    warm: bool = True,
    refit_iter: int = REFIT_ITER,
) -> list[Step]:
    """Replay `budget` reviews of `pool` in `order` (one of `ORDERS`), refitting every `step` reviews (module
    docstring); `seed` draws the starting answers, the random order and the ties. `method`: an aggregation of
    `relabel.votes.aggregation.METHODS`. `explore` in [0, 1]: the share of each step's images taken from the random
    order instead (for disputed and active); `run_weight`: the active order's weight of the runs at stake
    (`review_benefit`). `warm`: each refit starts from the last step's posteriors and stops after `refit_iter` EM
    iterations (the first fit is cold). Returns the Steps at 0, step, 2·step, ... reviews and at the end of the
    budget (at most all images); `on_step` gets each Step with its State as it is measured."""
    if not 0.0 <= explore <= 1.0:
        raise InputError(f"explore is a share of each step, in [0, 1]; got {explore}")
    _check(pool, order, step, budget, threshold, keep_original, method)
    rng = np.random.default_rng(seed)
    revealed = _starting_answers(pool.votes, rng)
    permutation = rng.permutation(pool.n_images)
    answer_image = pool.votes.item_image[pool.votes.item]
    reviewed = np.zeros(pool.n_images, dtype=bool)
    truth = _truth(pool)
    budget = min(budget, pool.n_images)
    steps: list[Step] = []
    memory = _FlipMemory(pool, revealed) if order == "learned" else None
    started, done, previous = time.perf_counter(), 0, None
    while True:
        warm_start = previous if warm else None
        result = _fit(pool, revealed, method, warm_start, FitOptions.max_iter if warm_start is None else refit_iter)
        previous = result.posterior if METHODS[method].probabilistic else None
        accepted, open_images = _exported(pool, result, threshold, keep_original)
        state = State(
            done, reviewed.copy(), pool.pairs[:, 0], pool.pairs[:, 1], result.posterior, accepted, revealed.copy()
        )
        measured = _measure(pool, state, truth, time.perf_counter() - started)
        steps.append(measured)
        if on_step is not None:
            on_step(measured, state)
        if done >= budget:
            return steps
        started = time.perf_counter()
        n = min(step, budget - done)
        if memory is not None:
            memory.refit(result, accepted, reviewed)
        explored = permutation[~reviewed[permutation]][: int(round(explore * n))]
        reviewed[explored] = True
        if memory is not None and not memory.ready():  # nothing reviewed to learn from yet: the random order
            chosen = permutation[~reviewed[permutation]][: n - len(explored)]
        elif memory is not None:
            chosen = memory.choose(reviewed, n - len(explored), seed)
        else:
            chosen = _next_images(
                order, pool, state, reviewed, open_images, permutation, n - len(explored), seed, run_weight
            )
        reviewed[chosen] = True
        if memory is not None:
            memory.remember(np.r_[explored, chosen])
        revealed |= reviewed[answer_image]
        done += len(chosen) + len(explored)


class _FlipMemory:
    """The learned order's memory: each item's features and exported decision just before its image's review,
    and after each refit a flip model (`relabel.review.active.fit_flip_model`) of the reviewed items' decisions
    that changed since. It reads the answers revealed and the fits, never the reference."""

    def __init__(self, pool: Pool, revealed: np.ndarray) -> None:
        v = pool.votes
        start = np.flatnonzero(revealed)  # one answer per item at the start
        self.pool, self.start = pool, np.empty(v.n_items, dtype=np.intp)
        self.start[v.item[start]] = start
        image, cls = pool.pairs[:, 0], pool.pairs[:, 1]
        self.top1_hit = (pool.top1[:, image] == cls).any(axis=0)  # False for every item without runs
        self.candidates = np.bincount(image, minlength=pool.n_images)[image]
        self.before = np.full((v.n_items, len(FLIP_FEATURES)), np.nan)
        self.before_exported = np.zeros(v.n_items, dtype=bool)
        self.features = np.full((v.n_items, len(FLIP_FEATURES)), np.nan)
        self.exported = np.zeros(v.n_items, dtype=bool)
        self.settled = np.ones(pool.n_images)
        self.model: FlipModel | None = None

    def refit(self, result: Aggregate, exported: np.ndarray, reviewed: np.ndarray) -> None:
        v, item_reviewed = self.pool.votes, reviewed[self.pool.pairs[:, 0]]
        workers = result.workers
        accuracy = np.full(v.n_workers, 0.5) if workers is None else (workers.sensitivity + workers.specificity) / 2
        self.features = flip_features(
            result.posterior, exported, self.pool.original, v.answer[self.start], self.top1_hit, self.candidates,
            accuracy[v.worker[self.start]], self.pool.pairs[:, 0],
        )  # fmt: skip
        self.exported, self.model = exported, None
        if item_reviewed.any():
            flipped = self.before_exported[item_reviewed] != exported[item_reviewed]
            self.model = fit_flip_model(self.before[item_reviewed], flipped)
        self.settled = settled_chance(self.pool.pairs[:, 0], result.posterior, reviewed)

    def ready(self) -> bool:
        return self.model is not None

    def choose(self, reviewed: np.ndarray, n: int, seed: int) -> np.ndarray:
        """The `n` unreviewed images with the highest expected gain (`relabel.review.active.learned_benefit`)."""
        if self.model is None:
            raise InputError("the learned order has no reviewed image to learn from yet")
        p_flip = flip_probability(self.model, self.features)
        change = change_probability(self.pool.pairs[:, 0], p_flip, self.pool.n_images)
        gain = learned_benefit(change, self.settled)
        tiebreak = np.random.default_rng(seed).permutation(self.pool.n_images)
        ranked = np.lexsort((tiebreak, -gain))
        return ranked[~reviewed[ranked]][:n]

    def remember(self, images: np.ndarray) -> None:
        """Keep the features and decisions of `images`' items as they stand before their review."""
        items = np.isin(self.pool.pairs[:, 0], images)
        self.before[items] = self.features[items][:, : self.before.shape[1]]
        self.before_exported[items] = self.exported[items]


def check_order(order: str) -> str:
    """`order` if it is one of ORDERS; NotFoundError naming the known ones otherwise."""
    if order not in ORDERS:
        raise unknown_name("review order", order, list(ORDERS))
    return order


def _check(pool: Pool, order: str, step: int, budget: int, threshold: float, keep: float | None, method: str) -> None:
    check_order(order)
    if method not in METHODS:
        raise unknown_name("aggregation method", method, list(METHODS))
    if step < 1 or budget < 0:
        raise InputError(f"step must be at least 1 and budget at least 0, got step {step}, budget {budget}")
    check_threshold(threshold, "threshold")
    if keep is not None:
        check_threshold(keep, "keep-original threshold")
    if not pool.votes.n_items:
        raise InputError("pool: no answers to replay")


def _starting_answers(votes: Votes, rng: np.random.Generator) -> np.ndarray:
    """(N,) bool: one answer per item, drawn uniformly among the item's answers."""
    key = rng.random(len(votes.item))
    by_item = np.lexsort((key, votes.item))
    first = by_item[np.r_[True, votes.item[by_item][1:] != votes.item[by_item][:-1]]]
    revealed = np.zeros(len(votes.item), dtype=bool)
    revealed[first] = True
    return revealed


def _fit(pool: Pool, revealed: np.ndarray, method: str, previous: np.ndarray | None, max_iter: int) -> Aggregate:
    """The consensus of the `revealed` answers, EM warm-started from the `previous` step's posteriors (None: a
    cold start) and stopped after `max_iter` iterations."""
    v = pool.votes
    shown = Votes(v.item[revealed], v.worker[revealed], v.answer[revealed], v.item_image, v.n_workers)
    return aggregate(shown, method, FitOptions(max_iter=max_iter, initial=previous))


def _exported(pool: Pool, result: Aggregate, threshold: float, keep: float | None) -> tuple[np.ndarray, np.ndarray]:
    """((I,) bool the item is in the exported label set, (n_images,) bool the image is uncertain): accepted
    items, and the best estimate (`relabel.votes.posteriors.BEST_ESTIMATE`) of uncertain images."""
    accepted = decide(result, threshold, original=pool.original, keep_original=keep)
    open_items = uncertain(result, threshold, original=pool.original, keep_original=keep)
    open_images = np.bincount(pool.pairs[:, 0], weights=open_items, minlength=pool.n_images) > 0
    if result.accepted is None:
        best = decide(result, BEST_ESTIMATE, original=pool.original, keep_original=keep)
        accepted = accepted | (best & open_images[pool.pairs[:, 0]])
    return accepted, open_images


def _truth(pool: Pool) -> np.ndarray | None:
    """(I,) bool: the reference holds the item's class; None without a reference."""
    if pool.reference is None:
        return None
    ref = pool.reference
    return np.fromiter((c in ref[i] for i, c in pool.pairs.tolist()), bool, len(pool.pairs))


def _measure(pool: Pool, state: State, truth: np.ndarray | None, seconds: float) -> Step:
    image = pool.pairs[:, 0]
    if truth is None:
        pairs = sets = float("nan")
    else:
        wrong = np.bincount(image, weights=state.accepted != truth, minlength=pool.n_images)
        pairs, sets = float((state.accepted == truth).mean()), float((wrong == 0).mean())
    scored = (pool.top1 != NO_RUN).sum(axis=1)
    n = np.maximum(scored, 1)
    if len(pool.run_names):
        exported = state.accepted.astype(np.float64)
        in_set = correct_probability(image, pool.pairs[:, 1], exported, pool.n_images, pool.top1)
        q = correct_probability(image, pool.pairs[:, 1], state.probs, pool.n_images, pool.top1)
        top1 = np.where(scored > 0, 100.0 * in_set.sum(axis=1) / n, np.nan)
        halfwidth = np.where(scored > 0, 100.0 * Z95 * np.sqrt(score_variance(q)) / n, np.nan)
    else:
        top1 = halfwidth = np.zeros(0)
    return Step(state.reviews, pairs, sets, top1, halfwidth, seconds)


def _next_images(
    order: str,
    pool: Pool,
    state: State,
    reviewed: np.ndarray,
    open_images: np.ndarray,
    permutation: np.ndarray,
    n: int,
    seed: int,
    run_weight: float,
) -> np.ndarray:
    """The next `n` images to review in `order` (module docstring), none of them `reviewed` yet."""
    if order == "random":
        return permutation[~reviewed[permutation]][:n]
    if order == "active":
        benefit = review_benefit(state.rows, state.classes, state.probs, pool.n_images, pool.top1, run_weight)
        return active_order(benefit, seed=seed, exclude=reviewed)[:n]
    score = disputed_priority(pool, open_images)
    tiebreak = np.random.default_rng(seed).permutation(pool.n_images)
    ranked = np.lexsort((tiebreak, -score))
    return ranked[~reviewed[ranked]][:n]


def disputed_priority(pool: Pool, open_images: np.ndarray) -> np.ndarray:
    """(n_images,) the queue's priority as far as a pool has its signals (module docstring): UNCERTAIN_WEIGHT for
    an uncertain image (`open_images`), plus SUGGESTION_WEIGHT when the first run's top-1 is not the image's first
    original class, ALL_WEIGHTS for an image without an original class."""
    none = np.iinfo(np.int64).max
    first = np.full(pool.n_images, none, dtype=np.int64)
    np.minimum.at(first, pool.pairs[pool.original, 0], pool.pairs[pool.original, 1])  # the lowest original class
    first[first == none] = NO_RUN
    score = UNCERTAIN_WEIGHT * open_images.astype(np.float64)
    if len(pool.run_names):
        suggestion = pool.top1[0]
        score += SUGGESTION_WEIGHT * ((suggestion != NO_RUN) & (suggestion != first) & (first != NO_RUN))
    score[first == NO_RUN] += ALL_WEIGHTS
    return score


def reviews_to_reach(steps: Sequence[Step], goal: float, measure: str = "set_agreement") -> int | None:
    """The fewest reviews after which `measure` (a Step field: set_agreement, pair_agreement) reaches `goal`,
    read off the recorded steps (so rounded up to a multiple of the step); None if it never does."""
    for s in steps:
        if getattr(s, measure) >= goal:
            return s.reviews
    return None


def curve_lines(curves: Mapping[str, Sequence[Step]], run_names: Sequence[str] = ()) -> list[str]:
    """A Markdown table of `curves` (order -> its Steps, all at the same reviews): reviews, then set and pair
    agreement (%) per order, then each run's top-1 (%) per order."""
    orders = list(curves)
    head = ["reviews", *(f"{o}: sets" for o in orders), *(f"{o}: pairs" for o in orders)]
    head += [f"{o}: {r} top-1" for r in run_names for o in orders]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k, first in enumerate(curves[orders[0]]):
        row = [curves[o][k] for o in orders]
        cells = [f"{first.reviews:,}", *(_pct(s.set_agreement) for s in row), *(_pct(s.pair_agreement) for s in row)]
        cells += [f"{s.run_top1[r]:.2f} ± {s.halfwidth[r]:.2f}" for r in range(len(run_names)) for s in row]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _pct(share: float) -> str:
    return "-" if np.isnan(share) else f"{100 * share:.2f}"


def steps_as_dicts(steps: Sequence[Step], run_names: Sequence[str]) -> list[dict[str, object]]:
    """`steps` as JSON-ready rows (agreement as shares, run figures by run name)."""
    return [
        {
            "reviews": s.reviews,
            "pair_agreement": None if np.isnan(s.pair_agreement) else s.pair_agreement,
            "set_agreement": None if np.isnan(s.set_agreement) else s.set_agreement,
            "run_top1": dict(zip(run_names, s.run_top1.tolist())),
            "halfwidth": dict(zip(run_names, s.halfwidth.tolist())),
            "seconds": s.seconds,
        }
        for s in steps
    ]
