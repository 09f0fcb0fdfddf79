"""Images whose labels rest on one unverified source (a snapshot's base labels where nobody rated the image): left
out of the expected top-1 by default, or drawn at a noise rate; and that source's error rate on the rated images."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from evaluator import EvaluationError, LabelSets
from evaluator.label_uncertainty import Posteriors, base_error_rate, uncertain_accuracy
from tests.evaluator.test_label_uncertainty import exact_expected_accuracy

A, B, OTHER = 3, 7, 11


def mixed_case(n: int = 2000, seed: int = 3) -> tuple[np.ndarray, Posteriors, np.ndarray, np.ndarray, np.ndarray]:
    """Rated images with uncertain posteriors, unrated ones with a certain single label, failures and errors."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 40, n)
    pred = np.where(rng.random(n) < 0.75, truth, rng.integers(0, 40, n))
    unrated = rng.random(n) < 0.5
    p_truth = np.where(unrated, 1.0, rng.beta(4, 1, n))
    p_other = np.where(unrated, 0.0, rng.beta(1, 4, n))
    rows = np.r_[np.arange(n), np.arange(n)]
    post = Posteriors(rows, np.r_[truth, (truth + 1) % 40], np.r_[p_truth, p_other], n, 40)
    ok = rng.random(n) > 0.04
    failed = ~ok & (rng.random(n) < 0.5)
    return pred, post, ok, failed, unrated


def numbers(score: object) -> dict:
    out = asdict(score)  # type: ignore[call-overload]
    out.pop("n_unrated"), out.pop("unrated_noise")
    return out


class TestNoiseRateZero:
    def test_reduces_to_the_result_without_unrated_images_number_for_number(self) -> None:
        pred, post, ok, failed, unrated = mixed_case()
        old = uncertain_accuracy(pred, post, ok, failed=failed, n_draws=300, seed=4)
        new = uncertain_accuracy(pred, post, ok, failed=failed, n_draws=300, seed=4, unrated=unrated, unrated_noise=0.0)
        assert numbers(new) == numbers(old)
        assert new.n_unrated == int((unrated & (ok | failed)).sum()) > 0 and new.unrated_noise == 0.0
        assert old.n_unrated == 0 and old.unrated_noise is None


class TestDrawnAtANoiseRate:
    # Image 0 rated (A at 0.5), images 1, 2 unrated with certain labels A and B; the run predicts A everywhere.
    PRED = [A, A, A]
    POSTERIORS = [{A: 0.5, B: 1.0}, {A: 1.0}, {B: 1.0}]
    UNRATED = np.array([False, True, True])

    def test_the_expected_top1_is_the_enumerated_one_and_the_interval_widens(self) -> None:
        post = Posteriors.from_dicts(self.POSTERIORS, 20)
        certain = uncertain_accuracy(self.PRED, post, n_draws=4000, seed=1, unrated=self.UNRATED, unrated_noise=0.0)
        noisy = uncertain_accuracy(self.PRED, post, n_draws=4000, seed=1, unrated=self.UNRATED, unrated_noise=0.3)
        # Drawn at 0.3: an unrated label is present with 0.7, and the image always holds some class (OTHER at 1).
        drawn = [{A: 0.5, B: 1.0}, {A: 0.7, OTHER: 1.0}, {B: 0.7, OTHER: 1.0}]
        assert certain.expected_accuracy == pytest.approx(exact_expected_accuracy(self.PRED, self.POSTERIORS), abs=0.02)
        assert noisy.expected_accuracy == pytest.approx(exact_expected_accuracy(self.PRED, drawn), abs=0.02)
        assert noisy.expected_accuracy == pytest.approx((0.5 + 0.7 + 0) / 3, abs=0.02)  # all three always scored
        assert noisy.label_ci_high - noisy.label_ci_low > certain.label_ci_high - certain.label_ci_low
        assert noisy.expected_scored == 3 and noisy.n_unrated == 2

    def test_on_many_images_both_intervals_widen_and_the_score_falls(self) -> None:
        pred, post, ok, failed, unrated = mixed_case()
        certain = uncertain_accuracy(
            pred, post, ok, failed=failed, n_draws=400, seed=2, unrated=unrated, unrated_noise=0.0
        )
        noisy = uncertain_accuracy(
            pred, post, ok, failed=failed, n_draws=400, seed=2, unrated=unrated, unrated_noise=0.2
        )
        assert noisy.label_ci_high - noisy.label_ci_low > certain.label_ci_high - certain.label_ci_low
        assert noisy.ci_high - noisy.ci_low > certain.ci_high - certain.ci_low
        assert noisy.expected_accuracy < certain.expected_accuracy  # a prediction outside the labels stays wrong

    def test_an_unrated_image_without_a_label_stays_unscored(self) -> None:
        post = Posteriors.from_dicts([{A: 1.0}, {}], 20)
        score = uncertain_accuracy([A, A], post, n_draws=50, unrated=np.array([False, True]), unrated_noise=0.5)
        assert score.expected_accuracy == 1.0 and score.expected_scored == 1


class TestLeftOut:
    def test_every_number_is_the_one_on_the_other_images_and_the_resamples_hold_them_all(self) -> None:
        pred, post, ok, failed, unrated = mixed_case()
        keep = np.flatnonzero(~unrated)
        alone = uncertain_accuracy(pred[keep], post.subset(keep), ok[keep], failed=failed[keep], n_draws=200, seed=2)
        left_out = uncertain_accuracy(pred, post, ok, failed=failed, n_draws=200, seed=2, unrated=unrated)
        # scored in no draw, as an infrastructure error is, but among the images resampled: the resamples of all
        # the reference's images, which every other statistic over them reads
        never = uncertain_accuracy(pred, post, ok & ~unrated, failed=failed & ~unrated, n_draws=200, seed=2)
        interval = ("ci_low", "ci_high")
        assert {k: v for k, v in numbers(left_out).items() if k not in interval} == {
            k: v for k, v in numbers(alone).items() if k not in interval
        }
        assert [getattr(left_out, k) for k in interval] == [getattr(never, k) for k in interval]
        assert [getattr(left_out, k) for k in interval] != [getattr(alone, k) for k in interval]
        assert left_out.expected_accuracy == never.expected_accuracy
        assert left_out.thresholded.n_errors == alone.thresholded.n_errors  # left out is not an error
        assert left_out.n_unrated == int((unrated & (ok | failed)).sum()) and left_out.unrated_noise is None

    def test_leaving_unrated_certain_images_out_widens_the_labels_only_interval(self) -> None:
        pred, post, ok, failed, unrated = mixed_case()
        kept = uncertain_accuracy(pred, post, ok, failed=failed, n_draws=400, seed=2)
        left_out = uncertain_accuracy(pred, post, ok, failed=failed, n_draws=400, seed=2, unrated=unrated)
        assert left_out.label_ci_high - left_out.label_ci_low > kept.label_ci_high - kept.label_ci_low


class TestBaseErrorRate:
    def test_is_the_mean_chance_that_no_base_class_is_present_on_rated_images(self) -> None:
        post = Posteriors.from_dicts([{A: 0.8, B: 0.3}, {A: 0.4}, {A: 0.5, B: 0.5}, {B: 0.9}, {A: 1.0}], 20)
        base = LabelSets.from_lists([[A], [A], [A, B], [A], [A]], 20)
        rated = np.array([True, True, True, True, False])
        # 1 − 0.8, 1 − 0.4, (1 − 0.5)(1 − 0.5), A not listed on image 3: absent for sure; image 4 not rated
        assert base_error_rate(post, base, rated) == pytest.approx((0.2 + 0.6 + 0.25 + 1.0) / 4)

    def test_no_rated_image_with_a_base_label_gives_nan(self) -> None:
        post = Posteriors.from_dicts([{A: 0.8}, {A: 1.0}], 20)
        base = LabelSets.from_lists([[], [A]], 20)
        assert np.isnan(base_error_rate(post, base, np.array([True, False])))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"unrated": np.array([True])}, "unrated must be a (2,) bool array"),
        ({"unrated": np.array([1, 0])}, "unrated must be a (2,) bool array, got int"),
        ({"unrated": np.array([True, False]), "unrated_noise": 1.5}, "unrated_noise must be a rate in [0, 1]"),
        ({"unrated_noise": -0.1}, "got -0.1"),
    ],
)
def test_bad_unrated_input_is_one_error_naming_it(kwargs: dict, message: str) -> None:
    post = Posteriors.from_dicts([{A: 0.8}, {A: 1.0}], 20)
    with pytest.raises(EvaluationError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        uncertain_accuracy([A, A], post, n_draws=10, **kwargs)
