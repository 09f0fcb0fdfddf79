"""A retrieval run's rows from its stored embeddings: each row is what `evaluator.retrieval` gives for that
reference (alone for the first, on the images both label for the others), whichever references share a pass."""

from __future__ import annotations

import numpy as np
import pytest

from db.models import ModelRun
from evaluator import LabelSets
from evaluator.retrieval import compare_retrieval, retrieval_scores
from relabel.common.errors import InputError
from relabel.evaluation.tasks_retrieval import retrieval_rows
from relabel.suggest.retrieval_store import StoredEmbeddings

RUN = ModelRun(dataset_id=1, name="ret", model="clip:tiny", protocol="retrieval", params={})
N_IMAGES, N_CLASSES = 60, 8


@pytest.fixture
def stored() -> StoredEmbeddings:
    rng = np.random.default_rng(0)
    return StoredEmbeddings(
        np.arange(N_IMAGES), rng.standard_normal((N_IMAGES, 6)), rng.standard_normal((N_CLASSES, 6)), {}, {}
    )


def sets(rng: np.random.Generator, empty: np.ndarray | None = None) -> LabelSets:
    lists = [rng.choice(N_CLASSES, rng.integers(1, 3), replace=False).tolist() for _ in range(N_IMAGES)]
    for i in np.flatnonzero(empty) if empty is not None else []:
        lists[i] = []
    return LabelSets.from_lists(lists, N_CLASSES)


def test_each_row_is_the_library_score_of_its_reference(stored: StoredEmbeddings) -> None:
    rng = np.random.default_rng(1)
    some_out = np.arange(N_IMAGES) < 5  # a's first five images are not labelled by c
    a, b, c = sets(rng), sets(rng), sets(rng, some_out)
    embeddings = {"query_embeddings": stored.texts, "image_embeddings": stored.images}
    rows = retrieval_rows(RUN, stored, ["a", "b", "c"], [a, b, c], n_boot=200)
    assert [r.reference for r in rows] == ["a", "b", "c"]
    alone = retrieval_scores(a, **embeddings)
    assert rows[0].t2i_map == alone.text_to_image.mean_ap and rows[0].n_images == N_IMAGES
    for row, ref, n in ((rows[1], b, N_IMAGES), (rows[2], c, N_IMAGES - 5)):
        on_a, on_ref = compare_retrieval([a, ref], **embeddings)
        assert row.n_images == n and row.t2i_map == on_ref.text_to_image.mean_ap
        assert row.t2i_recall == on_ref.text_to_image.recall_at_k and row.i2t_recall == on_ref.image_to_text.recall_at_k
        assert row.versus is not None and row.versus.map_a == on_a.text_to_image.mean_ap
        assert row.versus.difference == pytest.approx(on_ref.text_to_image.mean_ap - on_a.text_to_image.mean_ap)
        assert row.versus.ci_low is not None and row.versus.ci_low <= row.versus.difference <= row.versus.ci_high


def test_a_reference_with_no_image_in_common_stands_alone(stored: StoredEmbeddings) -> None:
    rng = np.random.default_rng(2)
    half = np.arange(N_IMAGES) < N_IMAGES // 2
    a, b = sets(rng, half), sets(rng, ~half)
    rows = retrieval_rows(RUN, stored, ["a", "b"], [a, b], n_boot=0)
    assert [r.n_images for r in rows] == [N_IMAGES // 2, N_IMAGES // 2] and rows[1].versus is None
    empty = LabelSets.from_lists([[] for _ in range(N_IMAGES)], N_CLASSES)
    with pytest.raises(InputError, match="reference 'none' labels none of the images retrieval run 'ret' embedded"):
        retrieval_rows(RUN, stored, ["none", "a"], [empty, a])
