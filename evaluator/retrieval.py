"""Retrieval scores on multi-label references: text → image with one query per class, and image → text over the
class names.

Input is a similarity of every query (a class's text, e.g. "a photo of a {name}") to every image: either the
embeddings of both, compared by the dot product of L2-normalised rows (cosine similarity, as CLIP and SigLIP
rank), or a similarity matrix (n_queries, n_images) the caller computed. Query q stands for class
`query_classes[q]` (default: class q), one query per class. An image is relevant to a query when the query's class
is in the image's label set; images whose set is empty are left out of the gallery (as they are excluded from
scoring), so two references are compared on the images both label.

Ties. R@K and item recall@K rank by similarity, most similar first, with irrelevant items ahead of relevant ones
at equal similarity: the worst tie-break, so a tie at the K-th place is never a hit. AP takes ties as
scikit-learn's `average_precision_score` does: items of equal similarity enter the ranking together. Without ties
(float embeddings, in practice) both are the plain sort.

text → image   per query with at least one relevant image (others are counted apart, `n_without_relevant`):
    R@K              a hit when at least one relevant image ranks within the top K; the share of queries with a
                     hit (CLIP_benchmark's "recall@K");
    item recall@K    the share of the query's relevant images that rank within the top K, averaged over queries
                     (the textbook recall at K; with 50 relevant images per class it is at most K / 50);
    AP               average precision over the full ranking: (1 / R) Σ over the R relevant images of precision
                     at the image, i.e. (relevant images at least as similar) / (images at least as similar);
                     mAP is its mean over the queries.
image → text   per gallery image whose set holds a class that has a query: R@K, a hit when one of its classes ranks
               within the top K of the queries.

The exact ranks come from one pass over blocks of the similarities (`evaluator.retrieval_ranks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError
from evaluator.references import LabelSets
from evaluator.retrieval_ranks import PairRanks, Similarity, one_pass_ranks, query_scores

if TYPE_CHECKING:
    from scipy import sparse

KS = (1, 5, 10)


@dataclass(frozen=True, eq=False)
class TextToImage:
    """Text → image scores (module docstring); per-query arrays are (n_queries,)."""

    recall_at_k: dict[int, float]
    item_recall_at_k: dict[int, float]
    mean_ap: float
    average_precision: np.ndarray  # NaN for a query without a relevant image
    first_rank: np.ndarray  # place of the best relevant image (ties: irrelevant ahead); 0 without one
    n_queries: int  # queries with at least one relevant image: the denominators
    n_without_relevant: int
    n_gallery: int


@dataclass(frozen=True, eq=False)
class ImageToText:
    """Image → text scores (module docstring); `first_rank` (n_images,) is the place of the image's best-ranked
    class (ties: irrelevant ahead), 0 for an image not scored (empty set, or none of its classes has a query)."""

    recall_at_k: dict[int, float]
    first_rank: np.ndarray
    n_images: int  # scored: the denominator
    n_without_relevant: int  # in the gallery, but none of its classes has a query
    n_excluded: int = 0  # outside the gallery


@dataclass(frozen=True, eq=False)
class Retrieval:
    """Both directions against one reference."""

    text_to_image: TextToImage
    image_to_text: ImageToText


def retrieval_scores(
    reference: LabelSets,
    *,
    similarity: ArrayLike | None = None,
    query_embeddings: ArrayLike | None = None,
    image_embeddings: ArrayLike | None = None,
    query_classes: ArrayLike | None = None,
    ks: Sequence[int] = KS,
) -> Retrieval:
    """Text → image and image → text scores against `reference`, from `similarity` (n_queries, n_images) or from
    `query_embeddings` (n_queries, d) and `image_embeddings` (n_images, d); `query_classes` (n_queries,) distinct
    classes (default: query q is class q)."""
    return compare_retrieval(
        [reference], similarity=similarity, query_embeddings=query_embeddings,
        image_embeddings=image_embeddings, query_classes=query_classes, ks=ks,
    )[0]  # fmt: skip


def compare_retrieval(
    references: Sequence[LabelSets],
    *,
    similarity: ArrayLike | None = None,
    query_embeddings: ArrayLike | None = None,
    image_embeddings: ArrayLike | None = None,
    query_classes: ArrayLike | None = None,
    ks: Sequence[int] = KS,
) -> list[Retrieval]:
    """The same similarities against each reference (ImGT, a ReGT snapshot) on one gallery: the images every
    reference labels. One pass over the similarities serves all references. Arguments as `retrieval_scores`."""
    refs = _check_references(references)
    source = Similarity.build(similarity, query_embeddings, image_embeddings, refs[0].n_images)
    gallery = np.logical_and.reduce([ref.counts > 0 for ref in refs])
    if not gallery.any():
        raise EvaluationError("no image is labelled by every reference: the gallery is empty")
    source = source.restricted(gallery)
    classes = _check_query_classes(query_classes, source.n_queries, refs[0].n_classes)
    ks = _check_ks(ks)
    labels = [ref.labels[gallery] for ref in refs]
    images = [_relevant_images(lab, classes, ref.n_classes) for lab, ref in zip(labels, refs, strict=True)]
    queries = [_relevant_queries(lab, classes, ref.n_classes) for lab, ref in zip(labels, refs, strict=True)]
    pairs, first_i2t = one_pass_ranks(source, images, queries)
    t2i = [_text_to_image_score(rel, p, ks, source.n_gallery) for rel, p in zip(images, pairs, strict=True)]
    return [Retrieval(a, _spread(_image_to_text_score(b, ks), gallery)) for a, b in zip(t2i, first_i2t, strict=True)]


# --------------------------------------------------------------------------------------------- relevance


def _check_references(references: Sequence[LabelSets]) -> list[LabelSets]:
    refs = list(references)
    if not refs or not all(isinstance(ref, LabelSets) for ref in refs):
        raise EvaluationError("references must be one or more LabelSets")
    for ref in refs[1:]:
        if (ref.n_images, ref.n_classes) != (refs[0].n_images, refs[0].n_classes):
            raise EvaluationError(
                f"references differ: {refs[0].n_images} images of {refs[0].n_classes} classes against "
                f"{ref.n_images} of {ref.n_classes}"
            )
    return refs


def _check_query_classes(query_classes: ArrayLike | None, n_queries: int, n_classes: int) -> np.ndarray:
    if query_classes is None:
        if n_queries > n_classes:
            raise EvaluationError(f"{n_queries} queries but {n_classes} classes; pass query_classes")
        return np.arange(n_queries)
    arr = np.asarray(query_classes)
    if arr.shape != (n_queries,) or arr.dtype.kind not in "iu":
        raise EvaluationError(f"query_classes must be {n_queries} class indices, got {arr.dtype} {arr.shape}")
    bad = np.flatnonzero((arr < 0) | (arr >= n_classes))
    if len(bad):
        raise EvaluationError(f"query {int(bad[0])} is of class {int(arr[bad[0]])}, outside 0..{n_classes - 1}")
    values, counts = np.unique(arr, return_counts=True)
    if (counts > 1).any():
        raise EvaluationError(f"class {int(values[np.argmax(counts > 1)])} has {counts.max()} queries; one per class")
    return arr.astype(np.int64)


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    values = tuple(ks)
    if not values or any(isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1 for k in values):
        raise EvaluationError(f"ks must be positive integers, e.g. (1, 5, 10), got {values!r}")
    return tuple(sorted({int(k) for k in values}))


def _relevant_images(labels: np.ndarray, classes: np.ndarray, n_classes: int) -> sparse.csr_matrix:
    """(n_queries, n_gallery) CSR: query q's row holds the gallery images whose set has its class."""
    rows, cols = np.nonzero(labels >= 0)
    from scipy import sparse  # here, not at import: every evaluation imports this module

    by_class = sparse.csr_matrix((np.ones(len(rows), bool), (labels[rows, cols], rows)), shape=(n_classes, len(labels)))
    return by_class[classes]


def _relevant_queries(labels: np.ndarray, classes: np.ndarray, n_classes: int) -> np.ndarray:
    """(n_gallery, width) int: the queries of each image's classes, -1 where a class has no query (or padding)."""
    query_of = np.full(n_classes + 1, -1)  # index -1 (padding) reads the last entry
    query_of[classes] = np.arange(len(classes))
    return query_of[labels]


# --------------------------------------------------------------------------------------------------- scores


def _text_to_image_score(
    relevant: sparse.csr_matrix, pairs: PairRanks, ks: tuple[int, ...], n_gallery: int
) -> TextToImage:
    n_q = relevant.shape[0]
    ap, first = np.full(n_q, np.nan), np.zeros(n_q, np.int64)
    found = {k: np.zeros(n_q) for k in ks}
    if len(pairs.queries):
        query_scores(pairs.queries, pairs.values, pairs.ranks, ap, first, found)
    sizes = np.diff(relevant.indptr)
    has = sizes > 0
    n = int(has.sum())
    return TextToImage(
        {k: _mean(first[has] <= k, n) for k in ks},
        {k: _mean(found[k][has] / sizes[has], n) for k in ks},
        _mean(ap[has], n),
        ap,
        first,
        n,
        n_q - n,
        n_gallery,
    )


def _mean(values: np.ndarray, n: int) -> float:
    return float(np.sum(values) / n) if n else float("nan")


def _image_to_text_score(ranks: np.ndarray, ks: tuple[int, ...]) -> ImageToText:
    has = ranks > 0
    n = int(has.sum())
    return ImageToText({k: _mean(ranks[has] <= k, n) for k in ks}, ranks, n, len(ranks) - n)


def _spread(score: ImageToText, gallery: np.ndarray) -> ImageToText:
    """Per-image ranks over all images of the reference (0 outside the gallery)."""
    ranks = np.zeros(len(gallery), np.int64)
    ranks[gallery] = score.first_rank
    return ImageToText(score.recall_at_k, ranks, score.n_images, score.n_without_relevant, int((~gallery).sum()))
