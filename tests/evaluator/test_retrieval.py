"""Retrieval: R@K, item recall@K and mAP text → image and R@K image → text, against a brute-force reference that
sorts every row (and scikit-learn's average precision), on random data, in small blocks and with ties."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

import evaluator.retrieval_ranks as retrieval_ranks
from evaluator import EvaluationError, LabelSets
from evaluator.retrieval import compare_retrieval, retrieval_scores


def random_sets(n_images: int, n_classes: int, seed: int, empty: float = 0.0) -> LabelSets:
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 3], size=n_images, p=[0.6, 0.3, 0.1]) * (rng.random(n_images) >= empty)
    return LabelSets.from_lists([rng.choice(n_classes, s, replace=False).tolist() for s in sizes], n_classes)


def brute_text_to_image(similarity: np.ndarray, sets: list[list[int]], ks: tuple[int, ...]) -> dict:
    """Sort each query's images, most similar first; a query counts when it has a relevant image."""
    hits, items, aps = {k: [] for k in ks}, {k: [] for k in ks}, []
    for q, row in enumerate(similarity):
        relevant = np.array([q in s for s in sets])
        if not relevant.any():
            continue
        ranked = relevant[np.argsort(-row, kind="stable")]
        ranks = np.flatnonzero(ranked) + 1
        for k in ks:
            hits[k].append(ranks.min() <= k)
            items[k].append(np.mean(ranks <= k))
        aps.append(np.mean(np.arange(1, len(ranks) + 1) / ranks))  # precision at each relevant image
    return {
        "recall": {k: np.mean(v) for k, v in hits.items()},
        "item": {k: np.mean(v) for k, v in items.items()},
        "map": np.mean(aps),
        "n": len(aps),
    }


def brute_image_to_text(similarity: np.ndarray, sets: list[list[int]], ks: tuple[int, ...]) -> dict[int, float]:
    hits: dict[int, list[bool]] = {k: [] for k in ks}
    for i, column in enumerate(similarity.T):
        if not sets[i]:
            continue
        order = np.argsort(-column, kind="stable")
        best = min(int(np.flatnonzero(order == c)[0]) + 1 for c in sets[i])
        for k in ks:
            hits[k].append(best <= k)
    return {k: float(np.mean(v)) for k, v in hits.items()}


@pytest.fixture(params=[10**9, 3_000], ids=["one block", "small blocks"])
def chunk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(retrieval_ranks, "CHUNK_VALUES", request.param)
    return int(request.param)


class TestAgainstBruteForce:
    KS = (1, 5, 10)

    def test_text_to_image_and_image_to_text_on_random_similarities(self, chunk: int) -> None:
        ref = random_sets(600, 30, seed=1)
        similarity = np.random.default_rng(2).standard_normal((30, 600))
        sets = ref.to_lists()
        out = retrieval_scores(ref, similarity=similarity, ks=self.KS)
        expected = brute_text_to_image(similarity, sets, self.KS)

        t2i = out.text_to_image
        assert t2i.n_queries == expected["n"] == 30
        assert t2i.mean_ap == pytest.approx(expected["map"])
        assert t2i.recall_at_k == pytest.approx(expected["recall"])
        assert t2i.item_recall_at_k == pytest.approx(expected["item"])
        assert out.image_to_text.recall_at_k == pytest.approx(brute_image_to_text(similarity, sets, self.KS))

    def test_average_precision_is_scikit_learns(self, chunk: int) -> None:
        ref = random_sets(500, 20, seed=3)
        similarity = np.random.default_rng(4).random((20, 500))
        relevant = ref.to_sparse().toarray().T
        out = retrieval_scores(ref, similarity=similarity).text_to_image
        expected = [average_precision_score(relevant[q], similarity[q]) for q in range(20)]
        assert out.average_precision == pytest.approx(expected, abs=1e-12)

    def test_ties_are_ranked_ahead_as_scikit_learn_does(self, chunk: int) -> None:
        ref = random_sets(400, 12, seed=5)
        similarity = np.round(np.random.default_rng(6).random((12, 400)), 1)  # about 40 images share each value
        relevant = ref.to_sparse().toarray().T
        out = retrieval_scores(ref, similarity=similarity).text_to_image
        expected = [average_precision_score(relevant[q], similarity[q]) for q in range(12)]
        assert out.average_precision == pytest.approx(expected, abs=1e-12)
        # R@K and item recall@K: sorted with the irrelevant images first among equal similarities
        places = [np.argsort(np.lexsort((relevant[q], -similarity[q])))[relevant[q]] + 1 for q in range(12)]
        assert out.first_rank.tolist() == [p.min() for p in places]
        for k in (1, 5, 10):
            assert out.recall_at_k[k] == pytest.approx(np.mean([p.min() <= k for p in places]))
            assert out.item_recall_at_k[k] == pytest.approx(np.mean([np.mean(p <= k) for p in places]))

    def test_embeddings_rank_by_cosine_similarity(self, chunk: int) -> None:
        rng = np.random.default_rng(7)
        ref = random_sets(300, 16, seed=8)
        queries, images = rng.standard_normal((16, 8)), rng.standard_normal((300, 8)) * rng.random((300, 1)) * 5
        cosine = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ (
            images / np.linalg.norm(images, axis=1, keepdims=True)
        ).T
        from_embeddings = retrieval_scores(ref, query_embeddings=queries, image_embeddings=images)
        from_matrix = retrieval_scores(ref, similarity=cosine)
        assert from_embeddings.text_to_image.mean_ap == pytest.approx(from_matrix.text_to_image.mean_ap, abs=1e-6)
        assert from_embeddings.image_to_text.recall_at_k == from_matrix.image_to_text.recall_at_k

    @pytest.mark.parametrize("bins", [4, 2**20], ids=["crowded bins", "bins finer than float32 error"])
    def test_ranks_stay_exact_whatever_the_bins(self, bins: int, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(retrieval_ranks, "BINS", bins)
        rng = np.random.default_rng(17)
        ref = random_sets(500, 10, seed=18)
        queries = rng.standard_normal((10, 64)).astype(np.float32)
        images = (queries[ref.labels[:, 0]] * 0.3 + rng.standard_normal((500, 64))).astype(np.float32)
        out = retrieval_scores(ref, query_embeddings=queries, image_embeddings=images)
        unit_q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        unit_i = images / np.linalg.norm(images, axis=1, keepdims=True)
        expected = brute_text_to_image(unit_q @ unit_i.T, ref.to_lists(), self.KS)
        assert out.text_to_image.mean_ap == pytest.approx(expected["map"])
        assert out.text_to_image.item_recall_at_k == pytest.approx(expected["item"])
        matrix = retrieval_scores(ref, similarity=np.random.default_rng(19).standard_normal((10, 500)))
        reference = brute_text_to_image(np.random.default_rng(19).standard_normal((10, 500)), ref.to_lists(), self.KS)
        assert matrix.text_to_image.mean_ap == pytest.approx(reference["map"])

    def test_a_perfect_similarity_scores_one(self) -> None:
        ref = random_sets(200, 10, seed=9)
        perfect = ref.to_sparse().toarray().T.astype(float)
        out = retrieval_scores(ref, similarity=perfect)
        assert out.text_to_image.mean_ap == 1.0 and out.text_to_image.recall_at_k[1] == 1.0
        assert out.image_to_text.recall_at_k[1] == 1.0  # ties among relevant items never push one out


class TestGalleryAndQueries:
    def test_images_with_an_empty_set_leave_the_gallery(self) -> None:
        ref = random_sets(300, 10, seed=10, empty=0.2)
        similarity = np.random.default_rng(11).standard_normal((10, 300))
        keep = ref.counts > 0
        out = retrieval_scores(ref, similarity=similarity)
        alone = retrieval_scores(LabelSets(ref.labels[keep], 10), similarity=similarity[:, keep])
        assert out.text_to_image.n_gallery == int(keep.sum())
        assert out.text_to_image.mean_ap == alone.text_to_image.mean_ap
        assert out.image_to_text.n_excluded == int((~keep).sum())
        assert np.array_equal(out.image_to_text.first_rank[keep], alone.image_to_text.first_rank)

    def test_two_references_on_the_images_both_label(self) -> None:
        a = random_sets(300, 10, seed=12, empty=0.1)
        b = random_sets(300, 10, seed=13, empty=0.1)
        similarity = np.random.default_rng(14).standard_normal((10, 300))
        both = (a.counts > 0) & (b.counts > 0)
        out_a, out_b = compare_retrieval([a, b], similarity=similarity)
        for ref, out in ((a, out_a), (b, out_b)):
            alone = retrieval_scores(LabelSets(ref.labels[both], 10), similarity=similarity[:, both])
            assert out.text_to_image.mean_ap == alone.text_to_image.mean_ap
            assert out.image_to_text.recall_at_k == alone.image_to_text.recall_at_k

    def test_queries_without_a_relevant_image_are_counted_apart(self) -> None:
        ref = LabelSets.from_lists([[0], [1], [0, 1]], n_classes=4)
        out = retrieval_scores(ref, similarity=np.random.default_rng(0).random((4, 3)))
        assert out.text_to_image.n_queries == 2 and out.text_to_image.n_without_relevant == 2
        assert np.isnan(out.text_to_image.average_precision[2:]).all()

    def test_query_classes_name_the_class_of_each_query(self) -> None:
        ref = random_sets(200, 8, seed=15)
        similarity = np.random.default_rng(16).standard_normal((8, 200))
        order = np.array([3, 1, 7, 0, 2, 6, 4, 5])
        shuffled = retrieval_scores(ref, similarity=similarity[order], query_classes=order)
        plain = retrieval_scores(ref, similarity=similarity)
        assert shuffled.text_to_image.mean_ap == pytest.approx(plain.text_to_image.mean_ap)
        assert shuffled.image_to_text.recall_at_k == plain.image_to_text.recall_at_k


class TestBadInput:
    REF = LabelSets.from_lists([[0], [1], [2]], n_classes=3)

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({}, "give either similarity or both query_embeddings and image_embeddings"),
            ({"similarity": np.ones((3, 3)), "query_embeddings": np.ones((3, 2))}, "give either similarity"),
            ({"similarity": np.ones((3, 4))}, "similarity has 4 images but the reference has 3"),
            ({"similarity": np.full((3, 3), np.nan)}, r"similarity\[0, 0\] is nan; every value must be finite"),
            ({"similarity": np.ones(3)}, "similarity must be a non-empty 2-D array of numbers"),
            ({"query_embeddings": np.ones((3, 2)), "image_embeddings": np.ones((3, 5))}, "have 2 dimensions"),
            ({"query_embeddings": np.zeros((3, 2)), "image_embeddings": np.ones((3, 2))}, "row 0 is all zeros"),
            ({"similarity": np.ones((4, 3))}, "4 queries but 3 classes; pass query_classes"),
            ({"similarity": np.ones((2, 3)), "query_classes": [1, 1]}, "class 1 has 2 queries; one per class"),
            ({"similarity": np.ones((2, 3)), "query_classes": [0, 5]}, r"query 1 is of class 5, outside 0..2"),
            ({"similarity": np.ones((3, 3)), "ks": (0, 5)}, "ks must be positive integers"),
        ],
    )
    def test_one_line_errors(self, kwargs: dict, message: str) -> None:
        with pytest.raises(EvaluationError, match=message) as info:
            retrieval_scores(self.REF, **kwargs)
        assert "\n" not in str(info.value)

    def test_references_of_other_images(self) -> None:
        other = LabelSets.from_lists([[0], [1]], n_classes=3)
        with pytest.raises(EvaluationError, match="references differ: 3 images of 3 classes against 2 of 3"):
            compare_retrieval([self.REF, other], similarity=np.ones((3, 3)))

    def test_an_empty_gallery(self) -> None:
        with pytest.raises(EvaluationError, match="the gallery is empty"):
            retrieval_scores(LabelSets.from_lists([[], []], n_classes=3), similarity=np.ones((3, 2)))
