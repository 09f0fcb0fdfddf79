"""Calibration of vote posteriors (relabel.votes.calibration): isotonic fit, ECE, and fitting apart from evaluation."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from relabel.common.errors import InputError
from relabel.votes.calibration import (
    IDENTITY,
    MIN_PAIRS,
    cross_fit,
    expected_calibration_error,
    fit_calibration,
    image_folds,
    isotonic,
    reliability,
)


def over_confident(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(posterior, truth, image) of n pairs whose true rate is posterior squared: over-confident in the middle."""
    rng = np.random.default_rng(seed)
    posterior = np.round(rng.uniform(0, 1, n), 3)
    truth = rng.uniform(0, 1, n) < posterior**2
    return posterior, truth, np.arange(n) // 3


class TestIsotonic:
    def test_matches_scikit_learn(self) -> None:
        posterior, truth, _ = over_confident(3000)
        ours = isotonic(posterior, truth)(posterior)
        theirs = IsotonicRegression(out_of_bounds="clip").fit(posterior, truth).predict(posterior)
        np.testing.assert_allclose(ours, theirs, atol=1e-9)

    def test_pools_violators_into_their_mean(self) -> None:
        curve = isotonic(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.0, 1.0, 0.0, 1.0]))
        assert curve.y.tolist() == [0.0, 0.5, 0.5, 1.0] and curve.x.tolist() == [0.1, 0.2, 0.3, 0.4]
        assert curve(np.array([0.15, 0.25, 0.5])).tolist() == pytest.approx([0.25, 0.5, 1.0])

    def test_no_pairs_is_the_identity(self) -> None:
        assert isotonic(np.zeros(0), np.zeros(0)) is IDENTITY
        assert IDENTITY(np.array([0.3, 0.9])).tolist() == [0.3, 0.9]


class TestCalibration:
    def test_learns_the_true_rate_of_over_confident_posteriors(self) -> None:
        posterior, truth, _ = over_confident(20000)
        cal = fit_calibration(posterior, truth)
        assert cal.apply(np.array([0.5]))[0] == pytest.approx(0.25, abs=0.05)
        assert (
            expected_calibration_error(posterior, truth)
            > 0.1
            > 0.03
            > expected_calibration_error(cal.apply(posterior), truth)
        )

    def test_original_classes_get_their_own_curve(self) -> None:
        posterior = np.tile(np.linspace(0.01, 0.99, 50), 2)
        original = np.repeat([False, True], 50)
        truth = original.copy()  # an original class is always right, another never
        cal = fit_calibration(posterior, truth, original)
        calibrated = cal.apply(posterior, original)
        assert calibrated[original].min() == 1.0 and calibrated[~original].max() == 0.0
        assert cal.pairs == (50, 50)
        pooled = fit_calibration(posterior, truth, original, by_original=False).apply(posterior, original)
        assert pooled[original].min() < 1.0

    def test_a_group_with_too_few_pairs_keeps_its_posteriors(self) -> None:
        posterior = np.linspace(0, 1, MIN_PAIRS + 3)
        original = np.zeros(len(posterior), bool)
        original[:3] = True
        cal = fit_calibration(posterior, np.zeros(len(posterior), bool), original)
        assert cal.curves[1] is IDENTITY and cal.apply(np.array([0.7]), np.array([True]))[0] == 0.7

    def test_refuses_mismatched_or_out_of_range_input(self) -> None:
        with pytest.raises(InputError, match="differ in length"):
            fit_calibration(np.array([0.1, 0.2]), np.array([True]))
        with pytest.raises(InputError, match=r"\[0, 1\], got"):
            fit_calibration(np.array([0.1, 1.2]), np.array([True, False]))


class TestCrossFit:
    def test_folds_keep_an_image_whole_and_are_reproducible(self) -> None:
        image = np.repeat(np.arange(100), 3)
        fold = image_folds(image, 2, seed=7)
        assert (fold.reshape(100, 3) == fold.reshape(100, 3)[:, :1]).all()
        assert (fold == image_folds(image, 2, seed=7)).all() and 40 < (fold[::3] == 0).sum() < 60
        with pytest.raises(InputError, match="at least 2"):
            image_folds(image, 1)

    def test_poisoning_the_evaluation_half_leaves_its_calibration_unchanged(self) -> None:
        posterior, truth, image = over_confident(6000, seed=1)
        original = np.arange(len(posterior)) % 5 == 0
        fold = image_folds(image, 2, seed=0)
        clean, fitted = cross_fit(posterior, truth, original, fold)
        poisoned = truth.copy()
        poisoned[fold == 0] = ~truth[fold == 0]  # every reference answer of half 0 flipped
        dirty, refitted = cross_fit(posterior, poisoned, original, fold)
        np.testing.assert_array_equal(dirty[fold == 0], clean[fold == 0])  # half 0 is calibrated by half 1 alone
        assert [c.x.tolist() for c in refitted[0].curves] == [c.x.tolist() for c in fitted[0].curves]
        assert not np.allclose(dirty[fold == 1], clean[fold == 1])  # and half 1 by half 0: the poison shows there


class TestCalibrationError:
    def test_ece_on_a_hand_computed_case(self) -> None:
        posterior = np.array([0.12, 0.18, 0.64, 0.76, 0.99, 0.01])
        truth = np.array([False, True, True, True, False, True])
        # within [0.05, 0.95]: bin [0.1, 0.2) mean 0.15, half true: 0.35 for 2 pairs; 0.64 true: 0.36; 0.76: 0.24
        assert expected_calibration_error(posterior, truth) == pytest.approx((2 * 0.35 + 0.36 + 0.24) / 4)
        # all six: the two outside add |0.99 - 0| and |0.01 - 1|
        assert expected_calibration_error(posterior, truth, within=(0, 1)) == pytest.approx((1.3 + 0.99 + 0.99) / 6)

    def test_reliability_bins(self) -> None:
        bins = reliability(np.array([0.12, 0.18, 0.64, 1.0]), np.array([False, True, True, True]))
        assert [(b.low, b.n, b.share_true) for b in bins] == [(0.1, 2, 0.5), (0.6, 1, 1.0), (0.9, 1, 1.0)]
        assert bins[0].mean_posterior == pytest.approx(0.15)

    def test_no_pair_in_range_is_nan(self) -> None:
        assert np.isnan(expected_calibration_error(np.array([0.0, 1.0]), np.array([False, True])))
