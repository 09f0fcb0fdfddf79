"""Inter-annotator agreement on set-valued labels: annotator reliability, beside the model reliability of
`model_reliability`. `relabel.review.agreement` turns a dataset's decisions into ratings for the leads' dashboard.

Every function takes plain data, ``ratings = {image: {annotator: label}}``, where a label is a non-empty set: the
classes of a `labels` decision, ``{"Z"}`` for `none_fit`, ``{"X"}`` for `unclear` (two special values that differ
from every class set). Conventions shared by every coefficient:

* **nominal** means exact set match: ``{1, 2}`` and ``{1}`` disagree as much as ``{1}`` and ``{7}``. Cohen's κ,
  Fleiss' κ and percent agreement are nominal; Krippendorff's α is also given with a partial-credit set distance.
* **undefined is NaN.** A chance-corrected coefficient is 0/0 when nothing is comparable or when every rating is
  the same label (expected disagreement 0); it is then ``nan``, never 1.0, and percent agreement says how often
  the annotators agreed. (nltk returns 1 there, the `krippendorff` package raises.)
* a coefficient over several annotators uses the images with at least 2 ratings; missing ratings are allowed.

Implementation: every distinct label set gets an integer code once; the similarity ``1 − δ`` of two codes is looked
up in a sparse table of the code pairs whose sets intersect (one sparse product), so each coefficient is a few
vectorised numpy passes, linear in the number of ratings. Checked in tests/evaluator/test_agreement.py against
`krippendorff`, nltk's ``AnnotationTask``, scikit-learn and published worked examples.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

import numpy as np

from evaluator.errors import EvaluationError

NONE_FIT, UNCLEAR = "Z", "X"  # the label sets {"Z"} and {"X"} stand for the two verdicts without classes
DISTANCES: dict[str, str] = {
    "nominal": "δ = 0 if A = B else 1",
    "jaccard": "δ = 1 − |A∩B| / |A∪B|",
    "masi": "δ = 1 − |A∩B| / |A∪B| · M, M = 1 (A = B), 2/3 (A ⊂ B or B ⊂ A), 1/3 (overlap), 0 (disjoint)",
}
Label = frozenset[Hashable]
Ratings = Mapping[Hashable, Mapping[Hashable, AbstractSet[Hashable]]]
_EPS = 1e-12


@dataclass(frozen=True)
class PairAgreement:
    """Cohen's κ of two annotators on the `n_items` images both labelled; `observed` is their exact-match rate."""

    annotator_a: Hashable
    annotator_b: Hashable
    n_items: int
    observed: float
    kappa: float


@dataclass(frozen=True)
class ReferenceAgreement:
    """How often one annotator's label equals the lead's adjudicated label, over `n_items` adjudicated images."""

    annotator: Hashable
    n_items: int
    exact: float  # fraction of equal sets, in [0, 1]
    mean_jaccard: float  # mean |A∩R| / |A∪R|, in [0, 1]


@dataclass(frozen=True)
class AgreementSummary:
    """Every agreement number of one set of ratings; see `summarize_agreement`."""

    n_items: int  # images with at least one rating
    n_multi_rated: int  # images with ≥ 2 ratings: those Fleiss' κ, α and percent agreement use
    n_annotators: int
    n_ratings: int
    percent_agreement: float
    fleiss_kappa: float
    alpha: dict[str, float]  # distance name (DISTANCES) -> Krippendorff's α
    pairs: list[PairAgreement]  # every pair of annotators, also those with no image in common (n_items = 0)
    reference: list[ReferenceAgreement]  # one per annotator; empty without adjudications

    @property
    def n_pairs(self) -> int:
        """Pairs of annotators with at least one image in common."""
        return sum(1 for p in self.pairs if p.n_items)


@dataclass(frozen=True)
class _Coded:
    annotators: list[Hashable]
    codes: np.ndarray  # (n_items, n_annotators) int64 label codes; -1 = not rated
    labels: list[Label]  # code -> label set

    def packed(self) -> tuple[np.ndarray, np.ndarray]:
        """Each image's codes moved left, (n_items, max ratings) with -1 padding, and the ratings per image."""
        present = self.codes >= 0
        m = present.sum(axis=1)
        order = np.argsort(~present, axis=1, kind="stable")
        return np.take_along_axis(self.codes, order, axis=1)[:, : int(m.max(initial=0))], m

    @cached_property
    def _overlap(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(rows, cols, |A∩B|) of the code pairs whose sets intersect, from one sparse product, and each |A|."""
        from scipy.sparse import csr_matrix  # lazy: only set distances need it

        element_ids: dict[Hashable, int] = {}
        indices = [element_ids.setdefault(e, len(element_ids)) for label in self.labels for e in label]
        size = np.fromiter(map(len, self.labels), dtype=np.int64, count=len(self.labels))
        indptr = np.concatenate([[0], np.cumsum(size)])
        member = csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(self.labels), len(element_ids)))
        overlap = (member @ member.T).tocoo()
        return overlap.row.astype(np.int64), overlap.col.astype(np.int64), overlap.data, size

    def table(self, distance: str) -> _SimilarityTable:
        """The similarity table of this coding under `distance` (a key of DISTANCES)."""
        if distance == "nominal":
            return _SimilarityTable.identity(len(self.labels))
        rows, cols, shared, size = self._overlap
        sims = shared / (size[rows] + size[cols] - shared)
        if distance == "masi":  # equal sets share a code, so rows == cols is A = B
            subset = shared == np.minimum(size[rows], size[cols])
            sims = sims * np.where(rows == cols, 1.0, np.where(subset, 2 / 3, 1 / 3))
        return _SimilarityTable(len(self.labels), rows, cols, sims)


class _SimilarityTable:
    """sim(c, k) = 1 − δ(labels[c], labels[k]) for the code pairs whose sets intersect; every other pair has 0."""

    def __init__(self, n_codes: int, rows: np.ndarray, cols: np.ndarray, sims: np.ndarray) -> None:
        keys = rows * n_codes + cols
        order = np.argsort(keys)
        self._k = n_codes
        self._keys, self._sims, self._rows, self._cols = keys[order], sims[order], rows[order], cols[order]

    @classmethod
    def identity(cls, n_codes: int) -> _SimilarityTable:
        """The nominal table: sim(c, k) = 1 if c = k else 0."""
        diagonal = np.arange(n_codes)
        return cls(n_codes, diagonal, diagonal, np.ones(n_codes))

    def lookup(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Elementwise sim(a[i], b[i]) of two equally long code arrays."""
        key = a * self._k + b
        pos = np.minimum(np.searchsorted(self._keys, key), len(self._keys) - 1)
        return np.where(self._keys[pos] == key, self._sims[pos], 0.0)

    def mass(self, counts: np.ndarray) -> float:
        """Σ_c Σ_k n_c n_k sim(c, k) for label counts n (length = number of codes)."""
        return float(np.sum(counts[self._rows] * counts[self._cols] * self._sims))


def _encode(
    ratings: Ratings, reference: Mapping[Hashable, AbstractSet[Hashable]] | None = None
) -> tuple[_Coded, np.ndarray]:
    """Codes for `ratings` and, per image of `ratings`, the code of its reference label (-1 = none)."""
    if not isinstance(ratings, Mapping):
        raise EvaluationError(f"ratings must map image -> {{annotator: label set}}, got {type(ratings).__name__}")
    label_codes: dict[Label, int] = {}
    annotator_ids: dict[Hashable, int] = {}
    item_idx: list[int] = []
    annotator_idx: list[int] = []
    codes: list[int] = []
    for i, (item, row) in enumerate(ratings.items()):
        if not isinstance(row, Mapping):
            raise EvaluationError(
                f"ratings of image {item!r} must map annotator -> label set, got {type(row).__name__}"
            )
        for annotator, label in row.items():
            codes.append(label_codes.setdefault(_checked(label, item, annotator), len(label_codes)))
            annotator_idx.append(annotator_ids.setdefault(annotator, len(annotator_ids)))
            item_idx.append(i)
    ref = np.full(len(ratings), -1, dtype=np.int64)
    for i, item in enumerate(ratings):
        if reference is not None and item in reference:
            ref[i] = label_codes.setdefault(_checked(reference[item], item, "reference"), len(label_codes))
    annotators = _sorted(annotator_ids)
    column = np.array([annotator_ids[a] for a in annotators], dtype=np.int64)
    matrix = np.full((len(ratings), len(annotators)), -1, dtype=np.int64)
    matrix[item_idx, np.argsort(column)[annotator_idx]] = codes
    return _Coded(annotators, matrix, list(label_codes)), ref


def _checked(label: object, item: Hashable, who: Hashable) -> Label:
    if type(label) is frozenset and label:  # the common case, without the slower ABC check below
        return label
    if not isinstance(label, AbstractSet) or not label:
        raise EvaluationError(
            f"label of {who!r} on image {item!r} must be a non-empty set (classes, {{{NONE_FIT!r}}} or "
            f"{{{UNCLEAR!r}}}), got {label!r}"
        )
    return label if isinstance(label, frozenset) else frozenset(label)


def _sorted(names: Mapping[Hashable, int]) -> list[Hashable]:
    try:
        return sorted(names)  # type: ignore[type-var]
    except TypeError:  # mixed types: keep the order of first appearance
        return list(names)


def _chance_corrected(observed: float, expected: float) -> float:
    """(observed − expected) / (1 − expected) for agreement rates; NaN when 1 − expected is 0."""
    return (observed - expected) / (1.0 - expected) if 1.0 - expected > _EPS else math.nan


def _pair_similarity(packed: np.ndarray, table: _SimilarityTable) -> np.ndarray:
    """Per image, Σ sim(v_i, v_j) over its unordered pairs of ratings; shape (n_items,)."""
    total = np.zeros(len(packed))
    for i, j in combinations(range(packed.shape[1]), 2):
        both = np.flatnonzero(packed[:, j] >= 0)  # rows are packed left, so column j rated implies column i rated
        total[both] += table.lookup(packed[both, i], packed[both, j])
    return total


def _compute_alpha(packed: np.ndarray, m: np.ndarray, table: _SimilarityTable, n_codes: int) -> float:
    """α = 1 − D_o / D_e over pairable values (images with m_u ≥ 2 ratings, n = Σ m_u of them):
    D_o = (1/n) Σ_u Σ_{i≠j} δ(v_ui, v_uj) / (m_u − 1);  D_e = (1/(n(n − 1))) Σ_c Σ_k n_c n_k δ(c, k)."""
    keep = m >= 2
    packed, m = packed[keep], m[keep]
    n = float(m.sum())
    if n < 2:
        return math.nan
    ordered_disagreement = m * (m - 1) - 2 * _pair_similarity(packed, table)  # Σ_{i≠j} δ with δ = 1 − sim
    d_o = float(np.sum(ordered_disagreement / (m - 1))) / n
    counts = np.bincount(packed[packed >= 0], minlength=n_codes).astype(float)
    d_e = (n * n - table.mass(counts)) / (n * (n - 1))
    return 1.0 - d_o / d_e if d_e > _EPS else math.nan


def _compute_fleiss(packed: np.ndarray, m: np.ndarray, n_codes: int) -> tuple[float, float]:
    """(κ, P̄) of Fleiss (1971) with a varying number of raters m_i, as Gwet's Handbook of Inter-Rater Reliability
    generalises it, over the N images with m_i ≥ 2 (so P̄ and π use the same images):
    P_i = Σ_k n_ik (n_ik − 1) / (m_i (m_i − 1)),  P̄ = mean P_i,
    π_k = (1/N) Σ_i n_ik / m_i,  P_e = Σ_k π_k²,  κ = (P̄ − P_e) / (1 − P_e). Equals Fleiss' κ when m_i is constant."""
    keep = m >= 2
    packed, m = packed[keep], m[keep]
    if not len(m):
        return math.nan, math.nan
    agreeing_pairs = _pair_similarity(packed, _SimilarityTable.identity(n_codes))
    p_bar = float(np.mean(agreeing_pairs / (m * (m - 1) / 2)))
    rated = packed >= 0
    weights = np.broadcast_to((1.0 / m)[:, None], packed.shape)[rated]
    pi = np.bincount(packed[rated], weights=weights, minlength=n_codes) / len(m)
    return _chance_corrected(p_bar, float(np.sum(pi**2))), p_bar


def _compute_pairs(coded: _Coded) -> list[PairAgreement]:
    """Cohen (1960) for each pair: p_o = exact-match rate, p_e = Σ_k p_a(k) p_b(k), κ = (p_o − p_e) / (1 − p_e)."""
    out = []
    n_codes = len(coded.labels)
    for a, b in combinations(range(len(coded.annotators)), 2):
        both = np.flatnonzero((coded.codes[:, a] >= 0) & (coded.codes[:, b] >= 0))
        x, y, n = coded.codes[both, a], coded.codes[both, b], len(both)
        if n == 0:
            kappa = observed = math.nan
        else:
            observed = float(np.mean(x == y))
            expected = float(np.dot(np.bincount(x, minlength=n_codes), np.bincount(y, minlength=n_codes))) / n**2
            kappa = _chance_corrected(observed, expected)
        out.append(PairAgreement(coded.annotators[a], coded.annotators[b], n, observed, kappa))
    return out


def _compute_reference(coded: _Coded, ref: np.ndarray) -> list[ReferenceAgreement]:
    jaccard = coded.table("jaccard")
    out = []
    for a, annotator in enumerate(coded.annotators):
        both = np.flatnonzero((coded.codes[:, a] >= 0) & (ref >= 0))
        x, r = coded.codes[both, a], ref[both]
        exact = float(np.mean(x == r)) if len(both) else math.nan
        mean_jaccard = float(np.mean(jaccard.lookup(x, r))) if len(both) else math.nan
        out.append(ReferenceAgreement(annotator, len(both), exact, mean_jaccard))
    return out


def _check_distance(distance: str) -> None:
    if distance not in DISTANCES:
        raise EvaluationError(f"unknown distance {distance!r}; known: {', '.join(DISTANCES)}")


def cohen_kappa_pairs(ratings: Ratings) -> list[PairAgreement]:
    """Cohen's κ (nominal: exact set match) for every pair of annotators, on the images both labelled.

    κ = (p_o − p_e) / (1 − p_e), p_o the pair's exact-match rate and p_e = Σ_k p_a(k) p_b(k) from each one's own
    label frequencies on those images. A pair with no image in common has n_items = 0 and NaN numbers.
    """
    return _compute_pairs(_encode(ratings)[0])


def fleiss_kappa(ratings: Ratings) -> float:
    """Fleiss' κ (nominal) over images with ≥ 2 ratings, generalised to varying rater counts (see `_compute_fleiss`);
    at most 1, NaN if no image has 2 ratings or all ratings are one label."""
    coded = _encode(ratings)[0]
    return _compute_fleiss(*coded.packed(), len(coded.labels))[0]


def percent_agreement(ratings: Ratings) -> float:
    """Mean over images with ≥ 2 ratings of the fraction of their rating pairs that match exactly (Fleiss' P̄)."""
    coded = _encode(ratings)[0]
    return _compute_fleiss(*coded.packed(), len(coded.labels))[1]


def krippendorff_alpha(ratings: Ratings, distance: str = "nominal") -> float:
    """Krippendorff's α with a set distance from DISTANCES ("nominal", "jaccard" or "masi", Passonneau 2006).

    α = 1 − D_o / D_e over pairable values (see `_compute_alpha`); missing ratings are allowed and images with one
    rating drop out, as in Krippendorff (2011). At most 1; NaN when fewer than 2 pairable values or D_e = 0.
    """
    _check_distance(distance)
    coded = _encode(ratings)[0]
    table = coded.table(distance)
    return _compute_alpha(*coded.packed(), table, len(coded.labels))


def reference_agreement(
    ratings: Ratings, reference: Mapping[Hashable, AbstractSet[Hashable]]
) -> list[ReferenceAgreement]:
    """Per annotator, on the images that have a reference (adjudicated) label: exact-match rate and mean Jaccard."""
    return _compute_reference(*_encode(ratings, reference))


def summarize_agreement(
    ratings: Ratings, reference: Mapping[Hashable, AbstractSet[Hashable]] | None = None
) -> AgreementSummary:
    """All the numbers above in one pass over `ratings`; `reference` maps image -> adjudicated label set."""
    coded, ref = _encode(ratings, reference)
    packed, m = coded.packed()
    kappa, p_bar = _compute_fleiss(packed, m, len(coded.labels))
    alpha = {d: _compute_alpha(packed, m, coded.table(d), len(coded.labels)) for d in DISTANCES}
    return AgreementSummary(
        n_items=int(np.count_nonzero(m)),
        n_multi_rated=int(np.count_nonzero(m >= 2)),
        n_annotators=len(coded.annotators),
        n_ratings=int(m.sum()),
        percent_agreement=p_bar,
        fleiss_kappa=kappa,
        alpha=alpha,
        pairs=_compute_pairs(coded),
        reference=_compute_reference(coded, ref) if reference else [],
    )
