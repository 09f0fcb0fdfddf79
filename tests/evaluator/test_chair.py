"""CHAIR after Rohrbach et al. (2018) on five captions computed by hand, against two references side by side."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator import EvaluationError, LabelSets
from evaluator.chair import chair, compare_chair

# Five captions of five images, their mentions already mapped to classes (0..9).
#
#   caption  image set (a: ImGT)  image set (b: ReGT)  mentions    under a               under b
#   0        {1}                  {1, 7}               1, 7        7 hallucinated        none
#   1        {2}                  {2}                  2, 0        0 hallucinated        0 hallucinated
#   2        {3}                  {3}                  3, 3, 8     8 hallucinated        8 hallucinated
#   3        {4}                  {4, 0}               (2 unmapped) nothing mapped        nothing mapped
#   4        {5}                  {5, 6}               6, 9        6, 9 hallucinated     9 hallucinated
#
# Under a: 9 mentions, 5 hallucinated          -> CHAIR-i = 5 / 9
#          captions 0, 1, 2, 4 hallucinate     -> CHAIR-s = 4 / 5 = 0.8
#          classes 1, 2, 3 of 5 mentioned      -> coverage = 3 / 5 = 0.6
#          2 unmapped: CHAIR-i between 5 / 11 (all right) and 7 / 11 (all hallucinated)
# Under b: 9 mentions, 3 hallucinated          -> CHAIR-i = 3 / 9
#          captions 1, 2, 4 hallucinate        -> CHAIR-s = 3 / 5 = 0.6
#          1, 7 | 2 | 3 | - | 6 of 8 classes   -> coverage = 5 / 8
# Hallucinated under a but objects under b: 7 (caption 0) and 6 (caption 4) -> 2; the reverse: 0.
MENTIONS = [[1, 7], [2, 0], [3, 3, 8], [], [6, 9]]
UNMAPPED = np.array([0, 0, 0, 2, 0])
IMGT = LabelSets.from_lists([[1], [2], [3], [4], [5]], n_classes=10)
REGT = LabelSets.from_lists([[1, 7], [2], [3], [4, 0], [5, 6]], n_classes=10)


class TestFiveCaptions:
    def test_against_imgt(self) -> None:
        score = chair(MENTIONS, IMGT, n_unmapped=UNMAPPED)

        assert score.chair_i == pytest.approx(5 / 9)
        assert score.chair_s == pytest.approx(0.8)
        assert score.coverage == pytest.approx(0.6)
        assert (score.n_mentions, score.n_hallucinated, score.n_hallucinated_captions) == (9, 5, 4)
        assert (score.n_reference_classes, score.n_covered, score.n_unmapped) == (5, 3, 2)
        assert score.chair_i_bounds == (pytest.approx(5 / 11), pytest.approx(7 / 11))

    def test_against_regt_side_by_side(self) -> None:
        both = compare_chair(MENTIONS, IMGT, REGT, n_unmapped=UNMAPPED)

        assert both.score_a == chair(MENTIONS, IMGT, n_unmapped=UNMAPPED)
        assert both.score_b.chair_i == pytest.approx(3 / 9)
        assert both.score_b.chair_s == pytest.approx(0.6)
        assert both.score_b.coverage == pytest.approx(5 / 8)
        assert (both.hallucinated_a_present_b, both.present_a_hallucinated_b) == (2, 0)

    def test_a_richer_set_never_raises_chair(self) -> None:
        rng = np.random.default_rng(0)
        sets = [rng.choice(50, rng.integers(1, 3), replace=False).tolist() for _ in range(200)]
        richer = [s + [c for c in rng.choice(50, 2).tolist() if c not in s][:1] for s in sets]
        mentions = [rng.choice(50, rng.integers(0, 4)).tolist() for _ in range(200)]
        both = compare_chair(mentions, LabelSets.from_lists(sets, 50), LabelSets.from_lists(richer, 50))
        assert both.score_b.chair_i <= both.score_a.chair_i and both.score_b.chair_s <= both.score_a.chair_s
        assert both.present_a_hallucinated_b == 0


class TestConventions:
    def test_failed_replies_count_as_hallucinating_captions_that_cover_nothing(self) -> None:
        mentions = [*MENTIONS, []]
        ref = LabelSets.from_lists([[1], [2], [3], [4], [5], [6]], n_classes=10)
        score = chair(mentions, ref, failed=[0, 0, 0, 0, 0, 1])
        assert score.n_failed == 1 and score.n_captions == 6
        assert score.chair_s == pytest.approx(5 / 6) and score.coverage == pytest.approx(3 / 6)
        assert score.chair_i == pytest.approx(5 / 9)  # no mentions: CHAIR-i unchanged

    def test_captions_of_excluded_images_are_not_scored(self) -> None:
        ref = LabelSets.from_lists([[1], [2], [3], [4], []], n_classes=10)
        score = chair(MENTIONS, ref)
        assert score.n_excluded == 1 and score.n_captions == 4
        assert score.chair_i == pytest.approx(3 / 7) and score.chair_s == pytest.approx(3 / 4)

    def test_captions_may_name_their_images(self) -> None:
        shuffled = [4, 0, 3, 1, 2]
        score = chair([MENTIONS[i] for i in shuffled], IMGT, images=shuffled, n_unmapped=UNMAPPED[shuffled])
        assert score == chair(MENTIONS, IMGT, n_unmapped=UNMAPPED)

    def test_a_class_named_twice_covers_once(self) -> None:
        score = chair([[1, 1, 1]], LabelSets.from_lists([[1, 2]], n_classes=3))
        assert score.coverage == 0.5 and score.chair_i == 0.0 and score.n_mentions == 3

    def test_nothing_mentioned_is_nan_chair_i(self) -> None:
        score = chair([[], []], LabelSets.from_lists([[1], [2]], n_classes=3))
        assert np.isnan(score.chair_i) and score.chair_s == 0.0 and score.coverage == 0.0


class TestBadInput:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"mentions": [[1], [12]]}, "caption 1 mentions class 12, outside 0..9"),
            ({"mentions": [[1], ["dog"]]}, "mentions must hold integer class indices"),
            ({"mentions": "dog"}, "mentions must be a list with one list of classes per caption"),
            ({"mentions": [[1]] * 6}, "6 captions but the reference has 5 images; pass images"),
            ({"images": [0, 9]}, "caption 1 is of image 9, outside 0..4"),
            ({"images": [0]}, r"images must be integers of shape \(2,\)"),
            ({"n_unmapped": [0, -1]}, "n_unmapped of caption 1 is negative"),
            ({"failed": [True, False]}, "caption 0 is failed but has mentions"),
        ],
    )
    def test_one_line_errors(self, kwargs: dict, message: str) -> None:
        args = {"mentions": [[1], [2]], **kwargs}
        mentions = args.pop("mentions")
        with pytest.raises(EvaluationError, match=message) as info:
            chair(mentions, IMGT, **args)
        assert "\n" not in str(info.value)

    def test_references_of_other_images(self) -> None:
        with pytest.raises(EvaluationError, match="reference_b must be LabelSets of the same images"):
            compare_chair(MENTIONS, IMGT, LabelSets.from_lists([[1]], n_classes=10))
