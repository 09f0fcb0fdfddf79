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

Both directions come from one pass over blocks of about CHUNK_VALUES similarities (a block of images against
every query: one matrix product per block for embeddings), so 50,000 images × 1,000 queries never hold the whole
matrix (200 MB in float32; a block is 32 MB). Image → text ranks are counted within a block. A text → image rank
needs the query's whole row, spread over every block: each row is counted in BINS bins of its range over the pass,
and the similarities that fall in a bin that may hold a relevant image's similarity are kept; a relevant image's
rank is the count of the bins above its own plus the kept similarities of its row at least its own. The counts
are exact: binning is monotone, and a relevant pair's bin is known before the pass from its similarity computed
alone (for float32 embeddings within the float32 error bound of a dot product, whose bins are all marked).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse

from evaluator.errors import EvaluationError
from evaluator.references import LabelSets

KS = (1, 5, 10)
CHUNK_VALUES = 8_000_000  # similarities per block (32 MB in float32)
BINS = 2048  # per query: the histogram of all queries is n_queries × BINS counts (16 MB for 1,000 queries)
RANGE_SAMPLE = 2048  # gallery images sampled to set each query's bin range, for embeddings
PAIR_CHUNK = 8192  # relevant pairs whose similarity is computed at once before the pass


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
    source = _Similarity.build(similarity, query_embeddings, image_embeddings, refs[0].n_images)
    gallery = np.logical_and.reduce([ref.counts > 0 for ref in refs])
    if not gallery.any():
        raise EvaluationError("no image is labelled by every reference: the gallery is empty")
    source = source.restricted(gallery)
    classes = _check_query_classes(query_classes, source.n_queries, refs[0].n_classes)
    ks = _check_ks(ks)
    labels = [ref.labels[gallery] for ref in refs]
    images = [_relevant_images(lab, classes, ref.n_classes) for lab, ref in zip(labels, refs, strict=True)]
    queries = [_relevant_queries(lab, classes, ref.n_classes) for lab, ref in zip(labels, refs, strict=True)]
    t2i, i2t = _score_in_one_pass(source, images, queries, ks)
    return [Retrieval(a, _spread(b, gallery)) for a, b in zip(t2i, i2t, strict=True)]


# ------------------------------------------------------------------------------------------- similarities


class _Similarity:
    """Blocks of the (n_queries, n_gallery) similarity, from a matrix or from normalised embeddings."""

    def __init__(self, matrix: np.ndarray | None, queries: np.ndarray | None, images: np.ndarray | None) -> None:
        self.matrix, self.queries, self.images = matrix, queries, images
        shape = matrix.shape if matrix is not None else (len(queries), len(images))  # type: ignore[arg-type]
        self.n_queries, self.n_gallery = int(shape[0]), int(shape[1])

    def embeddings(self) -> tuple[np.ndarray, np.ndarray]:
        """(queries, images) of a similarity built from embeddings; EvaluationError for one built from a matrix."""
        if self.queries is None or self.images is None:
            raise EvaluationError("this similarity was given as a matrix, not as embeddings")
        return self.queries, self.images

    @classmethod
    def build(
        cls, similarity: ArrayLike | None, queries: ArrayLike | None, images: ArrayLike | None, n_images: int
    ) -> _Similarity:
        if (similarity is None) == (queries is None or images is None) or (similarity is not None and (
            queries is not None or images is not None)):  # fmt: skip
            raise EvaluationError("give either similarity or both query_embeddings and image_embeddings")
        if similarity is not None:
            matrix = _finite(similarity, "similarity")
            if matrix.shape[1] != n_images:
                raise EvaluationError(f"similarity has {matrix.shape[1]} images but the reference has {n_images}")
            return cls(matrix, None, None)
        q, i = _normalised(queries, "query_embeddings"), _normalised(images, "image_embeddings")
        if q.shape[1] != i.shape[1]:
            raise EvaluationError(f"query_embeddings have {q.shape[1]} dimensions, image_embeddings {i.shape[1]}")
        if len(i) != n_images:
            raise EvaluationError(f"image_embeddings have {len(i)} images but the reference has {n_images}")
        return cls(None, q, i)

    def restricted(self, gallery: np.ndarray) -> _Similarity:
        if gallery.all():
            return self
        if self.matrix is not None:
            return _Similarity(self.matrix[:, gallery], None, None)
        queries, images = self.embeddings()
        return _Similarity(None, queries, images[gallery])

    def bin_range(self) -> tuple[np.ndarray, np.ndarray]:
        """Per query (low, high) of its similarities: exact for a matrix; for embeddings, from a sample of images
        widened by a tenth (values outside only fall into the end bins, which costs time, never exactness)."""
        if self.matrix is not None:
            return self.matrix.min(axis=1), self.matrix.max(axis=1)
        queries, images = self.embeddings()
        step = max(1, self.n_gallery // RANGE_SAMPLE)
        sample = queries @ images[::step].T
        low, high = sample.min(axis=1), sample.max(axis=1)
        margin = (high - low) / 10 + 4 * self.error_bound
        return low - margin, high + margin

    @property
    def error_bound(self) -> float:
        """How far a similarity of `image_blocks` may be from `pair_values`: 0 for a matrix; for unit vectors of d
        float32 components, twice the bound d·2⁻²⁴ of a float32 dot product in any order of summation."""
        return 0.0 if self.queries is None else 2 * self.queries.shape[1] * 2.0**-24

    def pair_values(self, queries: np.ndarray, images: np.ndarray) -> np.ndarray:
        """The similarities of the pairs (query, gallery image), within `error_bound` of the blocks' values."""
        if self.matrix is not None:
            return self.matrix[queries, images]
        embedded_queries, embedded_images = self.embeddings()
        out = np.empty(len(queries))
        for start in range(0, len(queries), PAIR_CHUNK):
            q, i = queries[start : start + PAIR_CHUNK], images[start : start + PAIR_CHUNK]
            out[start : start + PAIR_CHUNK] = np.einsum(
                "pd,pd->p", embedded_queries[q].astype(np.float64), embedded_images[i].astype(np.float64)
            )
        return out

    def image_blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first image, block (n_queries, n)) for consecutive blocks of gallery images, C-contiguous: a query's
        similarities lie together, so counting them into the query's bins stays within a small part of memory."""
        step = max(1, CHUNK_VALUES // self.n_queries)
        for start in range(0, self.n_gallery, step):
            if self.matrix is not None:
                yield start, np.ascontiguousarray(self.matrix[:, start : start + step])
            else:
                queries, images = self.embeddings()
                yield start, queries @ images[start : start + step].T


def _finite(values: ArrayLike, what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 2 or arr.dtype.kind not in "iuf" or 0 in arr.shape:
        raise EvaluationError(f"{what} must be a non-empty 2-D array of numbers, got {arr.dtype} {arr.shape}")
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        row, col = (int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise EvaluationError(f"{what}[{row}, {col}] is {arr[row, col]}; every value must be finite")
    return arr


def _normalised(values: ArrayLike | None, what: str) -> np.ndarray:
    arr = _finite(values, what).astype(np.float32)  # type: ignore[arg-type]
    norms = np.linalg.norm(arr, axis=1)
    if (norms == 0).any():
        raise EvaluationError(f"{what} row {int(np.argmax(norms == 0))} is all zeros; it has no direction")
    return arr / norms[:, None]


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
    by_class = sparse.csr_matrix((np.ones(len(rows), bool), (labels[rows, cols], rows)), shape=(n_classes, len(labels)))
    return by_class[classes]


def _relevant_queries(labels: np.ndarray, classes: np.ndarray, n_classes: int) -> np.ndarray:
    """(n_gallery, width) int: the queries of each image's classes, -1 where a class has no query (or padding)."""
    query_of = np.full(n_classes + 1, -1)  # index -1 (padding) reads the last entry
    query_of[classes] = np.arange(len(classes))
    return query_of[labels]


# -------------------------------------------------------------------------------------------- text → image


def _score_in_one_pass(
    source: _Similarity, images: list[sparse.csr_matrix], queries: list[np.ndarray], ks: tuple[int, ...]
) -> tuple[list[TextToImage], list[ImageToText]]:
    """Both directions for each reference from one pass over blocks of gallery images × every query.

    Image → text: each block holds whole columns of the queries, so ranks are counted within it. Text → image: a
    query's similarities are spread over every block, so each query's row is binned (BINS bins of its range) and
    counted per bin over all blocks; the bins that may hold a relevant image's similarity (its value, known before
    the pass within `error_bound`) are marked, and the similarities falling in marked bins are kept. After the
    pass a relevant image's rank is the count in the unmarked bins above its own plus the kept similarities of its
    row that are at least its own: exact, since binning is monotone and its own bin is marked.
    """
    low, high = source.bin_range()
    dtype = np.float64 if source.matrix is not None else np.float32
    low = low.astype(dtype)
    scale = (BINS / np.where(high > low, high - low, 1)).astype(dtype)
    pairs = [_pairs(rel) for rel in images]  # (query, image) of each relevant pair, by image
    marked = [_marked_bins(source, q, i, low, scale) for q, i in pairs]
    counts = np.zeros(source.n_queries * BINS, np.int64)
    kept: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in images]
    exact = [np.empty(len(q), dtype) for q, _ in pairs]
    first_i2t = [np.zeros(source.n_gallery, np.int64) for _ in images]
    offsets = (np.arange(source.n_queries) * BINS)[:, None]
    for start, block in source.image_blocks():
        stop = start + block.shape[1]
        bins = _bins(block, low[:, None], scale[:, None])
        bins += offsets
        counts += np.bincount(bins.ravel(), minlength=len(counts))
        for r, (q, i) in enumerate(pairs):
            first_i2t[r][start:stop] = _best_ranks(block.T, queries[r][start:stop])
            lo, hi = np.searchsorted(i, [start, stop])
            exact[r][lo:hi] = block[q[lo:hi], i[lo:hi] - start]
            rows, cols = np.nonzero(marked[r][bins])
            kept[r].append((rows, block[rows, cols]))
    t2i = []
    for r, (q, _) in enumerate(pairs):
        kept_queries = np.concatenate([c for c, _ in kept[r]])
        values = np.concatenate([v for _, v in kept[r]])
        own_bin = _bins(exact[r], low[q], scale[q]) + q * BINS
        ranks = _ranks(q, exact[r], own_bin, counts, marked[r], kept_queries, values, source.n_queries)
        t2i.append(_text_to_image_score(images[r], q, exact[r], ranks, ks, source.n_gallery))
    return t2i, [_image_to_text_score(ranks, ks) for ranks in first_i2t]


def _pairs(relevant: sparse.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """(query, gallery image) of each relevant pair, ordered by image."""
    coo = relevant.tocoo()
    order = np.lexsort((coo.row, coo.col))
    return coo.row[order].astype(np.int64), coo.col[order].astype(np.int64)


def _bins(values: np.ndarray, low: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Bin of each value (0..BINS-1), monotone in the value for one query: (value − low) · scale, truncated and
    clipped. `low` and `scale` are the values' queries' (broadcast), in the values' float type."""
    scaled = values - low
    scaled *= scale
    bins = scaled.astype(np.intp)
    return np.clip(bins, 0, BINS - 1, out=bins)


def _marked_bins(
    source: _Similarity, queries: np.ndarray, images: np.ndarray, low: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    """(n_queries · BINS,) bool: the bins that may hold a relevant pair's similarity."""
    marked = np.zeros(source.n_queries * BINS, bool)
    if not len(queries):
        return marked
    value, bound = source.pair_values(queries, images), source.error_bound
    first = _bins((value - bound).astype(low.dtype), low[queries], scale[queries])
    last = _bins((value + bound).astype(low.dtype), low[queries], scale[queries])
    for step in range(int((last - first).max()) + 1):
        marked[queries * BINS + np.minimum(first + step, last)] = True
    return marked


def _ranks(
    queries: np.ndarray,
    values: np.ndarray,
    own_bin: np.ndarray,
    counts: np.ndarray,
    marked: np.ndarray,
    kept_queries: np.ndarray,
    kept_values: np.ndarray,
    n_queries: int,
) -> np.ndarray:
    """Per relevant pair: how many gallery similarities of its query are ≥ its own (`_score_in_one_pass`)."""
    whole = np.where(marked, 0, counts).reshape(n_queries, BINS)
    above = np.cumsum(whole[:, ::-1], axis=1)[:, ::-1]  # above[q, b]: in unmarked bins ≥ b
    above = np.concatenate([above[:, 1:], np.zeros((n_queries, 1), above.dtype)], axis=1).ravel()
    per_query = np.bincount(kept_queries, minlength=n_queries)
    if values.dtype == np.float32:  # one int64 key per value, (query, value) in order: a plain sort
        keys = np.sort(_ordered_keys(kept_queries, kept_values))
        kept_ge = np.searchsorted(keys, (queries + 1) << 32) - np.searchsorted(keys, _ordered_keys(queries, values))
        return above[own_bin] + kept_ge
    merged_queries = np.concatenate([queries, kept_queries])
    merged_values = np.concatenate([values, kept_values.astype(values.dtype)])
    is_kept = np.concatenate([np.zeros(len(queries), bool), np.ones(len(kept_queries), bool)])
    order = np.lexsort((is_kept, merged_values, merged_queries))  # equal values: the pair first, so ≥ counts it
    kept_before = np.cumsum(is_kept[order]) - is_kept[order]  # kept values strictly before, in all queries
    before_query = np.cumsum(per_query) - per_query
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    in_query_before = kept_before[position[: len(queries)]] - before_query[queries]
    return above[own_bin] + per_query[queries] - in_query_before


def _ordered_keys(queries: np.ndarray, values: np.ndarray) -> np.ndarray:
    """int64 keys ordered as (query, value) for float32 values: the query in the high 32 bits, then the value's bits
    mapped to an unsigned integer of the same order (negative floats reversed; −0 taken as +0)."""
    bits = (values.astype(np.float32) + np.float32(0)).view(np.uint32).astype(np.int64)
    ordered = np.where(bits >= 2**31, 2**32 - 1 - bits, bits + 2**31)
    return (queries.astype(np.int64) << 32) | ordered


def _text_to_image_score(
    relevant: sparse.csr_matrix,
    queries: np.ndarray,
    values: np.ndarray,
    ranks: np.ndarray,
    ks: tuple[int, ...],
    n_gallery: int,
) -> TextToImage:
    n_q = relevant.shape[0]
    ap, first = np.full(n_q, np.nan), np.zeros(n_q, np.int64)
    found = {k: np.zeros(n_q) for k in ks}
    if len(queries):
        _query_scores(queries, values, ranks, ap, first, found)
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


def _query_scores(
    queries: np.ndarray,
    values: np.ndarray,
    ranks: np.ndarray,
    ap: np.ndarray,
    first: np.ndarray,
    found: dict[int, np.ndarray],
) -> None:
    """AP, best rank and relevant images within each K of the queries of one block (items grouped by query)."""
    order = np.lexsort((-values, queries))  # per query, most similar first
    q, v, rank = queries[order], values[order], ranks[order]
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    group = np.cumsum(np.r_[True, q[1:] != q[:-1]]) - 1
    # relevant items at least as similar: up to the last item of the same value in the group
    new_value = np.r_[True, (q[1:] != q[:-1]) | (v[1:] != v[:-1])]
    run_end = np.r_[np.flatnonzero(new_value)[1:], len(q)]
    run = np.cumsum(new_value) - 1
    relevant_ge = run_end[run] - starts[group]
    sizes = np.diff(np.r_[starts, len(q)])
    ap[q[starts]] = np.add.reduceat(relevant_ge / rank, starts) / sizes
    # place with irrelevant items ahead at ties: the m-th relevant image after the irrelevant ones at least as similar
    place = np.arange(len(q)) - starts[group] + 1 + (rank - relevant_ge)
    first[q[starts]] = place[starts]
    for k, counts in found.items():
        counts[q[starts]] = np.add.reduceat(place <= k, starts)


def _mean(values: np.ndarray, n: int) -> float:
    return float(np.sum(values) / n) if n else float("nan")


# -------------------------------------------------------------------------------------------- image → text


def _image_to_text_score(ranks: np.ndarray, ks: tuple[int, ...]) -> ImageToText:
    has = ranks > 0
    n = int(has.sum())
    return ImageToText({k: _mean(ranks[has] <= k, n) for k in ks}, ranks, n, len(ranks) - n)


def _best_ranks(block: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Per image of the block: the place of its best relevant query (1 + the irrelevant queries at least as
    similar), 0 when it has none."""
    valid = queries >= 0
    rows_all = np.arange(len(block))[:, None]
    values = np.where(valid, block[rows_all, np.where(valid, queries, 0)], -np.inf)  # (n, width)
    best = np.full(len(block), np.iinfo(np.int64).max)
    for col in range(queries.shape[1]):
        rows = np.flatnonzero(valid[:, col])
        if not len(rows):
            continue
        part = block if len(rows) == len(block) else block[rows]
        value = values[rows, col]
        relevant_ge = np.count_nonzero(values[rows] >= value[:, None], axis=1)
        irrelevant_ge = np.count_nonzero(part >= value[:, None], axis=1) - relevant_ge
        best[rows] = np.minimum(best[rows], irrelevant_ge + 1)
    return np.where(best == np.iinfo(np.int64).max, 0, best)


def _spread(score: ImageToText, gallery: np.ndarray) -> ImageToText:
    """Per-image ranks over all images of the reference (0 outside the gallery)."""
    ranks = np.zeros(len(gallery), np.int64)
    ranks[gallery] = score.first_rank
    return ImageToText(score.recall_at_k, ranks, score.n_images, score.n_without_relevant, int((~gallery).sum()))
