"""Top-1 against probabilistic labels: the thresholded score, the expected accuracy over label draws, and the
intervals that combine label uncertainty with the image bootstrap (after Stutz et al. 2023)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from evaluator import EvaluationError, LabelSets
from evaluator.label_uncertainty import Posteriors, UncertainScore, uncertain_accuracy
from evaluator.paired import JointBootstrap, percentile_interval
from evaluator.scoring import image_outcomes, multilabel_accuracy

A, B, C = 3, 7, 11


def exact_expected_accuracy(pred: list[int], posteriors: list[dict[int, float]]) -> float:
    """E[accuracy] by enumerating every joint label draw (each listed class in or out), empty draws excluded
    image by image and all-empty draws left out, as the module defines it; independent of its q/r reduction."""
    pairs = [(i, c, p) for i, post in enumerate(posteriors) for c, p in post.items()]
    total, weight = 0.0, 0.0
    for present in itertools.product((False, True), repeat=len(pairs)):
        prob = math.prod(p if on else 1 - p for (_, _, p), on in zip(pairs, present))
        sets: list[set[int]] = [set() for _ in posteriors]
        for (i, c, _), on in zip(pairs, present):
            if on:
                sets[i].add(c)
        scored = [i for i, s in enumerate(sets) if s]
        if scored and prob > 0:
            total += prob * sum(pred[i] in sets[i] for i in scored) / len(scored)
            weight += prob
    return total / weight


def certain_case(n: int = 3000, seed: int = 5) -> tuple[np.ndarray, Posteriors, np.ndarray, np.ndarray]:
    """Predictions with failed replies and infrastructure errors, and 0/1 posteriors: multi-label sets, listed
    absent classes (p = 0) and images with no class at all."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 50, n)
    pred = np.where(rng.random(n) < 0.7, truth, rng.integers(0, 50, n))
    pred[rng.random(n) < 0.02] = -1  # no class at this rank
    ok = rng.random(n) > 0.05
    failed = ~ok & (rng.random(n) < 0.5)
    second = (truth + 1) % 50
    p_second = (rng.random(n) < 0.2).astype(float)  # a second class in 20 % of the sets, listed as 0 elsewhere
    p_truth = (rng.random(n) > 0.04).astype(float)  # 4 % list the true class as absent: some sets are empty
    rows = np.r_[np.arange(n), np.arange(n)]
    return pred, Posteriors(rows, np.r_[truth, second], np.r_[p_truth, p_second], n, 50), ok, failed


class TestCertainLabels:
    def test_the_interval_is_the_ordinary_bootstrap_interval_exactly(self) -> None:
        pred, post, ok, failed = certain_case()
        sets = post.label_sets(0.9)
        correct, scored = image_outcomes(pred, sets, 1, ok, failed=failed)
        expected = percentile_interval(JointBootstrap(post.n_images, 400, 7).means(correct[None], scored[None]))

        got = uncertain_accuracy(pred, post, ok, failed=failed, n_draws=400, seed=7)

        assert (got.ci_low, got.ci_high) == (float(expected[0][0]), float(expected[1][0]))
        assert got.ci_low < got.thresholded.accuracy < got.ci_high

    def test_every_number_is_the_thresholded_accuracy(self) -> None:
        pred, post, ok, failed = certain_case()
        plain = multilabel_accuracy(pred, post.label_sets(0.9), 1, ok, failed=failed)

        got = uncertain_accuracy(pred, post, ok, failed=failed, n_draws=50)

        assert got.thresholded == plain
        assert got.expected_accuracy == pytest.approx(plain.accuracy, abs=1e-12)
        assert got.label_ci_low == pytest.approx(plain.accuracy) and got.label_ci_high == pytest.approx(plain.accuracy)
        assert got.expected_scored == plain.n_scored and got.n_uncertain == 0


class TestExpectedAccuracy:
    def test_a_right_prediction_with_posterior_0_7_counts_0_7(self) -> None:
        # always scored (another class is certain): E = (0.7 + 1 + 0 + 0.2) / 4
        posteriors = [{A: 0.7, B: 1.0}, {A: 1.0}, {B: 1.0}, {A: 0.2, C: 1.0}]
        pred = [A, A, A, A]

        got = uncertain_accuracy(pred, Posteriors.from_dicts(posteriors, 20), n_draws=20_000, seed=1)

        assert exact_expected_accuracy(pred, posteriors) == pytest.approx(0.475)
        assert got.expected_accuracy == pytest.approx(0.475, abs=0.005)  # 4 standard errors of 20,000 draws
        assert got.thresholded.accuracy == pytest.approx(1 / 4)  # sets at 0.9: {B}, {A}, {B}, {C}
        assert got.n_uncertain == 2

    def test_matches_the_enumerated_mean_when_sets_can_be_empty(self) -> None:
        posteriors = [{A: 0.5}, {B: 1.0}, {A: 0.6, B: 0.3}, {C: 0.8, A: 0.1}]
        pred = [A, A, B, C]
        exact = exact_expected_accuracy(pred, posteriors)

        got = uncertain_accuracy(pred, Posteriors.from_dicts(posteriors, 20), n_draws=40_000, seed=2)

        assert got.expected_accuracy == pytest.approx(exact, abs=0.004)
        assert got.expected_scored == pytest.approx(0.5 + 1 + (1 - 0.4 * 0.7) + (1 - 0.2 * 0.9), abs=0.02)

    def test_an_image_whose_drawn_set_is_empty_is_left_out_of_that_draw(self) -> None:
        # a is right whenever its set is drawn non-empty, b always: every draw scores 100 %, on 1 or 2 images
        got = uncertain_accuracy([A, B], Posteriors.from_dicts([{A: 0.5}, {B: 1.0}], 20), n_draws=2000, seed=3)

        assert got.expected_accuracy == 1.0 and (got.label_ci_low, got.label_ci_high) == (1.0, 1.0)
        assert got.expected_scored == pytest.approx(1.5, abs=0.05)
        assert (got.thresholded.n_scored, got.thresholded.n_excluded) == (1, 1)  # a's set at 0.9 is empty

    def test_the_thresholded_score_can_take_the_sets_a_consensus_decided(self) -> None:
        # a's original class A was kept at 0.6 (the burden of proof lies on a change): the decided sets hold it
        post = Posteriors.from_dicts([{A: 0.6, B: 0.3}, {B: 0.95}], 20)
        decided = LabelSets.from_lists([[A], [B]], 20)

        plain = uncertain_accuracy([A, B], post, n_draws=500, seed=6)
        kept = uncertain_accuracy([A, B], post, n_draws=500, seed=6, decided=decided)

        assert (plain.thresholded.accuracy, plain.thresholded.n_excluded) == (1.0, 1)
        assert (kept.thresholded.accuracy, kept.thresholded.n_scored) == (1.0, 2)
        assert kept.expected_accuracy == plain.expected_accuracy and kept.ci_low == plain.ci_low

    def test_failed_replies_are_wrong_and_errors_never_scored(self) -> None:
        post = Posteriors.from_dicts([{A: 0.5, B: 1.0}, {A: 0.5, B: 1.0}, {A: 0.5, B: 1.0}], 20)
        ok, failed = [True, False, False], [False, True, False]  # b a failed reply, c an infrastructure error

        got = uncertain_accuracy([A, A, A], post, ok, failed=failed, n_draws=20_000, seed=4)

        assert got.expected_accuracy == pytest.approx(0.5 / 2, abs=0.005)
        assert got.expected_scored == 2.0 and got.n_uncertain == 2
        assert (got.thresholded.n_errors, got.thresholded.n_failed) == (1, 1)

    def test_nothing_over_the_threshold_still_has_an_expected_accuracy(self) -> None:
        got = uncertain_accuracy([A], Posteriors.from_dicts([{A: 0.6, B: 0.5}], 20), n_draws=20_000, seed=5)

        assert math.isnan(got.thresholded.accuracy) and got.thresholded.n_excluded == 1
        assert got.expected_accuracy == pytest.approx(exact_expected_accuracy([A], [{A: 0.6, B: 0.5}]), abs=0.01)


class TestIntervals:
    @staticmethod
    def score(p_right: float, seed: int = 0) -> UncertainScore:
        """2,000 images, 80 % predicted right; each image's true class has posterior `p_right` and a second,
        certain class keeps every image scored."""
        rng = np.random.default_rng(11)
        n = 2000
        truth = rng.integers(0, 100, n)
        pred = np.where(rng.random(n) < 0.8, truth, (truth + 2) % 100)
        rows = np.r_[np.arange(n), np.arange(n)]
        post = Posteriors(rows, np.r_[truth, (truth + 1) % 100], np.r_[np.full(n, p_right), np.ones(n)], n, 100)
        return uncertain_accuracy(pred, post, n_draws=500, seed=seed)

    def test_more_label_uncertainty_widens_both_intervals(self) -> None:
        widths = [(s.label_ci_high - s.label_ci_low, s.ci_high - s.ci_low) for s in map(self.score, (1.0, 0.9, 0.6))]

        assert widths[0][0] == 0.0 < widths[1][0] < widths[2][0]
        assert widths[0][1] < widths[1][1] < widths[2][1]

    def test_the_combined_interval_is_wider_than_either_part(self) -> None:
        s = self.score(0.6)
        certain = self.score(1.0)

        assert s.ci_high - s.ci_low > s.label_ci_high - s.label_ci_low
        assert s.ci_high - s.ci_low > certain.ci_high - certain.ci_low
        assert s.ci_low < s.expected_accuracy < s.ci_high

    def test_a_seed_gives_the_same_numbers_and_another_seed_others(self) -> None:
        assert self.score(0.7, seed=3) == self.score(0.7, seed=3)
        assert self.score(0.7, seed=3).ci_low != self.score(0.7, seed=4).ci_low


class TestInput:
    @pytest.mark.parametrize(
        ("build", "message"),
        [
            (lambda: Posteriors.from_dicts([{A: 1.5}]), r"image 0 class 3: posterior 1.5 is not in \[0, 1\]"),
            (lambda: Posteriors([0, 0], [A, A], [0.5, 0.5], 1), "image 0 lists class 3 twice"),
            (lambda: Posteriors([2], [A], [0.5], 2), "rows entry 0 is image 2, outside 0..1"),
            (lambda: Posteriors.from_dicts([{A: 1.0}]).label_sets(0), r"threshold must be in \(0, 1\], got 0"),
            (lambda: uncertain_accuracy([A], Posteriors.from_dicts([{A: 1.0}]), n_draws=0), "n_boot must be"),
            (lambda: uncertain_accuracy([A], {A: 1.0}), "posteriors must be Posteriors, got dict"),  # type: ignore[arg-type]
            (lambda: uncertain_accuracy([A, B], Posteriors.from_dicts([{A: 1.0}])), "predictions have 2 images"),
            (
                lambda: uncertain_accuracy(
                    [A], Posteriors.from_dicts([{A: 1.0}]), decided=LabelSets.from_lists([[A]], 20)
                ),
                "decided has 1 images of 20 classes, the posteriors 1 of 1000",
            ),
        ],
    )
    def test_bad_input_is_one_error_naming_it(self, build, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            build()

    def test_a_subset_keeps_the_pairs_of_its_images_in_its_order(self) -> None:
        post = Posteriors.from_dicts([{A: 0.5}, {B: 0.2, C: 1.0}, {}, {A: 0.9}], 20)

        sub = post.subset([3, 1])

        assert sub.n_images == 2 and sorted(zip(sub.rows.tolist(), sub.classes.tolist(), sub.probs.tolist())) == [
            (0, A, 0.9), (1, B, 0.2), (1, C, 1.0)
        ]  # fmt: skip
        with pytest.raises(EvaluationError, match="images lists an image twice"):
            post.subset([1, 1])

    def test_posteriors_are_read_only_copies(self) -> None:
        probs = np.array([0.5])
        post = Posteriors([0], [A], probs, 1)
        probs[0] = 1.0

        assert post.probs[0] == 0.5 and not post.probs.flags.writeable
