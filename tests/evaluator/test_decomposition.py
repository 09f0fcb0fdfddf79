"""The paired difference between two references split into leniency, a-wrong and dropped: parts known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator import EvaluationError, LabelSets
from evaluator.decomposition import decompose_difference
from evaluator.paired import paired_difference
from evaluator.scoring import image_outcomes

# seven images; the last is scored under one reference only (not common)
#            both   dropped leniency a_wrong neither leniency (a_wrong, not common)
CORRECT_A = [True, True, False, False, False, False, False]
CORRECT_B = [True, False, True, True, False, True, True]
ORIGINAL_IN_B = [True, False, True, False, False, True, False]
COMMON = [True, True, True, True, True, True, False]


class TestDecomposeDifference:
    def test_hand_built_parts_and_their_sum(self) -> None:
        parts = decompose_difference(CORRECT_A, CORRECT_B, ORIGINAL_IN_B, COMMON, n_boot=0)

        assert (parts.n_common, parts.n_leniency, parts.n_a_wrong, parts.n_dropped) == (6, 2, 1, 1)
        assert (parts.leniency, parts.a_wrong, parts.dropped) == (2 / 6, 1 / 6, -1 / 6)
        assert parts.difference == pytest.approx(2 / 6)  # b right on 4 of 6, a on 2 of 6
        assert parts.leniency_ci is None

    def test_the_parts_sum_to_the_paired_difference_exactly(self) -> None:
        rng = np.random.default_rng(3)
        n, classes = 5_000, 20
        original = rng.integers(0, classes, n)
        pred = np.where(rng.random(n) < 0.6, original, rng.integers(0, classes, n))
        extra = rng.integers(0, classes, n)
        sets = np.stack([np.where(rng.random(n) < 0.85, original, extra), np.where(rng.random(n) < 0.3, pred, -1)], 1)
        sets[:, 1] = np.where(sets[:, 1] == sets[:, 0], -1, sets[:, 1])
        ref_b = LabelSets(sets, classes)
        right_a, _ = image_outcomes(pred[:, None], LabelSets.from_single(original, classes), 1)
        right_b, _ = image_outcomes(pred[:, None], ref_b, 1)
        original_in_b = (sets == original[:, None]).any(axis=1)

        parts = decompose_difference(right_a, right_b, original_in_b, n_boot=200)
        total = paired_difference(right_a, right_b, n_boot=0)

        assert parts.n_leniency + parts.n_a_wrong - parts.n_dropped == total.n_only_b - total.n_only_a
        assert parts.difference == total.difference
        # the parts as the review words them, computed from predictions and sets directly
        in_b = (sets == pred[:, None]).any(axis=1)
        assert parts.n_leniency == int((in_b & original_in_b & (pred != original)).sum())
        assert parts.n_a_wrong == int((in_b & ~original_in_b).sum())
        assert parts.n_dropped == int(((pred == original) & ~original_in_b).sum())

    def test_intervals_hold_each_part_with_its_sign(self) -> None:
        rng = np.random.default_rng(0)
        a, b, kept = rng.random((3, 2_000)) < [[0.7], [0.75], [0.9]]
        parts = decompose_difference(a, b, kept, n_boot=500, seed=1)

        for share, ci in ((parts.leniency, parts.leniency_ci), (parts.a_wrong, parts.a_wrong_ci),
                          (parts.dropped, parts.dropped_ci)):  # fmt: skip
            assert ci is not None and ci[0] <= share <= ci[1] and ci[0] < ci[1]
        assert parts.dropped_ci is not None and parts.dropped_ci[1] <= 0 < parts.leniency_ci[0]  # type: ignore[index]
        again = decompose_difference(a, b, kept, n_boot=500, seed=1)
        assert again == parts  # seeded

    def test_an_empty_part_gets_a_real_interval(self) -> None:
        parts = decompose_difference([True, False] * 50, [True, True] * 50, [True] * 100, n_boot=100)
        assert parts.n_a_wrong == parts.n_dropped == 0 and parts.n_leniency == 50
        assert parts.a_wrong_ci is not None and parts.a_wrong_ci[0] < 0 < parts.a_wrong_ci[1]

    def test_bad_input_names_the_array(self) -> None:
        with pytest.raises(EvaluationError, match="original_in_b has shape"):
            decompose_difference([True, False], [True, True], [True], n_boot=0)
        with pytest.raises(EvaluationError, match="n_boot"):
            decompose_difference([True], [True], [True], n_boot=-1)


class TestGoldenImageNetVal:
    def test_real_minus_imgt_taken_apart(self) -> None:
        """cleanlab's CV predictions, ReaL against the original labels on the 46,837 images ReaL labels: +2.50
        points = +2.76 leniency + 3.07 ImGT wrong - 3.34 dropped (the counts computed by hand from the files)."""
        from tests.evaluator.test_scoring import val_in_real_order

        pred, original, real = val_in_real_order()
        common = real.counts > 0
        right_imgt = pred == original
        right_real = (real.labels == pred[:, None]).any(axis=1)
        original_in_real = (real.labels == original[:, None]).any(axis=1)

        parts = decompose_difference(right_imgt, right_real, original_in_real, common, n_boot=200)

        assert (parts.n_common, parts.n_leniency, parts.n_a_wrong, parts.n_dropped) == (46_837, 1_295, 1_438, 1_564)
        assert [round(100 * v, 2) for v in (parts.leniency, parts.a_wrong, parts.dropped)] == [2.76, 3.07, -3.34]
        assert round(100 * parts.difference, 2) == 2.50
        assert parts.n_leniency + parts.n_a_wrong - parts.n_dropped == int(right_real[common].sum()) - int(
            right_imgt[common].sum()
        )
