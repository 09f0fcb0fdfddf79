"""R@K, item recall@K and mAP on a table small enough to rank by hand, from the definitions in evaluator.retrieval
(R@K as CLIP_benchmark counts it; AP = (1 / R) Σ over the R relevant images of the precision at that image).

Three class queries × four images; image 3's set is empty, so it leaves the gallery.

    similarity   image 0  image 1  image 2  image 3      sets: image 0 {0}, image 1 {1}, image 2 {0, 1}, image 3 {}
    query 0        0.9      0.8      0.1      0.5
    query 1        0.2      0.7      0.6      0.1
    query 2        0.3      0.1      0.2      0.4

Text → image, gallery = images 0, 1, 2:
    query 0 ranks 0 (relevant), 1, 2 (relevant): a hit at 1; AP = (1/2)(1/1 + 2/3) = 5/6; item recall@1 = 1/2
    query 1 ranks 1 (relevant), 2 (relevant), 0: a hit at 1; AP = (1/2)(1/1 + 2/2) = 1; item recall@1 = 1/2
    query 2 has no relevant image: counted apart
    R@1 = R@5 = 1; mAP = (5/6 + 1) / 2 = 11/12; item recall@1 = 1/2, @5 = 1
Image → text (queries by similarity, per image):
    image 0: query 0 first (relevant) -> place 1; image 1: query 0, then query 1 (relevant) -> place 2;
    image 2: query 1 first (relevant) -> place 1.   R@1 = 2/3, R@5 = 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from evaluator import LabelSets
from evaluator.retrieval import retrieval_scores

SIMILARITY = np.array([[0.9, 0.8, 0.1, 0.5], [0.2, 0.7, 0.6, 0.1], [0.3, 0.1, 0.2, 0.4]])
SETS = LabelSets.from_lists([[0], [1], [0, 1], []], n_classes=3)


def test_text_to_image_by_hand() -> None:
    t2i = retrieval_scores(SETS, similarity=SIMILARITY, ks=(1, 5)).text_to_image
    assert t2i.recall_at_k == {1: 1.0, 5: 1.0}
    assert t2i.item_recall_at_k == {1: pytest.approx(0.5), 5: pytest.approx(1.0)}
    assert t2i.mean_ap == pytest.approx(11 / 12)
    np.testing.assert_allclose(t2i.average_precision[:2], [5 / 6, 1.0])
    assert np.isnan(t2i.average_precision[2]) and t2i.first_rank.tolist() == [1, 1, 0]
    assert (t2i.n_queries, t2i.n_without_relevant, t2i.n_gallery) == (2, 1, 3)


def test_image_to_text_by_hand() -> None:
    i2t = retrieval_scores(SETS, similarity=SIMILARITY, ks=(1, 5)).image_to_text
    assert i2t.recall_at_k == {1: pytest.approx(2 / 3), 5: 1.0}
    assert i2t.first_rank.tolist() == [1, 2, 1, 0] and (i2t.n_images, i2t.n_excluded) == (3, 1)
