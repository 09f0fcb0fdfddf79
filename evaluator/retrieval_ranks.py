"""Exact ranks of every relevant (query, image) pair for `evaluator.retrieval`, in one pass over blocks of the
similarities.

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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError

if TYPE_CHECKING:
    from scipy import sparse

CHUNK_VALUES = 8_000_000  # similarities per block (32 MB in float32)
BINS = 2048  # per query: the histogram of all queries is n_queries × BINS counts (16 MB for 1,000 queries)
RANGE_SAMPLE = 2048  # gallery images sampled to set each query's bin range, for embeddings
PAIR_CHUNK = 8192  # relevant pairs whose similarity is computed at once before the pass


@dataclass(frozen=True, eq=False)
class PairRanks:
    """One reference's relevant pairs, ordered by image: `queries`, `values` (their similarities, as the blocks
    hold them) and `ranks` (how many gallery similarities of the query are ≥ the pair's own), all (n_pairs,)."""

    queries: np.ndarray
    values: np.ndarray
    ranks: np.ndarray


class Similarity:
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
    ) -> Similarity:
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

    def restricted(self, gallery: np.ndarray) -> Similarity:
        if gallery.all():
            return self
        if self.matrix is not None:
            return Similarity(self.matrix[:, gallery], None, None)
        queries, images = self.embeddings()
        return Similarity(None, queries, images[gallery])

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


def one_pass_ranks(
    source: Similarity, images: list[sparse.csr_matrix], queries: list[np.ndarray]
) -> tuple[list[PairRanks], list[np.ndarray]]:
    """Both directions for each reference from one pass over blocks of gallery images × every query: the ranks of
    its relevant pairs (text → image), and per gallery image the place of its best relevant query (image → text,
    0 without one).

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
    out = []
    for r, (q, _) in enumerate(pairs):
        kept_queries = np.concatenate([c for c, _ in kept[r]])
        values = np.concatenate([v for _, v in kept[r]])
        own_bin = _bins(exact[r], low[q], scale[q]) + q * BINS
        ranks = _ranks(q, exact[r], own_bin, counts, marked[r], kept_queries, values, source.n_queries)
        out.append(PairRanks(q, exact[r], ranks))
    return out, first_i2t


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
    source: Similarity, queries: np.ndarray, images: np.ndarray, low: np.ndarray, scale: np.ndarray
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
    """Per relevant pair: how many gallery similarities of its query are ≥ its own (`one_pass_ranks`)."""
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


def query_scores(
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
