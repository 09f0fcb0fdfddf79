"""Scoring: golden numbers on the real ImageNet val labels, hand-computed cases, and clear errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from evaluator import EvaluationError, LabelSets
from evaluator.ranking import ranking_shift
from evaluator.scoring import (
    accuracy_by_category,
    class_mean_accuracy,
    image_outcomes,
    mean_per_class_accuracy,
    multilabel_accuracy,
    oop_rate,
    score_many,
    topk_accuracy,
)
from tests.conftest import shared

# Four images; image 2's call failed, image 3 has no reference label.
PRED = np.array([[1, 2], [3, 4], [5, 6], [7, -1]])
OK = np.array([True, True, False, True])
SINGLE = np.array([2, 3, 9, -1])
SETS = LabelSets([[1, 9], [4, -1], [5, -1], [-1, -1]], n_classes=10)


def val_in_real_order() -> tuple[np.ndarray, np.ndarray, LabelSets]:
    """cleanlab's CV predictions and the original labels, reordered from `index_to_filepath.json` to val order."""
    folder = shared("imagenet-val")
    paths = json.loads((folder / "index_to_filepath.json").read_text())
    val_number = np.array([int(p.rsplit("_", 1)[1].split(".")[0]) for p in paths])  # ..._val_00000293.JPEG -> 293
    order = np.argsort(val_number)
    assert (val_number[order] == np.arange(1, 50_001)).all()
    pred = np.load(folder / "cleanlab_cv_predicted_labels_by_index.npy")[order]
    original = np.load(folder / "original_labels_by_index.npy")[order]
    real = LabelSets.from_lists(json.loads((folder / "real.json").read_text()))
    return pred, original, real


class TestGoldenImageNetVal:
    def test_cleanlab_cv_predictions_against_original_labels_and_real(self) -> None:
        pred, original, real = val_in_real_order()

        imgt = topk_accuracy(pred, original)
        real_rule = multilabel_accuracy(pred, real)

        assert (round(100 * imgt.accuracy, 3), imgt.n_scored, imgt.n_excluded) == (72.732, 50_000, 0)
        assert (round(100 * real_rule.accuracy, 3), real_rule.n_scored) == (77.614, 46_837)
        assert real_rule.n_excluded == 3_163 and real_rule.n_errors == 0
        assert real_rule.ci_low < real_rule.accuracy < real_rule.ci_high
        assert real_rule.ci_high - real_rule.ci_low == pytest.approx(2 * 1.96 * math.sqrt(0.776 * 0.224 / 46_837), 0.01)

    def test_batched_path_gives_the_same_numbers(self) -> None:
        pred, original, real = val_in_real_order()
        preds = np.stack([pred, original])[:, :, None]  # model 1 "predicts" the original labels

        by_k = score_many(preds, real, ks=(1,))[1]
        imgt = score_many(preds, original, ks=(1,))[1]

        assert by_k.n_correct[0] == 36_352 and by_k.n_scored.tolist() == [46_837, 46_837]
        assert imgt.accuracy.tolist() == [0.72732, 1.0]


class TestTopkAccuracy:
    def test_hand_computed_top1_and_top2(self) -> None:
        top1 = topk_accuracy(PRED, SINGLE, k=1, ok=OK, n_classes=10, interval=None)
        top2 = topk_accuracy(PRED, SINGLE, k=2, ok=OK, n_classes=10, interval=None)

        assert top1.accuracy == 0.5
        assert (top1.n_scored, top1.n_correct, top1.n_errors, top1.n_excluded) == (2, 1, 1, 1)
        assert (top2.accuracy, top2.n_correct) == (1.0, 2)
        assert top1.ci_low is None and top1.ci_high is None

    def test_an_error_is_never_scored_as_wrong(self) -> None:
        wrong = topk_accuracy([[0], [0]], [1, 2], ok=[True, False], n_classes=3, interval=None)
        assert (wrong.accuracy, wrong.n_scored, wrong.n_errors) == (0.0, 1, 1)

    def test_one_dimensional_predictions_are_top1(self) -> None:
        assert topk_accuracy(np.array([2, 3, 0, 0]), SINGLE, n_classes=10, interval=None).n_correct == 2

    def test_all_calls_failed_gives_nan_not_zero(self) -> None:
        score = topk_accuracy(PRED, SINGLE, ok=np.zeros(4, bool), n_classes=10, interval=None)
        assert math.isnan(score.accuracy) and score.n_errors == 4 and score.n_scored == 0

    def test_minus_one_padding_never_matches(self) -> None:
        score = topk_accuracy([[-1, 3]], [3], k=1, n_classes=5, interval=None)
        assert score.n_correct == 0

    def test_unsigned_predictions_are_accepted(self) -> None:
        assert topk_accuracy(np.array([2, 3], np.uint16), [2, 4], n_classes=10, interval=None).n_correct == 1

    def test_known_flips_are_exactly_the_errors(self) -> None:
        rng = np.random.default_rng(7)
        labels = rng.integers(0, 1000, 5_000)
        flipped = rng.random(5_000) < 0.13
        pred = np.where(flipped, (labels + rng.integers(1, 1000, 5_000)) % 1000, labels)

        score = topk_accuracy(pred, labels, interval=None)

        assert score.n_correct == 5_000 - flipped.sum()


class TestMultilabelAccuracy:
    def test_real_rule_hand_computed(self) -> None:
        # image 0: top-1 1 is in {1, 9}; image 1: top-1 3 not in {4}, top-2 4 is; image 2 failed; image 3 excluded.
        top1 = multilabel_accuracy(PRED, SETS, k=1, ok=OK, interval=None)
        top2 = multilabel_accuracy(PRED, SETS, k=2, ok=OK, interval=None)

        assert (top1.accuracy, top1.n_scored, top1.n_errors, top1.n_excluded) == (0.5, 2, 1, 1)
        assert top2.accuracy == 1.0

    def test_second_label_of_a_set_counts(self) -> None:
        sets = LabelSets.from_lists([[1, 2, 3], [4]], n_classes=5)
        assert multilabel_accuracy([[3], [3]], sets, interval=None).n_correct == 1

    def test_single_labels_are_refused_with_a_pointer(self) -> None:
        with pytest.raises(EvaluationError, match="use topk_accuracy"):
            multilabel_accuracy(PRED, SINGLE)

    def test_wilson_interval_by_default_clopper_pearson_on_request(self) -> None:
        sets = LabelSets.from_single(np.arange(10) % 3, 3)
        pred = np.where(np.arange(10) < 7, np.arange(10) % 3, (np.arange(10) + 1) % 3)  # 7 of 10 right

        wilson = multilabel_accuracy(pred, sets)
        exact = multilabel_accuracy(pred, sets, interval="clopper-pearson")

        assert (wilson.ci_low, wilson.ci_high) == pytest.approx((0.3968, 0.8922), abs=1e-4)  # Wilson 1927, z = 1.96
        assert (exact.ci_low, exact.ci_high) == pytest.approx((0.3475, 0.9333), abs=1e-4)
        with pytest.raises(EvaluationError, match="unknown interval method 'bootstrap'; known: clopper-pearson"):
            multilabel_accuracy(pred, sets, interval="bootstrap")


class TestFailures:
    # Image 2's call failed: as a failed reply it counts as wrong, as an infrastructure error it is left out.
    def test_a_failed_reply_counts_as_wrong(self) -> None:
        failed = ~OK
        score = multilabel_accuracy(PRED, SETS, k=1, ok=OK, failed=failed, interval=None)

        assert (score.n_scored, score.n_correct, score.n_failed, score.n_errors) == (3, 1, 1, 0)
        assert score.accuracy == pytest.approx(1 / 3) and score.accuracy_excluding_failures == 0.5

    def test_an_infrastructure_error_is_left_out(self) -> None:
        score = multilabel_accuracy(PRED, SETS, k=1, ok=OK, interval=None)
        assert (score.n_scored, score.n_failed, score.n_errors, score.accuracy) == (2, 0, 1, 0.5)

    def test_a_failed_reply_on_an_excluded_image_stays_excluded(self) -> None:
        ok, failed = np.array([True, True, True, False]), np.array([False, False, False, True])
        score = multilabel_accuracy(PRED, SETS, ok=ok, failed=failed, interval=None)
        assert (score.n_scored, score.n_failed, score.n_excluded, score.n_errors) == (3, 0, 1, 0)

    def test_batch_and_categories_count_failures_too(self) -> None:
        failed = np.stack([~OK, np.zeros(4, bool)])
        batch = score_many(np.stack([PRED, PRED]), SETS, ks=(1,), ok=OK, failed=failed)[1]
        cats = accuracy_by_category(PRED, SETS, ["A", "A", "A", "Z"], ok=OK, failed=~OK)

        assert batch.n_scored.tolist() == [3, 2] and batch.n_failed.tolist() == [1, 0]
        assert batch.accuracy_excluding_failures.tolist() == [0.5, 0.5]
        assert (cats["A"].n_scored, cats["A"].n_failed, cats["A"].accuracy) == (3, 1, pytest.approx(1 / 3))

    def test_image_outcomes(self) -> None:
        correct, scored = image_outcomes(PRED, SETS, 1, OK, failed=~OK)
        assert correct.tolist() == [True, False, False, False] and scored.tolist() == [True, True, True, False]

    def test_failed_may_not_mark_an_answered_image(self) -> None:
        with pytest.raises(EvaluationError, match="failed marks image 0, which is ok"):
            multilabel_accuracy(PRED, SETS, ok=OK, failed=[True, False, True, False])


class TestMeanPerClassAccuracy:
    def test_single_labels(self) -> None:
        # class 0: images 0, 1 (1 correct) -> 0.5; class 1: image 2 (correct) -> 1.0; mean 0.75 (plain: 2/3)
        score = mean_per_class_accuracy([0, 2, 1], [0, 0, 1], n_classes=3, n_boot=0)

        assert score.accuracy == 0.75
        assert score.per_class[:2].tolist() == [0.5, 1.0] and math.isnan(score.per_class[2])
        assert score.images_per_class.tolist() == [2, 1, 0]

    def test_a_multi_label_image_counts_toward_each_of_its_classes(self) -> None:
        # image 0 {0, 1} correct; image 1 {1} wrong -> class 0: 1/1, class 1: 1/2 -> mean 0.75
        sets = LabelSets.from_lists([[0, 1], [1]], n_classes=3)
        score = mean_per_class_accuracy([[1], [2]], sets, n_boot=0)
        assert (score.accuracy, score.images_per_class.tolist()) == (0.75, [1, 2, 0])

    def test_errors_and_excluded_images_are_left_out(self) -> None:
        # scored: image 0 {1, 9} correct, image 1 {4} wrong -> classes 1, 9: 1.0, class 4: 0.0 -> mean 2/3
        score = mean_per_class_accuracy(PRED, SETS, ok=OK, n_boot=0)
        assert (score.accuracy, score.n_scored, score.n_errors, score.n_excluded) == (2 / 3, 2, 1, 1)
        assert score.images_per_class.tolist() == [0, 1, 0, 0, 1, 0, 0, 0, 0, 1]

    def test_ci_brackets_the_mean(self) -> None:
        rng = np.random.default_rng(0)
        ref = rng.integers(0, 20, 600)
        pred = np.where(rng.random(600) < 0.6, ref, (ref + 1) % 20)
        score = mean_per_class_accuracy(pred, ref, n_classes=20, n_boot=300, seed=3)
        assert score.ci_low < score.accuracy < score.ci_high < 1

    def test_class_mean_groups_by_the_class_given(self) -> None:
        # classes 0: images 0, 1 (1 right), 1: image 2 (right); image 3 unscored, image 4 has no class
        score = class_mean_accuracy([True, False, True, True, True], [0, 0, 1, 1, -1], [1, 1, 1, 0, 1], n_classes=3,
                                    n_boot=0)  # fmt: skip
        assert (score.accuracy, score.n_scored, score.n_errors, score.n_excluded) == (0.75, 3, 1, 1)
        assert score.n_classes_scored == 2

    def test_n_classes_must_agree_with_the_label_sets(self) -> None:
        with pytest.raises(EvaluationError, match="n_classes=5 but the label sets have n_classes=10"):
            mean_per_class_accuracy(PRED, SETS, n_classes=5)


class TestAccuracyByCategory:
    def test_hand_computed(self) -> None:
        cats = np.array(["A", "M", "A", "Z"])
        out = accuracy_by_category(PRED, SETS, cats, ok=OK, interval=None)

        assert list(out) == ["A", "M", "Z"]
        assert (out["A"].accuracy, out["A"].n_scored, out["A"].n_errors) == (1.0, 1, 1)
        assert (out["M"].accuracy, out["M"].n_correct) == (0.0, 0)
        assert math.isnan(out["Z"].accuracy) and out["Z"].n_excluded == 1

    def test_ci_per_category(self) -> None:
        out = accuracy_by_category(PRED, SETS, ["A", "A", "A", "A"], k=2)
        assert out["A"].ci_low is not None and out["A"].ci_low <= out["A"].accuracy <= out["A"].ci_high

    def test_length_mismatch(self) -> None:
        with pytest.raises(EvaluationError, match=r"categories has shape \(3,\), expected \(4,\)"):
            accuracy_by_category(PRED, SETS, ["A", "B", "M"])


class TestScoreMany:
    def test_matches_one_model_at_a_time(self) -> None:
        rng = np.random.default_rng(11)
        sets = LabelSets.from_lists([list(rng.choice(8, rng.integers(0, 3), replace=False)) for _ in range(300)], 8)
        preds = rng.integers(-1, 8, (4, 300, 5))
        ok = rng.random((4, 300)) < 0.9

        batch = score_many(preds, sets, ks=(1, 5), ok=ok)

        for m in range(4):
            for k in (1, 5):
                assert batch[k].score(m) == multilabel_accuracy(preds[m], sets, k, ok[m])

    def test_one_ok_mask_for_every_model(self) -> None:
        preds = np.stack([PRED, PRED])
        batch = score_many(preds, SETS, ks=(1, 2), ok=OK)
        assert batch[2].accuracy.tolist() == [1.0, 1.0] and batch[1].n_errors.tolist() == [1, 1]

    def test_interval_arrays(self) -> None:
        batch = score_many(np.stack([PRED, PRED]), SETS, ks=(2,))[2]
        assert batch.ci_low.shape == (2,) and batch.score(1).ci_high == 1.0 and batch.score(1).ci_low < 0.5

    def test_ok_per_model_must_match_the_batch(self) -> None:
        with pytest.raises(EvaluationError, match=r"ok has shape \(3, 4\), expected \(2, 4\)"):
            score_many(np.stack([PRED, PRED]), SETS, ks=(1,), ok=np.ones((3, 4), bool))

    def test_no_k(self) -> None:
        with pytest.raises(EvaluationError, match="ks is empty"):
            score_many(np.stack([PRED]), SETS, ks=())

    def test_predictions_need_a_model_axis(self) -> None:
        with pytest.raises(EvaluationError, match=r"predictions must have 3 dimension\(s\), got shape \(4, 2\)"):
            score_many(PRED, SETS, ks=(1,))

    def test_k_larger_than_the_predictions(self) -> None:
        with pytest.raises(EvaluationError, match=r"k = 5 but the predictions have only 2 column\(s\)"):
            score_many(np.stack([PRED]), SETS, ks=(1, 5))


class TestOopRate:
    def test_errors_are_counted_apart(self) -> None:
        rate = oop_rate([True, False, True, False], ok=[True, True, False, True])
        assert (rate.rate, rate.n_oop, rate.n_answered, rate.n_errors) == (1 / 3, 1, 3, 1)

    def test_nothing_answered(self) -> None:
        assert math.isnan(oop_rate([False], ok=[False]).rate)


class TestRankingShift:
    def test_hand_computed(self) -> None:
        shift = ranking_shift([0.9, 0.8, 0.7], [0.7, 0.85, 0.75], names=["a", "b", "c"])

        assert [(r.name, r.rank_a, r.rank_b, r.shift) for r in shift.rows] == [
            ("b", 2, 1, 1),
            ("c", 3, 2, 1),
            ("a", 1, 3, -2),
        ]
        assert shift.kendall_tau == pytest.approx(-1 / 3)
        assert shift.p_value == pytest.approx(stats.kendalltau([0.9, 0.8, 0.7], [0.7, 0.85, 0.75]).pvalue)
        assert len(shift.moved) == 3

    def test_ties_share_the_best_rank_and_flat_scores_have_no_tau(self) -> None:
        shift = ranking_shift([0.5, 0.5, 0.4], [0.3, 0.3, 0.3])
        assert [r.rank_a for r in shift.rows] == [1, 1, 3] and math.isnan(shift.kendall_tau)

    @pytest.mark.parametrize(
        ("a", "b", "names", "message"),
        [
            ([0.1], [0.2], None, "equal length ≥ 2"),
            ([0.1, 0.2], [0.2, 0.3, 0.4], None, "equal length ≥ 2"),
            ([0.1, float("nan")], [0.2, 0.3], None, "finite"),
            ([0.1, 0.2], [0.2, 0.3], ["x"], "1 names for 2 models"),
            (["x", "y"], [0.2, 0.3], None, "scores_a must be numbers"),
        ],
    )
    def test_bad_input(self, a: list, b: list, names: list | None, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            ranking_shift(a, b, names)


class TestLabelSets:
    def test_round_trip_and_sparse(self) -> None:
        lists = [[3, 1], [], [0]]
        sets = LabelSets.from_lists(lists, n_classes=4)

        assert sets.to_lists() == lists and sets.counts.tolist() == [2, 0, 1]
        assert sets.to_sparse().toarray().astype(int).tolist() == [[0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]

    def test_read_only_copy(self) -> None:
        labels = np.array([[1], [2]])
        sets = LabelSets(labels, n_classes=3)
        labels[0, 0] = 0
        assert sets.labels[0, 0] == 1 and not sets.labels.flags.writeable

    @pytest.mark.parametrize(
        ("labels", "message"),
        [
            ([[1, -1], [-1, 2]], r"row 1 has a class after -1 padding: \[-1, 2\]"),
            ([[1, 1]], "row 0 lists class 1 twice"),
            ([[1], [10]], r"label sets row 1 has class 10, outside 0..9 \(-1 = none\)"),
            ([[0.5]], "must be integer class indices, got dtype float64"),
            ([1, 2], r"must have 2 dimension\(s\)"),
        ],
    )
    def test_invalid(self, labels: list, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            LabelSets(np.array(labels), n_classes=10)

    def test_bad_n_classes(self) -> None:
        with pytest.raises(EvaluationError, match="n_classes must be a positive integer, got 0"):
            LabelSets([[0]], n_classes=0)


class TestInputErrors:
    def test_class_out_of_range_names_the_row(self) -> None:
        pred = np.zeros((20, 1), int)
        pred[17, 0] = 1003
        with pytest.raises(EvaluationError, match=r"^predictions row 17 has class 1003, outside 0..999"):
            topk_accuracy(pred, np.zeros(20, int))

    def test_batched_out_of_range_names_the_model(self) -> None:
        preds = np.zeros((3, 4, 1), int)
        preds[2, 1, 0] = -5
        with pytest.raises(EvaluationError, match="predictions model 2, row 1 has class -5"):
            score_many(preds, SINGLE, ks=(1,), n_classes=10)

    def test_reference_out_of_range(self) -> None:
        with pytest.raises(EvaluationError, match=r"^reference labels row 0 has class 1000, outside 0..999"):
            topk_accuracy([1], [1000])

    def test_label_lists_need_label_sets(self) -> None:
        with pytest.raises(EvaluationError, match=r"reference labels are 2-D; build LabelSets\(...\)"):
            score_many(np.stack([PRED]), [[1, 2], [3, 4], [5, 6], [7, 8]], ks=(1,))

    def test_image_count_mismatch(self) -> None:
        with pytest.raises(EvaluationError, match="predictions have 3 images but the reference has 4"):
            multilabel_accuracy(PRED[:3], SETS)

    def test_empty_reference(self) -> None:
        with pytest.raises(EvaluationError, match="the reference labels none of its 2 images"):
            topk_accuracy([1, 2], [-1, -1])

    @pytest.mark.parametrize(
        ("ok", "message"),
        [([True, False], r"ok has shape \(2,\), expected \(4,\)"), ([0, 1, 2, 1], "ok must be booleans")],
    )
    def test_bad_ok(self, ok: list, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            multilabel_accuracy(PRED, SETS, ok=ok)

    def test_float_predictions(self) -> None:
        with pytest.raises(EvaluationError, match="predictions must be integer class indices, got dtype float64"):
            topk_accuracy([[0.0]], [0])

    @pytest.mark.parametrize("k", [0, 3, True, 1.5])
    def test_bad_k(self, k: object) -> None:
        with pytest.raises(EvaluationError, match="k"):
            multilabel_accuracy(PRED, SETS, k=k)

    def test_bad_n_boot(self) -> None:
        with pytest.raises(EvaluationError, match="n_boot must be an integer ≥ 0, got -1"):
            mean_per_class_accuracy(PRED, SETS, n_boot=-1)

    def test_is_a_value_error(self) -> None:
        assert issubclass(EvaluationError, ValueError)


def test_mean_per_class_gives_the_same_counts_with_and_without_an_interval() -> None:
    rng = np.random.default_rng(11)
    labels = [sorted(set(rng.integers(0, 30, rng.integers(0, 4)).tolist())) for _ in range(400)]
    pred = rng.integers(0, 30, (400, 5))
    ok = rng.random(400) > 0.1
    failed = ~ok & (rng.random(400) > 0.5)
    sets = LabelSets.from_lists(labels, 30)
    counted = mean_per_class_accuracy(pred, sets, 1, ok, failed=failed, n_boot=0)
    summed = mean_per_class_accuracy(pred, sets, 1, ok, failed=failed, n_boot=5)  # with the interval too
    assert counted.accuracy == summed.accuracy and counted.ci_low is None
    assert np.array_equal(counted.per_class, summed.per_class, equal_nan=True)
    assert np.array_equal(counted.images_per_class, summed.images_per_class)
    assert (counted.n_scored, counted.n_errors, counted.n_excluded) == (
        summed.n_scored,
        summed.n_errors,
        summed.n_excluded,
    )
