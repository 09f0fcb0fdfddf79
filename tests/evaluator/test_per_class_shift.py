"""Per-class top-1 under two references on the same images: a tiny case counted by hand, and its intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluator import EvaluationError
from evaluator.per_class import per_class_shift


class TestPerClassShift:
    def test_tiny_case_by_hand(self) -> None:
        # class 0: 4 images, a right on 2, b on 4 (+50 points); class 1: 2 images, a right on 2, b on 0 (-100);
        # class 2: one image outside the common set; class 3: no image
        classes = [0, 0, 0, 0, 1, 1, 2, -1]
        correct_a = [1, 1, 0, 0, 1, 1, 0, 1]
        correct_b = [1, 1, 1, 1, 0, 0, 1, 0]
        common = [1, 1, 1, 1, 1, 1, 0, 1]

        shift = per_class_shift(correct_a, correct_b, classes, common, n_classes=4, n_boot=0)

        assert shift.n_images.tolist() == [4, 2, 0, 0]
        assert shift.n_only_b.tolist() == [2, 0, 0, 0] and shift.n_only_a.tolist() == [0, 2, 0, 0]
        assert shift.accuracy_a[:2].tolist() == [0.5, 1.0] and shift.accuracy_b[:2].tolist() == [1.0, 0.0]
        assert shift.difference[:2].tolist() == [0.5, -1.0] and np.isnan(shift.difference[2:]).all()
        assert np.isnan(shift.ci_low).all()

    def test_intervals_hold_each_class_and_are_seeded(self) -> None:
        rng = np.random.default_rng(0)
        classes = np.repeat(np.arange(50), 40)
        a = rng.random(2_000) < 0.7
        b = np.where(classes < 25, rng.random(2_000) < 0.95, a)  # half the classes gain, half never change

        shift = per_class_shift(a, b, classes, n_classes=50, n_boot=300, seed=2)

        assert np.all(shift.ci_low <= shift.difference) and np.all(shift.difference <= shift.ci_high)
        assert np.all(shift.ci_low < shift.ci_high)  # an unchanged class gets ± the Wilson bound, not 0-0
        assert np.all(shift.difference[25:] == 0) and shift.ci_high[30] == pytest.approx(-shift.ci_low[30])
        again = per_class_shift(a, b, classes, n_classes=50, n_boot=300, seed=2)
        assert np.array_equal(again.ci_low, shift.ci_low)

    def test_a_class_outside_the_vocabulary_is_named(self) -> None:
        with pytest.raises(EvaluationError, match="reference labels"):
            per_class_shift([True], [True], [7], n_classes=3, n_boot=0)
        assert math.isnan(per_class_shift([True], [True], [0], n_classes=2, n_boot=10).ci_low[1])

    def test_intervals_for_some_classes_only(self) -> None:
        classes = np.repeat(np.arange(4), 10)
        a, b = np.arange(40) % 2 == 0, np.arange(40) % 3 == 0
        shift = per_class_shift(a, b, classes, n_classes=4, n_boot=50, intervals_for=[2])
        assert np.isnan(shift.ci_low[[0, 1, 3]]).all() and shift.ci_low[2] < shift.ci_high[2]
        with pytest.raises(EvaluationError, match="intervals_for"):
            per_class_shift(a, b, classes, n_classes=4, n_boot=50, intervals_for=[4])
