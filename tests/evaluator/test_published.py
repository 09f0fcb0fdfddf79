"""Shankar et al.'s own metric: hand-computed cases and the published file's golden number."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from evaluator import EvaluationError, LabelSets
from evaluator.published import shankar_accuracy
from evaluator.scoring import multilabel_accuracy
from tests.conftest import shared
from tests.evaluator.test_scoring import val_in_real_order

# Five images, original labels 0, 0, 1, 1, 2. Image 4 is problematic (skipped whatever it predicts).
CORRECT = LabelSets.from_lists([[0], [0, 3], [1], [], [2]], n_classes=5)
UNCLEAR = LabelSets.from_lists([[], [4], [], [3], []], n_classes=5)
ORIGINAL = np.array([0, 0, 1, 1, 2])
PROBLEMATIC = np.array([False, False, False, False, True])


class TestShankarAccuracy:
    def test_hand_computed(self) -> None:
        # class 0: image 0 right, image 1 right through an unclear label -> 1.0; class 1: image 2 wrong, image 3
        # right through its unclear label (its correct set is empty) -> 0.5; class 2 skipped. Mean 0.75.
        pred = np.array([0, 4, 2, 3, 0])

        score = shankar_accuracy(pred, CORRECT, UNCLEAR, ORIGINAL, PROBLEMATIC, n_boot=0)

        assert (score.accuracy, score.n_scored, score.n_excluded, score.n_classes_scored) == (0.75, 4, 1, 2)
        pooled = multilabel_accuracy(pred, CORRECT, interval=None)  # the ReGT-style reading of the same file
        assert (pooled.accuracy, pooled.n_scored) == (0.25, 4)  # image 3 excluded, only image 0 right

    def test_failed_replies_are_wrong_and_infrastructure_errors_apart(self) -> None:
        pred = np.array([0, 0, 1, 3, 0])
        ok = np.array([True, False, True, False, True])
        failed = np.array([False, True, False, False, False])  # image 3: an infrastructure error

        score = shankar_accuracy(pred, CORRECT, UNCLEAR, ORIGINAL, PROBLEMATIC, ok=ok, failed=failed, n_boot=0)

        assert (score.accuracy, score.n_scored, score.n_errors) == (0.75, 3, 1)  # class 0: 1/2, class 1: 1/1

    def test_mismatched_sets(self) -> None:
        with pytest.raises(EvaluationError, match="unclear_labels cover 2 images"):
            shankar_accuracy([0] * 5, CORRECT, LabelSets.from_lists([[1], []], 5), ORIGINAL, PROBLEMATIC)


def read_shankar() -> tuple[np.ndarray, LabelSets, LabelSets, np.ndarray, np.ndarray]:
    """Val index (0-based), proposed labels, unclear labels, original label and problematic flag per CSV row."""
    with shared("imagenet-val", "shankar_multilabel.csv").open() as f:
        rows = list(csv.DictReader(f))

    def classes(cell: str) -> list[int]:
        return list(dict.fromkeys(int(c) for c in cell.split(","))) if cell.strip() else []  # one row repeats a class

    index = np.array([int(r["id"].rsplit("_", 1)[1].split(".")[0]) - 1 for r in rows])
    proposed = LabelSets.from_lists([classes(r["proposed_labels"]) for r in rows])
    unclear = LabelSets.from_lists([classes(r["unclear_multi_labels"]) for r in rows])
    original = np.array([int(r["original_label"]) for r in rows])
    problematic = np.array([r["is_problematic"] == "True" for r in rows])
    return index, proposed, unclear, original, problematic


def test_cleanlab_cv_predictions_under_shankars_metric_and_the_regt_reading() -> None:
    """79.55 % with the metric the TFDS release recommends; 78.23 % pooled over the proposed labels."""
    pred, _, _ = val_in_real_order()
    index, proposed, unclear, original, problematic = read_shankar()

    score = shankar_accuracy(pred[index], proposed, unclear, original, problematic, n_boot=200, seed=0)
    pooled = multilabel_accuracy(pred[index], proposed)

    assert (round(100 * score.accuracy, 2), score.n_scored, score.n_excluded) == (79.55, 18_692, 1_308)
    assert score.n_classes_scored == 1000 and score.ci_low < score.accuracy < score.ci_high
    assert (round(100 * pooled.accuracy, 2), pooled.n_scored, pooled.n_excluded) == (78.23, 19_549, 451)
    assert not math.isclose(score.accuracy, pooled.accuracy, abs_tol=0.01)
