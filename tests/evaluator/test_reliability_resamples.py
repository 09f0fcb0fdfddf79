"""Resampled reliability parts: RR over joint resamples of a robustness run's images (clean and perturbed paired),
and the overall score of each resample with E held fixed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluator import EvaluationError
from evaluator.model_reliability import (
    ReliabilityParts,
    overall,
    overall_of_resamples,
    resampled_retention,
    retention_of_resamples,
    robustness_retention,
)
from evaluator.paired import percentile_interval


def outcomes(n: int, right: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """One model on n images: condition j right on the first right[j] · n images (nested, as a perturbation that
    only takes images away), every image scored; shapes (1, n_conditions, n)."""
    correct = np.stack([np.arange(n) < round(share * n) for share in right])[None]
    return correct, np.ones_like(correct)


def point_rr(correct: np.ndarray, scored: np.ndarray) -> float:
    acc = correct[0].sum(axis=1) / scored[0].sum(axis=1)
    return robustness_retention(acc[0], acc[1:])


class TestResampledRetention:
    def test_interval_holds_the_point_estimate_and_narrows_with_more_images(self) -> None:
        shares = [0.8, 0.6, 0.4, 0.7]  # clean, then three perturbed conditions: RR = mean(.75, .5, .875)
        widths = []
        for n in (50, 2000):
            correct, scored = outcomes(n, shares)
            low, high = percentile_interval(resampled_retention(correct, scored, n_boot=400, seed=1))
            assert point_rr(correct, scored) == pytest.approx(0.7083, abs=1e-4)
            assert low < point_rr(correct, scored) < high
            widths.append(high - low)
        assert widths[1] < widths[0] / 3  # about √40 ≈ 6 times narrower

    def test_clean_and_perturbed_are_resampled_with_the_same_images(self) -> None:
        # perturbed outcomes equal to the clean ones: paired resamples keep RR at exactly 1; had the conditions
        # been resampled apart, a perturbed resample would often fall below its clean one
        correct = np.stack([np.arange(40) % 3 == 0] * 3)[None]
        values = resampled_retention(correct, np.ones_like(correct), n_boot=300, seed=0)
        assert values.shape == (300, 1) and np.all(values == 1.0)

    def test_identical_outcomes_give_identical_resamples(self) -> None:
        a, scored = outcomes(60, [0.9, 0.5, 0.7])
        b, _ = outcomes(60, [0.9, 0.8, 0.8])
        values = resampled_retention(np.concatenate([a, a, b]), np.concatenate([scored] * 3), n_boot=200, seed=5)
        assert np.array_equal(values[:, 0], values[:, 1]) and not np.array_equal(values[:, 0], values[:, 2])
        # the same images in every resample for every model: b retains more than a in each one
        assert np.all(values[:, 2] >= values[:, 0])

    def test_deterministic_under_a_seed(self) -> None:
        correct, scored = outcomes(80, [0.7, 0.5, 0.3])
        first = resampled_retention(correct, scored, n_boot=100, seed=3)
        assert np.array_equal(first, resampled_retention(correct, scored, n_boot=100, seed=3))
        assert not np.array_equal(first, resampled_retention(correct, scored, n_boot=100, seed=4))

    def test_errors_are_left_out_not_counted_wrong(self) -> None:
        # image 3 is an error under the perturbation (not scored): 3/3 right there, not 3/4, so RR is 1
        correct = np.array([[[1, 1, 1, 1], [1, 1, 1, 0]]], bool)
        scored = np.array([[[1, 1, 1, 1], [1, 1, 1, 0]]], bool)
        values = resampled_retention(correct, scored, n_boot=200, seed=0)
        assert point_rr(correct, scored) == 1.0 and np.nanmin(values) == 1.0

    @pytest.mark.parametrize(
        ("correct", "scored", "message"),
        [
            (np.ones((1, 1, 4), bool), np.ones((1, 1, 4), bool), r"1 \+ n_conditions ≥ 2"),
            (np.ones((1, 2, 4), bool), np.zeros((1, 2, 4), bool), "correct marks an image that is not scored"),
            (np.ones((2, 4), bool), np.ones((2, 4), bool), r"got \(2, 4\)"),
        ],
    )
    def test_invalid(self, correct: np.ndarray, scored: np.ndarray, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            resampled_retention(correct, scored, n_boot=10)

    def test_row_by_row_with_nan(self) -> None:
        out = retention_of_resamples([0.8, 0.5, np.nan], [[0.4, 0.8], [0.5, 0.0], [0.5, 0.5]])
        assert out[:2] == pytest.approx([0.75, 0.5]) and math.isnan(out[2])
        with pytest.raises(EvaluationError, match=r"clean \(2,\) plus one axis of conditions"):
            retention_of_resamples([0.8, 0.5], [0.4, 0.8])


class TestOverallOfResamples:
    def test_matches_overall_in_every_resample_with_e_fixed(self) -> None:
        rng = np.random.default_rng(0)
        p, cdc, rr = (rng.uniform(0.2, 0.9, size=(50, 3)) for _ in range(3))
        e = np.array([0.3, 0.6, 0.9])  # one measurement per model, the same in every resample
        weights = {"capability": 2, "consistency": 1, "robustness": 1, "efficiency": 1}

        out = overall_of_resamples({"capability": p, "consistency": cdc, "robustness": rr, "efficiency": e}, weights)

        assert out.shape == (50, 3)
        assert out[7, 2] == pytest.approx(overall(ReliabilityParts(p[7, 2], cdc[7, 2], rr[7, 2], e[2]), weights))
        # E enters as a constant: taking it out leaves exactly the resampled parts
        assert out - e / 5 == pytest.approx((2 * p + cdc + rr) / 5)

    def test_a_part_of_weight_zero_may_be_missing(self) -> None:
        p = np.array([[0.5, 0.7], [0.6, 0.6]])
        weights = {"capability": 1, "consistency": 0, "robustness": 0, "efficiency": 0}
        assert overall_of_resamples({"capability": p, "consistency": None}, weights) == pytest.approx(p)
        with pytest.raises(EvaluationError, match="parts robustness have a non-zero weight and no values"):
            overall_of_resamples({"capability": p}, {**weights, "robustness": 1})

    def test_values_are_checked(self) -> None:
        weights = {"capability": 1, "consistency": 0, "robustness": 1, "efficiency": 0}
        with pytest.raises(EvaluationError, match=r"resampled robustness at \(0, 1\) is 1.5"):
            overall_of_resamples({"capability": [[0.5, 0.5]], "robustness": [[0.5, 1.5]]}, weights)
        with pytest.raises(EvaluationError, match="do not broadcast"):
            overall_of_resamples({"capability": [[0.5, 0.5]], "robustness": [[0.5, 0.5, 0.5]]}, weights)
