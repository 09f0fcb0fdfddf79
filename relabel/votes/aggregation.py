"""Aggregate workers' answers into labels: is class c in image i, given several no / maybe / yes answers?

Pure maths on arrays (numpy only; no database). An *item* is one (image, class) pair that workers were asked
about; its truth is binary (the class is in the image or not), each answer is one of no / maybe / yes. Shapes:
N answers, I items, W workers.

Methods, in `METHODS` (the only place that knows their names; the CLI's choices and help and the studio read it):

* ``all-yes``: every answer on the item is yes (called ``unanimous`` before; `RENAMED` reads the old name, which
  is now only the studio's consensus rule, `relabel.decisions.rules`).
* ``majority``: yes from more than half of the item's answers (maybe and no count against).
* ``set-majority``: an image's label set is the set of classes that more than half of its workers gave, whole
  (each worker's yes answers on the image are one ballot); no such set leaves the image undecided. This is how
  MTurk's five votes per candidate error are read (given / guessed / both / neither, at least 3 of 5).
* ``ds``: Dawid and Skene (1979) with a latent binary truth per item and a confusion matrix per worker,
  P(no / maybe / yes | class absent / present), fitted by EM; gives a posterior P(class present) per item.
  It assumes that a worker's answers are independent given the truth (across items and across the classes of
  one image) and that every item of a snapshot shares one prior; a worker with few answers is pulled towards the
  pooled confusion (`FitOptions.smoothing`). A worker whose answers do not depend on the truth (a spammer) gets
  log odds of about 0 and so moves no posterior.
* ``one-coin``: Dawid-Skene with one accuracy per worker (the chance that a yes or no answer is right); the
  share of maybe answers is pooled over the workers, one for present and one for absent classes.

`decide` turns posteriors into labels: a posterior of at least the threshold, or of `keep_original` for a class
that is the image's original label (the burden of proof lies on a change). On ReaL's published rater answers
(85 raters, 184,962 rated (image, class) pairs of 24,889 images, 5 answers each), ds with the threshold and
keep_original chosen on one half of the images decides 98.60 % of the other half's pairs as ReaL does and the whole
rated label set of 90.16 % of its images (bench/bench_calibration.py; the defaults 0.9 and 0.5, fitted on all of
ReaL, give 98.61 % / 90.18 % in-sample; majority vote 93.02 % / 57.97 %); the fit takes about half a second.
Richer models did not agree better with ReaL there: a confusion per worker and number of candidates, per worker
and whether the worker said yes to another class of the image, a per-image prior, an image-level "none of the
candidates" state, an ambiguity class, MACE, one-coin, yes/maybe/no as three latent classes, maybe as abstention.

Checked in tests/relabel/votes/test_aggregation.py on synthetic workers of known reliability, against crowd-kit's
DawidSkene and OneCoinDawidSkene on yes/no answers, on MTurk's published majority counts and on ReaL's answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from relabel.common.errors import InputError

ANSWERS = ("no", "maybe", "yes")  # answer codes 0, 1, 2
NO, MAYBE, YES = 0, 1, 2
_EPS = 1e-10  # floor of a confusion entry, so a never-seen answer is unlikely but not impossible


@dataclass(frozen=True)
class Votes:
    """Answers as parallel arrays, one entry per answer. Build with `make_votes`, which checks them.

    `item` (N,) in 0..n_items-1; `worker` (N,) in 0..n_workers-1; `answer` (N,) codes NO / MAYBE / YES;
    `item_image` (I,) the image of each item, in 0..n_images-1 (set-majority reads whole images).
    """

    item: np.ndarray
    worker: np.ndarray
    answer: np.ndarray
    item_image: np.ndarray
    n_workers: int

    @property
    def n_items(self) -> int:
        return len(self.item_image)

    @property
    def n_images(self) -> int:
        return int(self.item_image.max()) + 1 if len(self.item_image) else 0


def make_votes(
    item: np.ndarray, worker: np.ndarray, answer: np.ndarray, item_image: np.ndarray, n_workers: int | None = None
) -> Votes:
    """Checked `Votes`: integer arrays of equal length, codes in range, every item answered at least once.

    Raises InputError naming the first bad value.
    """
    arrays = {"item": item, "worker": worker, "answer": answer, "item_image": item_image}
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype.kind not in "iu":
            raise InputError(f"votes: {name} must be a 1-D integer array, got {getattr(a, 'dtype', type(a))}")
    if not len(item) == len(worker) == len(answer):
        raise InputError(f"votes: item, worker and answer differ in length ({len(item)}, {len(worker)}, {len(answer)})")
    n_items = len(item_image)
    n_workers = int(worker.max()) + 1 if n_workers is None and len(worker) else (n_workers or 0)
    for name, a, top in (("item", item, n_items), ("worker", worker, n_workers), ("answer", answer, 3)):
        bad = np.flatnonzero((a < 0) | (a >= top))
        if len(bad):
            raise InputError(f"votes: {name} {a[bad[0]]} at answer {bad[0]} is outside 0..{top - 1}")
    if len(item_image) and item_image.min() < 0:
        raise InputError(f"votes: item_image {item_image.min()} is negative")
    unanswered = np.flatnonzero(np.bincount(item, minlength=n_items) == 0)
    if len(unanswered):
        raise InputError(f"votes: item {unanswered[0]} has no answer ({len(unanswered)} such items)")
    as_int = {k: np.ascontiguousarray(v, dtype=np.intp) for k, v in arrays.items()}
    return Votes(as_int["item"], as_int["worker"], as_int["answer"], as_int["item_image"], n_workers)


# answers on shared items the median worker needs before Dawid-Skene's reliabilities, and so its posteriors, are
# more than a guess: at 100 a 0.9 accuracy is known within about ±0.06 (95 %). Set on seed 0 of bench/bench_plan.py's
# replay of ReaL's raters (a median of 41 after 250 reviews: the posteriors still moved far and the review planner's
# forecast missed; 158 after 500: within ±25 %) and checked on seeds 1 and 2 (BENCHMARKS.md)
MIN_SHARED_ANSWERS = 100


def shared_answers(votes: Votes) -> int:
    """The median, over the workers who answered, of each one's answers on items another worker answered too.

    Dawid-Skene learns a worker's reliability only where others answered the same item; with one answer per item
    (0 here) it has nothing to learn it from, and the posteriors come out as sure as the starting guess; below
    `MIN_SHARED_ANSWERS` they are a rough estimate. A worker's repeated answers to one item count once.

    >>> v = make_votes(np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([2, 2, 0]), np.array([0, 0]))
    >>> shared_answers(v)
    1
    """
    if not len(votes.item):
        return 0
    width = max(votes.n_workers, 1)
    keys = np.sort(votes.item.astype(np.int64) * width + votes.worker)  # np.unique took 8x as long on 924,810 answers
    answered = keys[np.r_[True, keys[1:] != keys[:-1]]]
    item, worker = answered // width, answered % width
    shared = np.bincount(item, minlength=votes.n_items)[item] >= 2
    per_worker = np.bincount(worker[shared], minlength=width)
    return int(np.median(per_worker[np.bincount(worker, minlength=width) > 0]))


@dataclass(frozen=True)
class WorkerReliability:
    """What a fit learnt about each worker.

    `confusion` (W, 2, 3): P(answer | truth); [w, 0] for an absent class, [w, 1] for a present one; rows sum to 1.
    `answers` (W, 3): how many no / maybe / yes answers the worker gave.
    """

    confusion: np.ndarray
    answers: np.ndarray

    @property
    def sensitivity(self) -> np.ndarray:
        """(W,) P(yes | class present)."""
        return self.confusion[:, 1, YES]

    @property
    def specificity(self) -> np.ndarray:
        """(W,) P(no | class absent)."""
        return self.confusion[:, 0, NO]

    @property
    def log_odds(self) -> np.ndarray:
        """(W, 3) the evidence each answer carries, log P(answer | present) / P(answer | absent): about 0 for a
        worker whose answers do not depend on the truth (a spammer), large for a reliable one."""
        return np.log(self.confusion[:, 1, :]) - np.log(self.confusion[:, 0, :])


@dataclass(frozen=True)
class Aggregate:
    """The outcome of one method on one set of votes.

    `posterior` (I,): P(class present) for a probabilistic method; for a counting method the share of yes
    answers (all-yes, majority) or of ballots holding the class (set-majority). `accepted` (I,) bool: a counting
    method's own decision (None: the decision is a threshold on the posterior, see `decide`). `undecided` (I,)
    bool: items of images that a method leaves open (set-majority without a majority), or None.
    """

    method: str
    posterior: np.ndarray
    accepted: np.ndarray | None = None
    undecided: np.ndarray | None = None
    workers: WorkerReliability | None = None
    prior: float = float("nan")  # P(class present) of an item, as fitted
    iterations: int = 0
    converged: bool = True


Progress = Callable[[int, float], None]  # (iteration, largest change of a posterior) after each EM step


@dataclass(frozen=True)
class FitOptions:
    """EM settings. `smoothing`: pseudo-answers that pull each worker's confusion towards the pooled one, so a
    worker with a handful of answers is not trusted blindly (0: plain maximum likelihood, as crowd-kit).
    `initial` (I,): a warm start, the posterior EM starts from (a previous fit's, after a few more answers came
    in), NaN for an item to start at the soft majority as a cold start does (a new item); None: a cold start.
    EM converges to the same fixed point from either start when the answers pin it down (a refit after a few
    reviews moves little, so it takes far fewer iterations); the same `tol` ends both."""

    max_iter: int = 500
    tol: float = 1e-6  # stop when no posterior moves more than this in one step
    smoothing: float = 1.0
    progress: Progress | None = field(default=None, compare=False)
    initial: np.ndarray | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Method:
    """An aggregation method: its name, a few words for the CLI's help and the studio, and how it is fitted."""

    name: str
    summary: str
    fit: Callable[[Votes, FitOptions], Aggregate]
    probabilistic: bool  # posteriors are probabilities: thresholds apply, workers get a reliability


def _answer_counts(votes: Votes) -> np.ndarray:
    """(I, 3) how many no / maybe / yes answers each item got."""
    flat = np.bincount(votes.item * 3 + votes.answer, minlength=votes.n_items * 3)
    return flat.reshape(votes.n_items, 3)


def _fit_all_yes(votes: Votes, options: FitOptions) -> Aggregate:
    counts = _answer_counts(votes)
    share = counts[:, YES] / counts.sum(axis=1)
    return Aggregate("all-yes", share, accepted=counts[:, YES] == counts.sum(axis=1))


def _fit_majority(votes: Votes, options: FitOptions) -> Aggregate:
    counts = _answer_counts(votes)
    share = counts[:, YES] / counts.sum(axis=1)
    return Aggregate("majority", share, accepted=2 * counts[:, YES] > counts.sum(axis=1))


def _fit_set_majority(votes: Votes, options: FitOptions) -> Aggregate:
    # A ballot is (image, worker); its set of yes items is summarised by a sum of random 64-bit codes, so equal
    # sets get equal keys (a collision of two different sets has odds of about 2^-64 per pair).
    codes = np.random.default_rng(0).integers(1, 2**63, size=votes.n_items, dtype=np.uint64)
    image = votes.item_image[votes.item]
    ballot = _ballots(image, votes.worker, votes.n_images, votes.n_workers)
    key = np.zeros(ballot.max() + 1 if len(ballot) else 0, dtype=np.uint64)
    yes = votes.answer == YES
    np.add.at(key, ballot[yes], codes[votes.item[yes]])  # uint64 wraps around: a sum modulo 2^64
    ballot_image = np.zeros(len(key), dtype=np.intp)
    ballot_image[ballot] = image
    n_ballots = np.bincount(ballot_image, minlength=votes.n_images)
    kind_image, kind_of, kind_count = _kinds(ballot_image, key)
    winner = np.full(votes.n_images, -1)
    majority = 2 * kind_count > n_ballots[kind_image]
    winner[kind_image[majority]] = np.flatnonzero(majority)
    won = yes & (kind_of[ballot] == winner[image])
    accepted = np.zeros(votes.n_items, dtype=bool)
    accepted[votes.item[won]] = True
    holding = np.zeros(votes.n_items)
    np.add.at(holding, votes.item[yes], 1)  # a ballot answers an item once (one answer per worker and item)
    share = holding / n_ballots[votes.item_image]
    undecided = winner[votes.item_image] < 0
    return Aggregate("set-majority", share, accepted=accepted & ~undecided, undecided=undecided)


def _ballots(image: np.ndarray, worker: np.ndarray, n_images: int, n_workers: int) -> np.ndarray:
    """Each vote's ballot: the rank of its (image, worker) among the distinct pairs, as `np.unique`'s inverse gives
    it; by a table of every pair where that is small beside the votes (no sort), else by `np.unique`."""
    keys = image.astype(np.int64) * n_workers + worker
    size = n_images * n_workers
    if size > 8 * len(keys) + 1_000_000:
        return np.unique(keys, return_inverse=True)[1].ravel()
    seen = np.zeros(size, bool)
    seen[keys] = True
    # a rank is at most the vote count: int32 below 2^31 votes, half of int64's memory to write
    rank = np.cumsum(seen, dtype=np.int32 if len(keys) < 2**31 else np.int64)
    return rank[keys].astype(np.intp) - 1


def _kinds(ballot_image: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (image, key) pairs of the ballots in (image, key) order, as `np.unique(axis=0)` orders them:
    each one's image, each ballot's pair number, and how many ballots have each pair."""
    order = np.lexsort((key, ballot_image))
    image, k = ballot_image[order], key[order]
    first = np.r_[True, (image[1:] != image[:-1]) | (k[1:] != k[:-1])] if len(order) else np.zeros(0, bool)
    kind_of = np.empty(len(order), np.intp)
    kind_of[order] = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    return image[starts], kind_of, np.diff(np.r_[starts, len(order)])


def _initial_posterior(votes: Votes) -> np.ndarray:
    """Soft majority: yes counts 1, maybe 1/2, no 0; kept off 0 and 1 so that EM can move it."""
    counts = _answer_counts(votes)
    share = (counts[:, YES] + 0.5 * counts[:, MAYBE]) / counts.sum(axis=1)
    return np.clip(share, 0.01, 0.99)


def _starting_posterior(votes: Votes, initial: np.ndarray | None) -> np.ndarray:
    """The posterior EM starts from: `initial` where given (a warm start), the soft majority elsewhere."""
    cold = _initial_posterior(votes)
    if initial is None:
        return cold
    warm = np.asarray(initial, dtype=np.float64)
    if warm.shape != cold.shape:
        raise InputError(f"initial posterior has {warm.shape} entries, the votes have {cold.shape[0]} items")
    if np.any((warm < 0) | (warm > 1)):
        raise InputError("initial posterior must lie in [0, 1] (NaN: start the item cold)")
    return np.where(np.isnan(warm), cold, warm)


def _confusion_full(n_present: np.ndarray, n_absent: np.ndarray, smoothing: float) -> np.ndarray:
    """(W, 2, 3) per-worker confusion from expected answer counts (W, 3) under each truth."""
    out = np.empty((len(n_present), 2, 3))
    for truth, n in ((0, n_absent), (1, n_present)):
        pooled = n.sum(axis=0) / max(n.sum(), _EPS)
        smoothed = n + smoothing * pooled
        smoothed[smoothed.sum(axis=1) <= 0] = pooled  # a worker without answers here is taken as the average one
        out[:, truth] = smoothed / np.maximum(smoothed.sum(axis=1, keepdims=True), _EPS)
    return out


def _confusion_one_coin(n_present: np.ndarray, n_absent: np.ndarray, smoothing: float) -> np.ndarray:
    """(W, 2, 3) confusion of one-coin workers: accuracy a_w on yes/no answers, maybe rates m_absent, m_present
    shared by all workers."""
    right = n_present[:, YES] + n_absent[:, NO]
    decisive = right + n_present[:, NO] + n_absent[:, YES]
    pooled = right.sum() / max(decisive.sum(), _EPS)
    accuracy = np.where(
        decisive + smoothing > 0, (right + smoothing * pooled) / np.maximum(decisive + smoothing, _EPS), pooled
    )
    maybe = [n[:, MAYBE].sum() / max(n.sum(), _EPS) for n in (n_absent, n_present)]
    out = np.empty((len(accuracy), 2, 3))
    for truth, right_answer, wrong_answer in ((0, NO, YES), (1, YES, NO)):
        out[:, truth, right_answer] = accuracy * (1 - maybe[truth])
        out[:, truth, wrong_answer] = (1 - accuracy) * (1 - maybe[truth])
        out[:, truth, MAYBE] = maybe[truth]
    return out


def _em(votes: Votes, options: FitOptions, name: str, confusion_of: Callable[..., np.ndarray]) -> Aggregate:
    """EM for a binary latent truth per item: the M-step fits the prior and the confusions to the posteriors,
    the E-step sums each answer's log odds onto its item."""
    worker_answer = votes.worker * 3 + votes.answer
    per_worker = np.bincount(worker_answer, minlength=votes.n_workers * 3).astype(float)
    if votes.n_items == 0:  # nothing to learn from: every worker's answers carry no evidence
        nothing = WorkerReliability(np.full((votes.n_workers, 2, 3), 1 / 3), np.zeros((votes.n_workers, 3), np.int64))
        return Aggregate(name, np.zeros(0), workers=nothing)
    posterior = _starting_posterior(votes, options.initial)
    converged, iteration = False, 0
    for iteration in range(1, options.max_iter + 1):
        prior = float(np.clip(posterior.mean(), _EPS, 1 - _EPS))
        n_present = np.bincount(worker_answer, weights=posterior[votes.item], minlength=votes.n_workers * 3)
        confusion = confusion_of(n_present.reshape(-1, 3), (per_worker - n_present).reshape(-1, 3), options.smoothing)
        confusion = np.clip(confusion, _EPS, 1.0)
        log_odds = (np.log(confusion[:, 1, :]) - np.log(confusion[:, 0, :])).ravel()
        logit = np.log(prior / (1 - prior)) + np.bincount(
            votes.item, weights=log_odds[worker_answer], minlength=votes.n_items
        )
        updated = 1.0 / (1.0 + np.exp(-logit))
        change = float(np.abs(updated - posterior).max())
        posterior = updated
        if options.progress is not None:
            options.progress(iteration, change)
        if change < options.tol:
            converged = True
            break
    reliability = WorkerReliability(confusion, per_worker.reshape(-1, 3).astype(np.int64))
    return Aggregate(name, posterior, workers=reliability, prior=prior, iterations=iteration, converged=converged)


def _fit_ds(votes: Votes, options: FitOptions) -> Aggregate:
    return _em(votes, options, "ds", _confusion_full)


def _fit_one_coin(votes: Votes, options: FitOptions) -> Aggregate:
    return _em(votes, options, "one-coin", _confusion_one_coin)


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("all-yes", "every answer is yes", _fit_all_yes, probabilistic=False),
        Method("majority", "yes from more than half of the answers", _fit_majority, probabilistic=False),
        Method(
            "set-majority",
            "the whole label set that more than half of an image's workers gave; none: undecided",
            _fit_set_majority,
            probabilistic=False,
        ),
        Method("ds", "Dawid-Skene: a no/maybe/yes confusion per worker, fitted by EM", _fit_ds, probabilistic=True),
        Method("one-coin", "Dawid-Skene with one accuracy per worker, fitted by EM", _fit_one_coin, probabilistic=True),
    )
}


RENAMED = {"unanimous": "all-yes"}  # old name -> the method's name now, for `relabel votes aggregate --method`


def method_summaries() -> dict[str, str]:
    """Each method's summary, in the registry's order: what the CLI's help and the studio list."""
    return {name: m.summary for name, m in METHODS.items()}


def get_method(name: str) -> Method:
    """The registered method `name`; InputError listing the known ones."""
    if name not in METHODS:
        raise InputError(f"unknown aggregation method {name!r}; known: {', '.join(METHODS)}")
    return METHODS[name]


def aggregate(votes: Votes, method: str, options: FitOptions | None = None) -> Aggregate:
    """Run the aggregation `method` (a name of `METHODS`) on `votes`; the result carries the name it was run as."""
    result = get_method(method).fit(votes, options or FitOptions())
    return result if result.method == method else replace(result, method=method)


def check_threshold(value: float, what: str) -> float:
    if not 0.0 < value <= 1.0:
        raise InputError(f"{what} {value} is outside (0, 1]; a posterior threshold is a probability, e.g. 0.9")
    return value


def decide(
    result: Aggregate,
    threshold: float = 0.9,
    *,
    original: np.ndarray | None = None,
    keep_original: float | None = None,
) -> np.ndarray:
    """(I,) bool: which items become labels.

    A counting method decides by its own rule. For a probabilistic one an item is accepted when its posterior is
    at least `threshold`; an item in `original` (I,) bool (the class is the image's original label) needs only
    `keep_original`, so the burden of proof lies on a change: the original label stays unless the answers make it
    less likely than not (keep_original 0.5), while a new label needs strong evidence.
    """
    if result.accepted is not None:
        return result.accepted
    check_threshold(threshold, "threshold")
    needed = np.full(len(result.posterior), threshold)
    if original is not None and keep_original is not None:
        needed[original] = check_threshold(keep_original, "keep-original threshold")
    return result.posterior >= needed


def uncertain(
    result: Aggregate,
    threshold: float = 0.9,
    *,
    original: np.ndarray | None = None,
    keep_original: float | None = None,
) -> np.ndarray:
    """(I,) bool: items whose answers settle nothing, the one definition of "uncertain" that snapshots (category U,
    origin "uncertain"), the vote report and the review queue read. For a probabilistic method: an item neither
    accepted by `decide` (the same `threshold`, `original` and `keep_original`) nor confidently absent (a
    posterior of at most min(threshold, 1 - threshold)); a counting method's undecided items (set-majority
    without a majority), none for the others. An image with such an item is a candidate for review."""
    if result.undecided is not None:
        return result.undecided
    if result.accepted is not None:
        return np.zeros(len(result.posterior), dtype=bool)
    accepted = decide(result, threshold, original=original, keep_original=keep_original)
    return (result.posterior > min(threshold, 1 - threshold)) & ~accepted
