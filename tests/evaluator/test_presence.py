"""Presence probes after POPE: negative sampling by its three definitions, the five numbers on a hand-made table,
and the same answers against two references side by side."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator import EvaluationError, LabelSets
from evaluator.presence import ERROR, FAILED, NO, YES, compare_presence, score_presence
from evaluator.presence_sampling import Probes, probes

# The hand-made table. Reference a: image 0 holds {0, 1}, image 1 {2}, image 2 {3}.
#
#   image  class  truth  answer        cell
#   0      0      yes    yes           TP
#   0      1      yes    yes           TP
#   0      5      no     no            TN
#   0      6      no     yes           FP
#   1      2      yes    yes           TP
#   1      5      no     failed        F−  (a failed reply on a negative)
#   1      7      no     error         not scored (no reply)
#   2      3      yes    failed        F+  (a failed reply on a positive)
#   2      4      no     no            TN
#
# TP 3, FN 0, F+ 1, FP 1, TN 2, F− 1; n = 8 scored probes (the error is apart).
#   accuracy  = (TP + TN) / n            = 5 / 8             = 0.625
#   precision = TP / (TP + FP + F−)      = 3 / 5             = 0.6
#   recall    = TP / (TP + FN + F+)      = 3 / 4             = 0.75
#   F1        = 2 · 0.6 · 0.75 / 1.35    = 2 / 3
#   yes-ratio = (TP + FP) / n            = 4 / 8             = 0.5
REFERENCE_A = LabelSets.from_lists([[0, 1], [2], [3]], n_classes=8)
TABLE = Probes(
    image=np.array([0, 0, 0, 0, 1, 1, 1, 2, 2]),
    cls=np.array([0, 1, 5, 6, 2, 5, 7, 3, 4]),
    truth=np.array([1, 1, 0, 0, 1, 0, 0, 1, 0], bool),
    sampling="hand-made",
    seed=0,
)
ANSWERS = np.array([YES, YES, NO, YES, YES, FAILED, ERROR, FAILED, NO])


def random_reference(n_images: int, n_classes: int, seed: int) -> LabelSets:
    rng = np.random.default_rng(seed)
    sizes = rng.choice([0, 1, 2, 3], size=n_images, p=[0.1, 0.6, 0.2, 0.1])
    return LabelSets.from_lists([rng.choice(n_classes, s, replace=False).tolist() for s in sizes], n_classes)


def negatives_by_image(p: Probes) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for image, cls in zip(p.image[~p.truth].tolist(), p.cls[~p.truth].tolist(), strict=True):
        out.setdefault(image, []).append(cls)
    return out


class TestFiveNumbers:
    def test_the_hand_made_table(self) -> None:
        score = score_presence(TABLE, ANSWERS).row(0)

        assert (score.n_tp, score.n_fn, score.n_fp, score.n_tn) == (3, 0, 1, 2)
        assert (score.n_failed_positive, score.n_failed_negative, score.n_errors, score.n_scored) == (1, 1, 1, 8)
        assert score.accuracy == pytest.approx(0.625)
        assert score.precision == pytest.approx(0.6)
        assert score.recall == pytest.approx(0.75)
        assert score.f1 == pytest.approx(2 / 3)
        assert score.yes_ratio == pytest.approx(0.5)

    def test_truth_read_from_a_reference_agrees_with_the_probes_own(self) -> None:
        own = score_presence(TABLE, ANSWERS).row(0)
        assert score_presence(TABLE, ANSWERS, REFERENCE_A).row(0) == own

    def test_several_runs_at_once_score_as_each_alone(self) -> None:
        rng = np.random.default_rng(3)
        runs = rng.integers(ERROR, YES + 1, size=(4, len(TABLE)))
        batch = score_presence(TABLE, runs)
        for i, answers in enumerate(runs):
            assert batch.row(i) == score_presence(TABLE, answers).row(0)

    def test_booleans_are_yes_and_no(self) -> None:
        score = score_presence(TABLE, TABLE.truth).row(0)  # every answer right
        assert score.accuracy == score.precision == score.recall == score.f1 == 1.0
        assert score.yes_ratio == pytest.approx(4 / 9)

    def test_a_model_that_never_says_yes_has_no_precision(self) -> None:
        score = score_presence(TABLE, np.full(len(TABLE), NO)).row(0)
        assert np.isnan(score.precision) and score.recall == 0.0 and np.isnan(score.f1)
        assert score.yes_ratio == 0.0 and score.accuracy == pytest.approx(5 / 9)

    def test_images_the_reference_excludes_are_not_scored(self) -> None:
        without_image_2 = LabelSets.from_lists([[0, 1], [2], []], n_classes=8)
        score = score_presence(TABLE, ANSWERS, without_image_2).row(0)
        assert score.n_excluded == 2 and score.n_scored == 6  # image 2's failed positive and its TN are out
        assert score.accuracy == pytest.approx(4 / 6)


class TestTwoReferences:
    # Reference b adds class 6 to image 0: the yes on (0, 6), a false alarm under a, is a true object under b.
    #   under b: TP 4, FP 0, TN 2, F+ 1, F− 1; accuracy 6 / 8; difference b − a = 1 / 8.
    REFERENCE_B = LabelSets.from_lists([[0, 1, 6], [2], [3]], n_classes=8)

    def test_side_by_side_with_the_hallucinations_that_are_objects(self) -> None:
        both = compare_presence(TABLE, ANSWERS, REFERENCE_A, self.REFERENCE_B, n_boot=500)

        assert both.score_a.row(0) == score_presence(TABLE, ANSWERS).row(0)
        assert both.score_b.row(0).accuracy == pytest.approx(0.75)
        assert (both.score_b.row(0).n_tp, both.score_b.row(0).n_fp) == (4, 0)
        assert both.yes_absent_a_present_b.tolist() == [1] and both.yes_present_a_absent_b.tolist() == [0]
        assert both.difference[0] == pytest.approx(0.125)
        assert both.n_common_images == 3 and both.n_common_probes == 9
        assert both.ci_low is not None and both.ci_high is not None
        assert both.ci_low[0] <= 0.125 <= both.ci_high[0]

    def test_the_interval_is_the_image_bootstrap_written_out(self) -> None:
        rng = np.random.default_rng(0)
        ref_a = random_reference(300, 20, seed=1)
        ref_b = LabelSets.from_lists([s + ([19] if 19 not in s and s else []) for s in ref_a.to_lists()], 20)
        p = probes(ref_a, 3, "random", seed=2)
        answers = rng.integers(FAILED, YES + 1, size=len(p))
        both = compare_presence(p, answers, ref_a, ref_b, n_boot=2000, seed=5)

        # resample images with replacement; an image brings all its probes
        images = np.unique(p.image)
        right_a = ((answers == YES) & p.truth) | ((answers == NO) & ~p.truth)
        truth_b = np.array([c in ref_b.to_lists()[i] for i, c in zip(p.image, p.cls, strict=True)])
        right_b = ((answers == YES) & truth_b) | ((answers == NO) & ~truth_b)
        gain = np.array([right_b[p.image == i].sum() - right_a[p.image == i].sum() for i in images])
        size = np.array([(p.image == i).sum() for i in images])
        draws = rng.integers(0, len(images), size=(2000, len(images)))
        diffs = gain[draws].sum(axis=1) / size[draws].sum(axis=1)
        low, high = np.quantile(diffs, [0.025, 0.975])

        assert both.difference[0] == pytest.approx(gain.sum() / size.sum())
        assert both.ci_low is not None and both.ci_high is not None
        assert both.ci_low[0] == pytest.approx(low, abs=0.01) and both.ci_high[0] == pytest.approx(high, abs=0.01)

    def test_identical_references_give_a_non_degenerate_interval_around_zero(self) -> None:
        both = compare_presence(TABLE, ANSWERS, REFERENCE_A, REFERENCE_A, n_boot=100)
        assert both.difference[0] == 0.0
        assert both.ci_low is not None and both.ci_high is not None
        assert both.ci_low[0] < 0 < both.ci_high[0]

    def test_only_images_both_references_label_are_compared(self) -> None:
        b = LabelSets.from_lists([[0, 1], [2], []], n_classes=8)
        both = compare_presence(TABLE, ANSWERS, REFERENCE_A, b, n_boot=0)
        assert both.n_common_images == 2 and both.n_common_probes == 7
        assert both.score_a.n_scored[0] == both.score_b.n_scored[0] == 6
        assert both.ci_low is None


class TestNegativeSampling:
    @pytest.mark.parametrize("sampling", ["random", "popular", "adversarial"])
    def test_never_a_positive_and_n_distinct_negatives_per_labelled_image(self, sampling: str) -> None:
        ref = random_reference(400, 12, seed=4)
        related = np.random.default_rng(5).integers(0, 3, size=(12, 12))
        p = probes(ref, 4, sampling, seed=6, related=related)
        sets = ref.to_lists()

        assert all(c not in sets[i] for i, c in zip(p.image[~p.truth], p.cls[~p.truth], strict=True))
        negatives = negatives_by_image(p)
        labelled = [i for i, s in enumerate(sets) if s]
        assert sorted(negatives) == labelled
        assert all(len(set(classes)) == 4 for classes in negatives.values())
        positives = sorted(zip(p.image[p.truth].tolist(), p.cls[p.truth].tolist(), strict=True))
        assert positives == sorted((i, c) for i, s in enumerate(sets) for c in s)
        assert np.all(np.diff(p.image) >= 0)

    def test_random_reaches_every_class_outside_the_set_and_is_seeded(self) -> None:
        ref = LabelSets.from_single(np.zeros(2000, int), n_classes=10)  # every image holds class 0
        p = probes(ref, 2, "random", seed=1)
        counts = np.bincount(p.cls[~p.truth], minlength=10)
        assert counts[0] == 0 and counts[1:].min() > 300  # 4000 draws over 9 classes: about 444 each
        assert np.array_equal(probes(ref, 2, "random", seed=1).cls, p.cls)
        assert not np.array_equal(probes(ref, 2, "random", seed=2).cls, p.cls)

    def test_popular_takes_the_most_frequent_classes_outside_the_set(self) -> None:
        # classes 0..8 in 18, 16, ..., 2 sets, classes 9, 10, 11 in 1, 3, 5: every frequency distinct
        sets = [[c for c in range(9) if i < 9 - c] for i in range(9)] * 2 + [[9]] + [[10]] * 3 + [[11]] * 5
        ref = LabelSets.from_lists(sets, n_classes=12)
        frequency = np.bincount([c for s in sets for c in s], minlength=12)
        assert len(set(frequency.tolist())) == 12
        p = probes(ref, 3, "popular", seed=0)
        for image, negatives in negatives_by_image(p).items():
            outside = [c for c in np.argsort(-frequency, kind="stable") if c not in sets[image]]
            assert sorted(negatives) == sorted(outside[:3]), image

    def test_popular_on_single_labels_with_equal_counts_breaks_ties_at_random(self) -> None:
        ref = LabelSets.from_single(np.repeat(np.arange(10), 50), n_classes=10)  # 50 images per class, as ImGT
        p = probes(ref, 2, "popular", seed=0)
        counts = np.bincount(p.cls[~p.truth], minlength=10)
        assert counts.min() > 50  # 1,000 draws over ten classes of equal frequency, each outside 450 sets

    def test_adversarial_takes_the_classes_most_related_to_the_positives(self) -> None:
        ref = random_reference(200, 15, seed=7)
        related = np.random.default_rng(8).random((15, 15))  # distinct scores, no ties
        p = probes(ref, 3, "adversarial", seed=0, related=related)
        sets = ref.to_lists()
        for image, negatives in negatives_by_image(p).items():
            score = related[sets[image]].sum(axis=0)
            score[sets[image]] = -np.inf
            assert sorted(negatives) == sorted(np.argsort(-score)[:3].tolist()), image

    def test_adversarial_with_few_related_classes_fills_up_at_random(self) -> None:
        related = np.zeros((10, 10))
        related[0, 9] = 1.0  # wordnet-style: class 9 is the only sibling of class 0
        ref = LabelSets.from_single(np.zeros(500, int), n_classes=10)
        p = probes(ref, 3, "adversarial", seed=0, related=related)
        negatives = negatives_by_image(p)
        assert all(9 in classes for classes in negatives.values())
        assert len(np.unique(p.cls[~p.truth])) == 9


class TestBadInput:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"sampling": "hardest"}, "unknown sampling 'hardest'; known: adversarial, popular, random"),
            ({"sampling": "adversarial"}, "adversarial sampling needs related"),
            ({"n_negatives": 0}, "n_negatives must be a positive integer, got 0"),
            ({"n_negatives": 7}, "n_negatives = 7 but image 0 holds 2 of 8 classes: at most 6 negatives"),
            ({"sampling": "adversarial", "related": np.ones((3, 3))}, r"related must be numbers of shape \(8, 8\)"),
            ({"sampling": "adversarial", "related": np.full((8, 8), np.nan)}, r"related\[0, 0\] is nan"),
        ],
    )
    def test_probes(self, kwargs: dict, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            probes(REFERENCE_A, **kwargs)

    @pytest.mark.parametrize(
        ("answers", "message"),
        [
            (np.array([1, 0, 2, 0, 0, 0, 0, 0, 0]), "answers run 0, probe 2 is 2; expected 1 yes, 0 no, -1 failed"),
            (np.ones(3, int), r"answers have shape \(3,\); expected \(9,\) or \(n_runs, 9\)"),
            (np.array(["yes"] * 9), "answers must be int codes"),
        ],
    )
    def test_answers(self, answers: np.ndarray, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            score_presence(TABLE, answers)

    def test_as_many_negatives_as_the_fullest_image_allows(self) -> None:
        assert len(probes(REFERENCE_A, 6)) == 4 + 3 * 6

    def test_a_probe_outside_the_reference(self) -> None:
        small = LabelSets.from_lists([[0, 1], [2]], n_classes=8)
        with pytest.raises(EvaluationError, match=r"probe 7 has image 2, outside 0..1"):
            score_presence(TABLE, ANSWERS, small)

    def test_errors_are_one_line(self) -> None:
        with pytest.raises(EvaluationError) as info:
            probes(REFERENCE_A, 7)
        assert "\n" not in str(info.value)
