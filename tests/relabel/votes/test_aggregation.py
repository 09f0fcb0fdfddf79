"""Aggregation methods (relabel/votes/aggregation.py): counting rules on hand-made cases, Dawid-Skene and one-coin on
synthetic workers of known reliability, crowd-kit as an oracle, and the real ReaL and MTurk answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from relabel.common.errors import InputError
from relabel.votes import aggregation
from relabel.votes.aggregation import (
    MAYBE,
    METHODS,
    MIN_SHARED_ANSWERS,
    NO,
    RENAMED,
    YES,
    FitOptions,
    Method,
    Votes,
    aggregate,
    check_threshold,
    decide,
    make_votes,
    method_summaries,
    shared_answers,
    uncertain,
)
from relabel.votes.fit import shared_caution
from tests.conftest import shared


def _votes(rows: list[tuple[int, int, int]], item_image: list[int]) -> Votes:
    """Votes from (item, worker, answer) rows."""
    item, worker, answer = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    return make_votes(item, worker, answer, np.array(item_image, dtype=np.int64))


# ---------------------------------------------------------------- synthetic workers


def _synthetic(
    seed: int = 0,
    n_items: int = 2000,
    n_workers: int = 30,
    share: float = 0.5,
    prior: float = 0.3,
    maybe: float = 0.1,
):
    """Workers of known reliability, each answering about `share` of the items. A worker w says yes to a present
    class with probability sens[w] and no to an absent one with spec[w], maybe with probability `maybe` either way.

    Returns (votes, truth (I,) bool, sens (W,), spec (W,)).
    """
    rng = np.random.default_rng(seed)
    truth = rng.random(n_items) < prior
    sens = rng.uniform(0.6, 0.95, n_workers)
    spec = rng.uniform(0.6, 0.95, n_workers)
    asked = rng.random((n_workers, n_items)) < share
    asked[rng.integers(0, n_workers, n_items), np.arange(n_items)] = True  # nobody left unanswered
    worker, item = np.nonzero(asked)
    right = np.where(truth[item], sens[worker], spec[worker]) * (1 - maybe)
    u = rng.random(len(item))
    said_yes = np.where(u < right, truth[item], ~truth[item])
    code = np.where(u >= 1 - maybe, MAYBE, np.where(said_yes, YES, NO))
    votes = make_votes(item, worker, code, np.arange(n_items))
    return votes, truth, sens, spec


def _with_spammer(votes: Votes, seed: int = 0) -> Votes:
    """`votes` plus one more worker who answers every item no / maybe / yes at random, whatever the truth."""
    rng = np.random.default_rng(seed)
    code = rng.choice([NO, MAYBE, YES], size=votes.n_items, p=[0.5, 0.1, 0.4])
    return make_votes(
        np.concatenate([votes.item, np.arange(votes.n_items)]),
        np.concatenate([votes.worker, np.full(votes.n_items, votes.n_workers)]),
        np.concatenate([votes.answer, code]),
        votes.item_image,
    )


def _empirical(votes: Votes, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W,) sensitivity and specificity each worker actually showed on the drawn truth."""
    present = truth[votes.item]
    yes_present = np.bincount(votes.worker, weights=present & (votes.answer == YES), minlength=votes.n_workers)
    no_absent = np.bincount(votes.worker, weights=~present & (votes.answer == NO), minlength=votes.n_workers)
    n_present = np.bincount(votes.worker, weights=present, minlength=votes.n_workers)
    return yes_present / n_present, no_absent / (np.bincount(votes.worker, minlength=votes.n_workers) - n_present)


class TestDawidSkene:
    def test_recovers_each_workers_sensitivity_and_specificity(self):
        votes, truth, sens, spec = _synthetic()
        result = aggregate(votes, "ds")
        shown_sens, shown_spec = _empirical(votes, truth)
        fitted = result.workers
        assert np.abs(fitted.sensitivity - shown_sens).max() < 0.05
        assert np.abs(fitted.specificity - shown_spec).max() < 0.05
        # against the parameters the workers were drawn with (sampling noise included)
        assert np.abs(fitted.sensitivity - sens * 0.9).max() < 0.08
        assert np.abs(fitted.sensitivity - sens * 0.9).mean() < 0.03
        assert np.abs(fitted.specificity - spec * 0.9).mean() < 0.03
        assert abs(result.prior - truth.mean()) < 0.02
        assert (decide(result, 0.5) == truth).mean() > 0.97
        assert result.converged

    def test_answer_counts_per_worker(self):
        votes, _, _, _ = _synthetic(n_items=300, n_workers=5)
        answers = aggregate(votes, "ds").workers.answers
        assert answers.sum() == len(votes.item)
        assert answers[2, YES] == np.sum((votes.worker == 2) & (votes.answer == YES))

    def test_spammer_is_down_weighted_and_moves_no_posterior(self):
        honest, truth, _, _ = _synthetic(seed=3, n_workers=13, share=0.2)
        spammed = _with_spammer(honest)
        with_spammer = aggregate(spammed, "ds")
        log_odds = with_spammer.workers.log_odds
        assert np.abs(log_odds[-1]).max() < 0.25
        assert np.median(np.abs(log_odds[:-1, [NO, YES]])) > 1.0
        without = decide(aggregate(honest, "ds"), 0.5)
        assert (decide(with_spammer, 0.5) == without).mean() > 0.99
        # majority vote is hurt: the spammer's answer on every item sways the close ones
        majority_hurt = (decide(aggregate(spammed, "majority")) != truth).mean()
        majority_clean = (decide(aggregate(honest, "majority")) != truth).mean()
        assert majority_hurt > majority_clean + 0.02
        assert (decide(with_spammer, 0.5) != truth).mean() < majority_hurt - 0.03

    def test_all_agree_gives_no_nan(self):
        for code in (YES, NO, MAYBE):
            votes = _votes([(i, w, code) for i in range(4) for w in range(3)], [0, 0, 1, 1])
            for name in ("ds", "one-coin"):
                result = aggregate(votes, name)
                assert np.isfinite(result.posterior).all()
                assert np.isfinite(result.workers.confusion).all()
                assert np.isfinite(result.workers.log_odds).all()
                assert np.allclose(result.workers.confusion.sum(axis=2), 1.0)

    def test_no_votes_at_all(self):
        empty = np.zeros(0, dtype=np.int64)
        votes = make_votes(empty, empty, empty, empty, n_workers=2)
        for name in METHODS:
            result = aggregate(votes, name)
            assert result.posterior.shape == (0,) and decide(result).shape == (0,)
        assert np.array_equal(aggregate(votes, "ds").workers.log_odds, np.zeros((2, 3)))

    def test_worker_without_answers_is_the_average_worker(self):
        votes, _, _, _ = _synthetic(n_items=300, n_workers=5)
        padded = make_votes(votes.item, votes.worker, votes.answer, votes.item_image, n_workers=6)
        for name in ("ds", "one-coin"):
            for smoothing in (0.0, 1.0):
                result = aggregate(padded, name, FitOptions(smoothing=smoothing))
                assert np.allclose(result.workers.confusion[5].sum(axis=1), 1.0)
                assert 0.5 < result.workers.sensitivity[5] < 1.0
                assert np.allclose(result.posterior, aggregate(votes, name, FitOptions(smoothing=smoothing)).posterior)

    def test_single_answer(self):
        result = aggregate(_votes([(0, 0, YES)], [0]), "ds")
        assert np.isfinite(result.posterior).all() and 0.0 <= result.posterior[0] <= 1.0

    def test_progress_is_reported_each_step(self):
        votes, _, _, _ = _synthetic(n_items=300, n_workers=8)
        steps: list[tuple[int, float]] = []
        result = aggregate(votes, "ds", FitOptions(progress=lambda i, change: steps.append((i, change))))
        assert [i for i, _ in steps] == list(range(1, result.iterations + 1))
        assert steps[-1][1] < FitOptions().tol <= steps[0][1]

    def test_convergence_flag(self):
        votes, _, _, _ = _synthetic(n_items=300, n_workers=8)
        stopped = aggregate(votes, "ds", FitOptions(max_iter=1))
        assert not stopped.converged and stopped.iterations == 1
        assert aggregate(votes, "ds").converged


class TestOneCoin:
    def test_recovers_accuracies(self):
        rng = np.random.default_rng(7)
        n_items, n_workers = 2000, 20
        truth = rng.random(n_items) < 0.4
        accuracy = rng.uniform(0.55, 0.95, n_workers)
        worker, item = np.nonzero(rng.random((n_workers, n_items)) < 0.5)
        right = rng.random(len(item)) < accuracy[worker]
        code = np.where(right == truth[item], YES, NO)
        votes = make_votes(item, worker, code, np.arange(n_items), n_workers)
        result = aggregate(votes, "one-coin")
        shown = np.bincount(worker, weights=right, minlength=n_workers) / np.bincount(worker, minlength=n_workers)
        assert np.abs(result.workers.sensitivity - shown).max() < 0.05
        assert np.allclose(result.workers.sensitivity, result.workers.specificity, atol=1e-6)
        assert (decide(result, 0.5) == truth).mean() > 0.95


# ---------------------------------------------------------------- counting rules


class TestCounting:
    def test_all_yes_and_majority(self):
        # item 0: yes yes yes; item 1: yes yes no; item 2: yes maybe no; item 3: yes no
        rows = [(0, 0, YES), (0, 1, YES), (0, 2, YES), (1, 0, YES), (1, 1, YES), (1, 2, NO)]
        rows += [(2, 0, YES), (2, 1, MAYBE), (2, 2, NO), (3, 0, YES), (3, 1, NO)]
        votes = _votes(rows, [0, 0, 0, 0])
        assert decide(aggregate(votes, "all-yes")).tolist() == [True, False, False, False]
        assert decide(aggregate(votes, "majority")).tolist() == [True, True, False, False]
        assert aggregate(votes, "majority").posterior.tolist() == pytest.approx([1, 2 / 3, 1 / 3, 1 / 2])
        assert not uncertain(aggregate(votes, "majority")).any()

    def test_set_majority_reads_whole_ballots(self):
        # image 0 (items 0, 1): ballots {0}, {0}, {0, 1}, {1}, {0} -> {0} wins 3 of 5
        # image 1 (items 2, 3): ballots {2}, {3}, {2, 3}, {}, {2, 3} -> no set has a majority: undecided
        ballots = [[0], [0], [0, 1], [1], [0], [2], [3], [2, 3], [], [2, 3]]
        rows = []
        for b, chosen in enumerate(ballots):
            worker, image_items = b % 5, (0, 1) if b < 5 else (2, 3)
            rows += [(i, worker, YES if i in chosen else NO) for i in image_items]
        result = aggregate(_votes(rows, [0, 0, 1, 1]), "set-majority")
        assert decide(result).tolist() == [True, False, False, False]
        assert uncertain(result).tolist() == [False, False, True, True]
        assert result.posterior.tolist() == pytest.approx([0.8, 0.4, 0.6, 0.6])

    def test_mturk_majority_counts(self):
        """Northcutt et al.'s five MTurk votes per candidate error, read as ballots: given / guessed / both /
        neither, at least 3 of 5; the published counts."""
        records = json.loads(shared("imagenet-val", "mturk_label_errors.json").read_text())
        rows, kinds = [], {"given": [YES, NO], "guessed": [NO, YES], "both": [YES, YES], "neither": [NO, NO]}
        for r, record in enumerate(records):
            worker = 0
            for kind, answers in kinds.items():
                for _ in range(record["mturk"][kind]):
                    rows += [(2 * r, worker, answers[0]), (2 * r + 1, worker, answers[1])]
                    worker += 1
        votes = _votes(rows, [r for r in range(len(records)) for _ in (0, 1)])
        result = aggregate(votes, "set-majority")
        given, guessed = decide(result)[0::2], decide(result)[1::2]
        open_ = uncertain(result)[0::2]
        counts = {
            "given": int(np.sum(given & ~guessed)),
            "guessed": int(np.sum(guessed & ~given)),
            "both": int(np.sum(given & guessed)),
            "neither": int(np.sum(~given & ~guessed & ~open_)),
            "none": int(open_.sum()),
        }
        assert counts == {"given": 2524, "guessed": 1428, "both": 597, "neither": 293, "none": 598}


# ---------------------------------------------------------------- input checks and thresholds


class TestInput:
    @pytest.mark.parametrize(
        ("arrays", "message"),
        [
            ((np.array([0.0]), np.array([0]), np.array([2]), np.array([0])), "item must be a 1-D integer array"),
            ((np.array([0, 0]), np.array([0]), np.array([2]), np.array([0])), "differ in length"),
            ((np.array([1]), np.array([0]), np.array([2]), np.array([0])), "item 1 at answer 0 is outside 0..0"),
            ((np.array([0]), np.array([-1]), np.array([2]), np.array([0])), "worker -1 at answer 0"),
            ((np.array([0]), np.array([0]), np.array([3]), np.array([0])), "answer 3 at answer 0 is outside 0..2"),
            ((np.array([0]), np.array([0]), np.array([2]), np.array([-2])), "item_image -2 is negative"),
            ((np.array([0]), np.array([0]), np.array([2]), np.array([0, 0])), "item 1 has no answer"),
        ],
    )
    def test_make_votes_errors_are_one_line(self, arrays, message):
        with pytest.raises(InputError, match=message) as caught:
            make_votes(*arrays)
        assert "\n" not in str(caught.value)

    def test_unknown_method_lists_the_known_ones(self):
        votes = _votes([(0, 0, YES)], [0])
        with pytest.raises(InputError, match=f"unknown aggregation method 'em'; known: {', '.join(METHODS)}$"):
            aggregate(votes, "em")
        # "unanimous" is the studio's consensus rule alone: the every-answer-yes method was renamed
        with pytest.raises(InputError, match="unknown aggregation method 'unanimous'"):
            aggregate(votes, "unanimous")
        assert RENAMED == {"unanimous": "all-yes"} and set(RENAMED.values()) <= set(METHODS)

    def test_a_method_registered_alone_is_run_under_its_name(self, monkeypatch: pytest.MonkeyPatch):
        # a method whose fit names itself otherwise (a copy of majority) still reports the name it was run as
        monkeypatch.setitem(METHODS, "any-yes", Method("any-yes", "some answer is yes", METHODS["majority"].fit, False))
        votes = _votes([(0, 0, YES), (0, 1, NO), (0, 2, NO)], [0])
        result = aggregate(votes, "any-yes")
        assert result.method == "any-yes" and result.posterior.tolist() == pytest.approx([1 / 3])
        assert method_summaries()["any-yes"] == "some answer is yes" and list(method_summaries()) == list(METHODS)

    def test_thresholds(self):
        with pytest.raises(InputError, match="threshold 1.5 is outside"):
            check_threshold(1.5, "threshold")
        result = aggregate(_votes([(0, 0, YES), (1, 0, NO), (1, 1, YES)], [0, 0]), "ds")
        posterior = result.posterior
        assert decide(result, 1.0).tolist() == (posterior >= 1.0).tolist()
        original = np.array([False, True])
        kept = decide(result, 0.99, original=original, keep_original=min(posterior[1], 0.99))
        assert kept[1]
        assert uncertain(result, 0.9).tolist() == ((posterior > 0.1) & (posterior < 0.9)).tolist()

    def test_an_original_label_needs_less_to_stay(self):
        # two workers: item 0 (the original label) gets yes and maybe, item 1 (a proposal) the same answers
        votes = _votes([(0, 0, YES), (0, 1, MAYBE), (1, 0, YES), (1, 1, MAYBE), (2, 0, NO), (2, 1, NO)], [0, 0, 0])
        result = aggregate(votes, "ds")
        assert result.posterior[0] == pytest.approx(result.posterior[1])
        threshold = (result.posterior[0] + 1) / 2  # above both
        original = np.array([True, False, False])
        assert decide(result, threshold).tolist() == [False, False, False]
        assert decide(result, threshold, original=original, keep_original=0.5).tolist() == [True, False, False]
        with pytest.raises(InputError, match="keep-original threshold 0.0 is outside"):
            decide(result, threshold, original=original, keep_original=0.0)


# ---------------------------------------------------------------- crowd-kit as an oracle


@pytest.mark.filterwarnings("ignore:::crowdkit")  # its pandas calls are deprecated in pandas 3, not ours
class TestAgainstCrowdKit:
    @staticmethod
    def _frame(votes: Votes):
        pd = pytest.importorskip("pandas")
        return pd.DataFrame({"worker": votes.worker, "task": votes.item, "label": (votes.answer == YES).astype(int)})

    @staticmethod
    def _yes_no(seed: int) -> Votes:
        votes, _, _, _ = _synthetic(seed=seed, n_items=1000, n_workers=15, share=0.3, maybe=0.0)
        return votes

    def test_dawid_skene(self):
        crowdkit = pytest.importorskip("crowdkit.aggregation")
        votes = self._yes_no(11)
        theirs = crowdkit.DawidSkene(n_iter=500, tol=1e-8).fit_predict_proba(self._frame(votes))
        ours = aggregate(votes, "ds", FitOptions(smoothing=0.0, tol=1e-8)).posterior
        assert np.abs(theirs[1].sort_index().to_numpy() - ours).max() < 0.01

    def test_one_coin(self):
        crowdkit = pytest.importorskip("crowdkit.aggregation")
        votes = self._yes_no(12)
        fitted = crowdkit.OneCoinDawidSkene(n_iter=500, tol=1e-8).fit(self._frame(votes))
        theirs = fitted.probas_[1].sort_index().to_numpy()
        ours = aggregate(votes, "one-coin", FitOptions(smoothing=0.0, tol=1e-8))
        assert np.abs(theirs - ours.posterior).max() < 0.01
        skills = fitted.skills_.sort_index().to_numpy()
        assert np.abs(skills - ours.workers.sensitivity).max() < 0.01


# ---------------------------------------------------------------- the real ReaL rater answers


def _real_votes() -> tuple[Votes, np.ndarray, np.ndarray]:
    """ReaL's published rater answers as votes (item = rated (image, label) pair, worker = rater row, answer =
    the position of the one-hot's 1); whether each pair's label is in ReaL's label set for its image; whether it is the
    image's original ImageNet label."""
    raters = np.load(shared("imagenet-val", "real_raters.npz"), allow_pickle=True)
    coded = raters["tensor"] @ np.array([1.0, 2.0, 3.0])  # (raters, pairs): 0 unanswered, else answer code + 1
    worker, item = np.nonzero(coded)
    answer = coded[worker, item].astype(np.int64) - 1
    index = np.array([int(name.split("_")[-1].split(".")[0]) - 1 for name, _ in raters["info"]])
    label = np.array([int(lab) for _, lab in raters["info"]])
    image = np.unique(index, return_inverse=True)[1]
    votes = make_votes(item, worker, answer, image, raters["tensor"].shape[0])
    real = json.loads(shared("imagenet-val", "real.json").read_text())
    truth = np.array([lab in real[i] for i, lab in zip(index, label, strict=True)])
    paths = json.loads(shared("imagenet-val", "index_to_filepath.json").read_text())
    original = np.empty(len(paths), dtype=np.int64)
    original[[int(p.split("_")[-1].split(".")[0]) - 1 for p in paths]] = np.load(
        shared("imagenet-val", "original_labels_by_index.npy")
    )
    return votes, truth, label == original[index]


def _agreement(accepted: np.ndarray, truth: np.ndarray, item_image: np.ndarray) -> tuple[float, float]:
    """(share of pairs decided as ReaL did, share of images whose every rated pair is)."""
    wrong = accepted != truth
    return float(1 - wrong.mean()), float(np.mean(np.bincount(item_image, weights=wrong) == 0))


@pytest.fixture(scope="module")
def real_votes():
    return _real_votes()


@pytest.mark.slow  # ReaL's 184,962 rated pairs, fitted by Dawid-Skene
class TestRealRaters:
    def test_shape(self, real_votes):
        votes, truth, original = real_votes
        assert (votes.n_items, votes.n_images, votes.n_workers) == (184_962, 24_889, 85)
        assert len(votes.item) == 5 * votes.n_items
        assert np.array_equal(np.bincount(votes.item_image, weights=original), np.ones(votes.n_images))

    def test_majority_figures(self, real_votes):
        votes, truth, _ = real_votes
        pairs, sets = _agreement(decide(aggregate(votes, "majority")), truth, votes.item_image)
        assert pairs == pytest.approx(0.930, abs=0.001)
        assert sets == pytest.approx(0.580, abs=0.001)

    def test_ds_figures_as_snapshots_decide(self, real_votes):
        """What `relabel snapshot create --consensus ds` decides by default: threshold 0.9, keep-original 0.5."""
        votes, truth, original = real_votes
        result = aggregate(votes, "ds")
        assert result.converged
        accepted = decide(result, 0.9, original=original, keep_original=0.5)
        pairs, sets = _agreement(accepted, truth, votes.item_image)
        assert pairs >= 0.985
        assert sets >= 0.900
        plain_pairs, plain_sets = _agreement(decide(result, 0.9), truth, votes.item_image)
        assert plain_pairs >= 0.985 and plain_sets >= 0.895

    def test_raters_reliability(self, real_votes):
        votes, _, _ = real_votes
        workers = aggregate(votes, "ds").workers
        assert workers.answers.sum() == len(votes.item)
        # one rater answered yes to nearly everything: ReaL's own spammer carries almost no evidence
        always_yes = np.argmax(workers.answers[:, YES] / workers.answers.sum(axis=1))
        assert workers.answers[always_yes, YES] / workers.answers[always_yes].sum() > 0.95
        assert abs(workers.log_odds[always_yes, YES]) < 0.1
        assert np.median(workers.log_odds[:, YES]) > 2.0


@pytest.mark.parametrize("n_workers", [7, 100_000])  # a table of every pair, and too many pairs for one: unique
def test_ballots_and_kinds_are_numpy_uniques_numbers(n_workers: int) -> None:
    rng = np.random.default_rng(3)
    image, worker = rng.integers(0, 40, 500), rng.integers(0, n_workers, 500)
    expected = np.unique(image.astype(np.int64) * n_workers + worker, return_inverse=True)[1].ravel()
    assert np.array_equal(aggregation._ballots(image, worker, 40, n_workers), expected)
    ballot_image, key = rng.integers(0, 30, 300), rng.integers(0, 4, 300).astype(np.uint64) * np.uint64(2**62)
    kinds, kind_of, count = np.unique(
        np.stack([ballot_image.astype(np.uint64), key], axis=1), axis=0, return_inverse=True, return_counts=True
    )
    got = aggregation._kinds(ballot_image, key)
    assert np.array_equal(got[0], kinds[:, 0]) and np.array_equal(got[1], kind_of.ravel())
    assert np.array_equal(got[2], count)
    assert [len(a) for a in aggregation._kinds(np.zeros(0, np.intp), np.zeros(0, np.uint64))] == [0, 0, 0]


# ---------------------------------------------------------------- what the reliabilities are learned from


def test_shared_answers_counts_what_dawid_skene_learns_a_worker_from() -> None:
    # one answer per item: nothing to learn a worker's reliability from
    assert shared_answers(_votes([(0, 0, YES), (1, 1, NO), (2, 2, YES)], [0, 0, 1])) == 0
    # workers 0 and 1 share items 0 and 1; worker 2 answers item 2 alone: the median of 2, 2, 0
    rows = [(0, 0, YES), (0, 1, YES), (1, 0, NO), (1, 1, MAYBE), (2, 2, YES)]
    assert shared_answers(_votes(rows, [0, 0, 1])) == 2
    # a worker's repeated answers to one item count once and do not make the item shared
    assert shared_answers(_votes([(0, 0, YES), (0, 0, NO), (1, 1, YES)], [0, 1])) == 0
    # a worker who answered nothing is not counted (workers 2..4 here)
    v = make_votes(np.array([0, 0]), np.array([0, 1]), np.array([YES, NO]), np.array([0]), n_workers=5)
    assert shared_answers(v) == 1


def test_a_fit_on_few_shared_answers_is_flagged() -> None:
    caution = shared_caution({"rule": "ds", "shared_answers": 3})
    assert caution is not None and "the median worker answered 3 pair(s) that another also answered" in caution
    assert shared_caution({"rule": "one-coin", "shared_answers": MIN_SHARED_ANSWERS - 1}) is not None
    assert shared_caution({"rule": "ds", "shared_answers": MIN_SHARED_ANSWERS}) is None
    assert shared_caution({"rule": "majority", "shared_answers": 0}) is None  # counts answers, learns no reliability
    assert shared_caution({"rule": "ds"}) is None  # a snapshot made before the count was recorded
