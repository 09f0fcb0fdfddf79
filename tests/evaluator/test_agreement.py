"""Inter-annotator agreement maths: published worked examples, maintained libraries on random data, edge cases."""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations

import krippendorff
import numpy as np
import pytest
from nltk.metrics.agreement import AnnotationTask
from nltk.metrics.distance import binary_distance, jaccard_distance, masi_distance
from sklearn.metrics import cohen_kappa_score

from evaluator import EvaluationError
from evaluator.agreement import (
    DISTANCES,
    cohen_kappa_pairs,
    fleiss_kappa,
    krippendorff_alpha,
    percent_agreement,
    reference_agreement,
    summarize_agreement,
)

NLTK_DISTANCES = {"nominal": binary_distance, "jaccard": jaccard_distance, "masi": masi_distance}
POOL = [frozenset(c) for k in (1, 2, 3) for c in combinations(range(4), k)] + [frozenset("Z"), frozenset("X")]


def fs(*elements: object) -> frozenset:
    return frozenset(elements)


def random_ratings(seed: int, n_items: int, n_annotators: int, p_missing: float) -> dict[str, dict[str, frozenset]]:
    """Labels from a pool of overlapping and nested sets; each annotator copies the image's 'truth' 60 % of the time."""
    rng = np.random.default_rng(seed)
    ratings: dict[str, dict[str, frozenset]] = {}
    for i in range(n_items):
        truth = POOL[rng.integers(len(POOL))]
        ratings[f"img{i}"] = {
            f"a{a}": truth if rng.random() < 0.6 else POOL[rng.integers(len(POOL))]
            for a in range(n_annotators)
            if rng.random() >= p_missing
        }
    return ratings


def triples(ratings: dict[str, dict[str, frozenset]]) -> list[tuple[str, str, frozenset]]:
    return [(a, item, label) for item, row in ratings.items() for a, label in row.items()]


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers x 12 units, "." missing.
KRIPPENDORFF_2011 = """\
1 2 3 3 2 1 4 1 2 . . .
1 2 3 3 2 2 4 1 2 5 . 3
. 3 3 3 2 3 4 2 2 5 1 .
1 2 3 3 2 4 4 1 2 5 1 ."""
# Wikipedia, "Fleiss' kappa", worked example: 10 subjects x 5 categories, 14 raters each; cell = raters choosing it.
FLEISS_WIKIPEDIA = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


class TestPublishedExamples:
    def test_krippendorff_nominal_alpha_with_missing_data(self) -> None:
        rows = [line.split() for line in KRIPPENDORFF_2011.splitlines()]
        ratings = {u: {obs: fs(int(r[u])) for obs, r in enumerate(rows) if r[u] != "."} for u in range(12)}
        assert krippendorff_alpha(ratings) == pytest.approx(0.743, abs=5e-4)

    def test_fleiss_kappa_wikipedia(self) -> None:
        ratings = {}
        for subject, counts in enumerate(FLEISS_WIKIPEDIA):
            chosen = [category for category, n in enumerate(counts) for _ in range(n)]
            ratings[subject] = {rater: fs(category) for rater, category in enumerate(chosen)}
        assert fleiss_kappa(ratings) == pytest.approx(0.210, abs=5e-4)

    def test_cohen_kappa_wikipedia(self) -> None:
        table = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
        ratings = {i: {"A": fs(a), "B": fs(b)} for i, (a, b) in enumerate(table)}
        (pair,) = cohen_kappa_pairs(ratings)
        assert (pair.annotator_a, pair.annotator_b, pair.n_items) == ("A", "B", 50)
        assert pair.observed == pytest.approx(0.70) and pair.kappa == pytest.approx(0.40)


@pytest.mark.parametrize(("seed", "n_items", "n_annotators", "p_missing"), [(1, 12, 3, 0.3), (2, 300, 5, 0.4)])
class TestAgainstLibraries:
    def test_alpha_equals_nltk_for_every_distance(self, seed: int, n_items: int, n_annotators: int, p_missing: float):
        ratings = random_ratings(seed, n_items, n_annotators, p_missing)
        for name, distance in NLTK_DISTANCES.items():
            expected = AnnotationTask(triples(ratings), distance=distance).alpha()
            assert krippendorff_alpha(ratings, name) == pytest.approx(expected, abs=1e-12), name

    def test_nominal_alpha_equals_krippendorff_package(self, seed, n_items, n_annotators, p_missing) -> None:
        ratings = random_ratings(seed, n_items, n_annotators, p_missing)
        codes = {label: float(i) for i, label in enumerate(POOL)}
        data = np.full((n_annotators, n_items), np.nan)
        for u, row in enumerate(ratings.values()):
            for a, label in row.items():
                data[int(a[1:]), u] = codes[label]
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert krippendorff_alpha(ratings) == pytest.approx(expected, abs=1e-12)

    def test_cohen_kappa_equals_sklearn_per_pair(self, seed, n_items, n_annotators, p_missing) -> None:
        ratings = random_ratings(seed, n_items, n_annotators, p_missing)
        pairs = cohen_kappa_pairs(ratings)
        assert len(pairs) == n_annotators * (n_annotators - 1) // 2
        for pair in pairs:
            shared = [row for row in ratings.values() if pair.annotator_a in row and pair.annotator_b in row]
            a = [repr(sorted(map(str, row[pair.annotator_a]))) for row in shared]
            b = [repr(sorted(map(str, row[pair.annotator_b]))) for row in shared]
            assert pair.n_items == len(shared)
            assert pair.kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
            assert pair.observed == pytest.approx(np.mean([x == y for x, y in zip(a, b)]))

    def test_fleiss_kappa_equals_nltk_multi_pi_on_complete_data(self, seed, n_items, n_annotators, p_missing) -> None:
        # With every annotator on every image, Fleiss' κ is Scott's multi-π (Siegel & Castellan's K).
        ratings = random_ratings(seed, n_items, n_annotators, p_missing=0.0)
        task = AnnotationTask(triples(ratings))
        assert fleiss_kappa(ratings) == pytest.approx(task.pi(), abs=1e-12)
        assert percent_agreement(ratings) == pytest.approx(task.avg_Ao(), abs=1e-12)

    def test_fleiss_kappa_with_varying_rater_counts(self, seed, n_items, n_annotators, p_missing) -> None:
        ratings = random_ratings(seed, n_items, n_annotators, p_missing)
        assert fleiss_kappa(ratings) == pytest.approx(generalised_fleiss(ratings), abs=1e-12)


def generalised_fleiss(ratings: dict[str, dict[str, frozenset]]) -> float:
    """Fleiss' κ for varying rater counts as Gwet (2014) writes it, on images with ≥ 2 ratings, in plain Python."""
    rows = [Counter(row.values()) for row in ratings.values() if len(row) >= 2]
    p_bar = sum(sum(n * (n - 1) for n in c.values()) / (c.total() * (c.total() - 1)) for c in rows) / len(rows)
    pi: Counter = Counter()
    for c in rows:
        pi.update({label: n / c.total() / len(rows) for label, n in c.items()})
    p_e = sum(p * p for p in pi.values())
    return (p_bar - p_e) / (1 - p_e)


class TestEdgeCases:
    def test_no_overlap_gives_empty_pairs_and_nan(self) -> None:
        summary = summarize_agreement({"i1": {"ann": fs(1)}, "i2": {"bob": fs(2)}})
        (pair,) = summary.pairs
        assert pair.n_items == 0 and math.isnan(pair.kappa) and math.isnan(pair.observed)
        assert (summary.n_items, summary.n_multi_rated, summary.n_pairs) == (2, 0, 0)
        assert math.isnan(summary.fleiss_kappa) and math.isnan(summary.percent_agreement)
        assert all(math.isnan(a) for a in summary.alpha.values())

    def test_a_single_category_everywhere_is_nan_not_one(self) -> None:
        # Expected disagreement is 0, so every chance-corrected coefficient is 0/0; percent agreement is still 1.
        summary = summarize_agreement({i: {"ann": fs(7), "bob": fs(7), "cid": fs(7)} for i in range(5)})
        assert summary.percent_agreement == 1.0 and summary.pairs[0].observed == 1.0
        assert math.isnan(summary.fleiss_kappa) and all(math.isnan(p.kappa) for p in summary.pairs)
        assert set(summary.alpha) == set(DISTANCES) and all(math.isnan(a) for a in summary.alpha.values())

    def test_one_annotator(self) -> None:
        summary = summarize_agreement({i: {"ann": fs(i % 2)} for i in range(4)}, {0: fs(0), 1: fs(0)})
        assert summary.pairs == [] and summary.n_annotators == 1 and summary.n_multi_rated == 0
        assert math.isnan(summary.fleiss_kappa) and math.isnan(summary.alpha["masi"])
        (ref,) = summary.reference
        assert (ref.annotator, ref.n_items, ref.exact) == ("ann", 2, 0.5)

    def test_no_ratings_at_all(self) -> None:
        summary = summarize_agreement({})
        assert (summary.n_items, summary.n_ratings, summary.pairs, summary.reference) == (0, 0, [], [])
        assert math.isnan(summary.fleiss_kappa) and all(math.isnan(a) for a in summary.alpha.values())

    def test_perfect_agreement_on_varied_labels_is_one(self) -> None:
        ratings = {i: {"ann": POOL[i], "bob": POOL[i]} for i in range(6)}
        summary = summarize_agreement(ratings)
        assert summary.fleiss_kappa == 1.0 and summary.pairs[0].kappa == 1.0
        assert summary.alpha == pytest.approx(dict.fromkeys(DISTANCES, 1.0))

    def test_partial_overlap_earns_partial_credit_only_with_set_distances(self) -> None:
        # {0,1} vs {0}: Jaccard similarity 1/2, MASI similarity 1/2 * 2/3; nominal gives no credit.
        ratings = {"a": {"x": fs(0, 1), "y": fs(0)}, "b": {"x": fs(2), "y": fs(2)}, "c": {"x": fs("Z"), "y": fs("Z")}}
        alpha = summarize_agreement(ratings).alpha
        assert alpha["nominal"] < alpha["masi"] < alpha["jaccard"] < 1.0


class TestInputErrors:
    @pytest.mark.parametrize("label", [frozenset(), [1, 2], "cat", None])
    def test_a_label_must_be_a_non_empty_set(self, label: object) -> None:
        with pytest.raises(EvaluationError, match=r"label of 'bob' on image 'img7' must be a non-empty set"):
            summarize_agreement({"img7": {"ann": fs(1), "bob": label}})  # type: ignore[dict-item]

    def test_a_plain_set_is_accepted(self) -> None:
        assert krippendorff_alpha({1: {"a": {1}, "b": {1}}, 2: {"a": {2}, "b": {2}}}) == 1.0

    def test_unknown_distance_lists_the_known_ones(self) -> None:
        with pytest.raises(EvaluationError, match="unknown distance 'cosine'; known: nominal, jaccard, masi"):
            krippendorff_alpha({1: {"a": fs(1)}}, "cosine")

    def test_ratings_rows_must_be_mappings(self) -> None:
        with pytest.raises(EvaluationError, match="ratings of image 3 must map annotator"):
            summarize_agreement({3: [fs(1)]})  # type: ignore[dict-item]


def test_reference_agreement_by_hand() -> None:
    ratings = {1: {"ann": fs(0, 1), "bob": fs(0)}, 2: {"ann": fs(1)}, 3: {"ann": fs(2), "bob": fs(2)}}
    ann, bob = reference_agreement(ratings, {1: fs(0), 2: fs(1), 9: fs(4)})
    assert (ann.annotator, ann.n_items, ann.exact, ann.mean_jaccard) == ("ann", 2, 0.5, 0.75)
    assert (bob.annotator, bob.n_items, bob.exact, bob.mean_jaccard) == ("bob", 1, 1.0, 1.0)
