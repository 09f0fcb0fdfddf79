"""Paired comparisons: two accuracies on the same images, and a bootstrap that resamples images jointly.

A gain from reference a (ImGT) to reference b (ReaL, a ReGT snapshot) is only a gain if both are measured on the
same images: ImGT scores all 50,000 ImageNet val images, ReaL the 46,837 it labels, and the images ReaL leaves out
are harder than the rest. So a difference is taken on the images both references score, image by image.

paired difference   accuracy_b − accuracy_a over the n common images. Each image falls in one of four cells (right
                    under both, under a only, under b only, under neither); resampling the n images with
                    replacement draws the cell counts from Multinomial(n, observed shares) exactly, so the paired
                    bootstrap is one vectorised multinomial draw per model, not n_boot × n index draws. The interval
                    is the percentile interval of (n_only_b − n_only_a) / n over the resamples. When no image is
                    discordant (right under exactly one reference) every resample gives 0; the interval is then
                    ± the Wilson upper bound of 0 discordant images in n (|difference| ≤ discordant share), so it
                    is never the degenerate 0–0.
joint bootstrap     `JointBootstrap(n_images, n_boot, seed)` draws n_boot resamples of the images once (from the
                    seed, chunk by chunk), and every statistic computed through it — each model's accuracy under
                    each reference, a rank, a reliability part — sees the same resamples. Statistics of different
                    models and references are then resampled jointly, as the ranking and the comparison between
                    models need; two instances with the same (n_images, n_boot, seed) draw the same resamples.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from evaluator import stored_resamples
from evaluator.errors import EvaluationError
from evaluator.index_draws import MAX_IMAGES, IndexDraws
from evaluator.intervals import LEVEL, wilson_interval
from evaluator.references import check_boot, check_mask

N_BOOT = 1000
CHUNK_VALUES = 8_000_000  # resample counts held at once (32 MB of float32)
KEPT_BYTES = 320_000_000  # resample counts `resamples_kept` holds at most (ImageNet val's 50,000 x 1,000: 50 MB)
KEPT_MAX = 255  # counts kept as bytes up to this; a set with a larger count (a handful of images) is kept as float32

_kept: ContextVar[dict[tuple[int, int, int], list[np.ndarray]] | None] = ContextVar("kept_resamples", default=None)
_scratch: ContextVar[dict[str, np.ndarray] | None] = ContextVar("scratch_buffers", default=None)
_spare: ContextVar[list[np.ndarray] | None] = ContextVar("spare_count_buffers", default=None)
_folder: ContextVar[Path | None] = ContextVar("resamples_folder", default=None)


@contextmanager
def resamples_kept(folder: Path | None = None) -> Iterator[None]:
    """Within the block, the resample counts of each (n_images, n_boot, seed) are drawn once and read again from
    memory by every `JointBootstrap` with those settings, the same numbers: for the many statistics of one
    evaluation over the same images. They are kept as bytes (a count above KEPT_MAX widens its set to float32),
    at most KEPT_BYTES, the oldest dropped first, and handed out a chunk at a time in float32 buffers reused from
    pass to pass; outside the block every call draws them again and nothing is held. Work buffers (`scratch`)
    are reused within the block too.

    With a `folder` (a workspace's cache), a set of bytes is also read from and written to it
    (`evaluator.stored_resamples`): the next process draws nothing it already drew."""
    token, scratch_token, spare_token = _kept.set({}), _scratch.set({}), _spare.set([])
    folder_token = _folder.set(folder)
    try:
        yield
    finally:
        _folder.reset(folder_token)
        _kept.reset(token)
        _scratch.reset(scratch_token)
        _spare.reset(spare_token)


def kept_folder() -> Path | None:
    """The folder of the enclosing `resamples_kept(folder)`; None outside one or without a folder."""
    return _folder.get()


def scratch(name: str, shape: tuple[int, ...], dtype: type[np.generic]) -> np.ndarray:
    """An uninitialised array of `shape`. Inside `resamples_kept` the memory of the last array of that `name` is
    handed out again (grown when too small): the work buffers of one pass over the resamples, so each new pass
    does not have the system map and clear tens of megabytes again. The caller must be done with the previous
    array of the name."""
    held = _scratch.get()
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if held is None:
        return np.empty(shape, dtype)
    if name not in held or held[name].nbytes < size:
        held[name] = np.empty(size, np.uint8)
    return held[name][:size].view(dtype).reshape(shape)


@dataclass(frozen=True)
class PairedDifference:
    """Accuracy under reference b minus under reference a on the same `n_common` images; bounds in [−1, 1].

    `n_only_a` images are right under a only, `n_only_b` under b only. NaN when n_common = 0.
    """

    n_common: int
    n_correct_a: int
    n_correct_b: int
    n_only_a: int
    n_only_b: int
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def accuracy_a(self) -> float:
        return self.n_correct_a / self.n_common if self.n_common else float("nan")

    @property
    def accuracy_b(self) -> float:
        return self.n_correct_b / self.n_common if self.n_common else float("nan")

    @property
    def difference(self) -> float:
        """accuracy_b − accuracy_a, in [−1, 1]."""
        return (self.n_only_b - self.n_only_a) / self.n_common if self.n_common else float("nan")


@dataclass(frozen=True, eq=False)
class BatchPairedDifference:
    """Paired differences of n_models models at once: every array is (n_models,)."""

    n_common: np.ndarray
    n_correct_a: np.ndarray
    n_correct_b: np.ndarray
    n_only_a: np.ndarray
    n_only_b: np.ndarray
    ci_low: np.ndarray | None = None
    ci_high: np.ndarray | None = None

    @property
    def difference(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (self.n_only_b - self.n_only_a) / self.n_common

    def row(self, i: int) -> PairedDifference:
        low, high = self.ci_low, self.ci_high
        return PairedDifference(
            int(self.n_common[i]),
            int(self.n_correct_a[i]),
            int(self.n_correct_b[i]),
            int(self.n_only_a[i]),
            int(self.n_only_b[i]),
            None if low is None else float(low[i]),
            None if high is None else float(high[i]),
        )


def paired_difference(
    correct_a: ArrayLike,
    correct_b: ArrayLike,
    common: ArrayLike | None = None,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> PairedDifference:
    """accuracy_b − accuracy_a of one model on the images in `common` (default: all), with its paired bootstrap
    interval. `correct_a`, `correct_b`, `common`: bool (n_images,). `n_boot` = 0 skips the interval."""
    a = check_mask(correct_a, "correct_a", np.shape(correct_a))
    if a.ndim != 1:
        raise EvaluationError(f"correct_a must be 1-D (n_images,), got shape {a.shape}; use paired_many for models")
    b = check_mask(correct_b, "correct_b", a.shape)
    both = None if common is None else check_mask(common, "common", a.shape)[None]
    return paired_many(a[None], b[None], both, n_boot=n_boot, level=level, seed=seed).row(0)


def paired_many(
    correct_a: ArrayLike,
    correct_b: ArrayLike,
    common: ArrayLike | None = None,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> BatchPairedDifference:
    """Paired differences of n_models models: `correct_a`, `correct_b` bool (n_models, n_images); `common` bool
    (n_models, n_images) or (n_images,) marks each model's images scored under both references (default all)."""
    a = check_mask(correct_a, "correct_a", np.shape(correct_a))
    if a.ndim != 2:
        raise EvaluationError(f"correct_a must be (n_models, n_images), got shape {a.shape}")
    b = check_mask(correct_b, "correct_b", a.shape)
    both = np.ones(a.shape, bool) if common is None else _common_mask(common, a.shape)
    check_boot(n_boot)
    counts = _cell_counts(a, b, both)
    if not n_boot:
        return counts
    low, high = _paired_interval(counts, n_boot, level, seed)
    return replace(counts, ci_low=low, ci_high=high)


def _common_mask(common: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    if np.ndim(common) == 1:
        return np.broadcast_to(check_mask(common, "common", shape[1:]), shape)
    return check_mask(common, "common", shape)


def _cell_counts(a: np.ndarray, b: np.ndarray, common: np.ndarray) -> BatchPairedDifference:
    a, b = a & common, b & common
    return BatchPairedDifference(
        np.count_nonzero(common, axis=1),
        np.count_nonzero(a, axis=1),
        np.count_nonzero(b, axis=1),
        np.count_nonzero(a & ~b, axis=1),
        np.count_nonzero(b & ~a, axis=1),
    )


def _paired_interval(
    counts: BatchPairedDifference, n_boot: int, level: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of the resampled difference per model (module docstring); NaN where n_common = 0."""
    n = counts.n_common
    safe = np.maximum(n, 1)
    shares = np.stack([counts.n_only_a, counts.n_only_b, n - counts.n_only_a - counts.n_only_b], axis=1) / safe[:, None]
    shares[n == 0] = (0.0, 0.0, 1.0)
    draws = np.random.default_rng(seed).multinomial(safe, shares, size=(n_boot, len(n)))  # (n_boot, n_models, 3)
    diffs = (draws[..., 1] - draws[..., 0]) / safe
    low, high = np.quantile(diffs, [(1 - level) / 2, (1 + level) / 2], axis=0)
    flat = (counts.n_only_a + counts.n_only_b) == 0
    bound = wilson_interval(np.zeros_like(n), safe, level)[1]
    low, high = np.where(flat, -bound, low), np.where(flat, bound, high)
    empty = n == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


class JointBootstrap:
    """`n_boot` resamples, with replacement, of `n_images` images, drawn from `seed` (module docstring).

    The resamples are regenerated on each call (chunk by chunk, never all in memory), identically.
    """

    def __init__(self, n_images: int, n_boot: int = N_BOOT, seed: int = 0) -> None:
        if isinstance(n_images, bool) or not isinstance(n_images, int | np.integer) or n_images < 1:
            raise EvaluationError(f"n_images must be a positive integer, got {n_images!r}")
        check_boot(n_boot, allow_zero=False)
        self.n_images, self.n_boot, self.seed = int(n_images), int(n_boot), int(seed)
        self.chunk = max(1, CHUNK_VALUES // self.n_images)

    def counts(self) -> Iterator[np.ndarray]:
        """(chunk, n_images) float32 arrays: how often each image is drawn in each resample; n_boot rows in all.
        Inside `resamples_kept` they are read from memory, read-only, and each is valid only until the next
        chunk is asked for (one buffer is filled again): a caller holds no chunk across its loop."""
        chunks = self._held()
        if chunks is None:
            yield from self._draw()
        elif chunks[0].dtype == np.float32:
            yield from chunks
        else:
            yield from _as_float32(chunks)

    def columns(self, *picks: np.ndarray) -> Iterator[tuple[np.ndarray, ...]]:
        """Per chunk of `counts`, the counts of the images each of `picks` (int index arrays) names, as
        C-contiguous (chunk, len(pick)) float32 arrays, each valid only until the next chunk. The same numbers as
        `counts()[:, pick]`; a set kept as bytes is picked before it is widened, so a pass over part of the images
        widens that part only."""
        chunks = self._held()
        for chunk in self._draw() if chunks is None else chunks:
            out = []
            for i, pick in enumerate(picks):
                into = scratch(f"paired.columns.{i}", (len(chunk), len(pick)), np.float32)
                if chunk.dtype == np.float32:
                    np.take(chunk, pick, axis=1, out=into)
                else:
                    np.copyto(
                        into, np.take(chunk, pick, axis=1, out=scratch("paired.columns.bytes", into.shape, np.uint8))
                    )
                out.append(into)
            yield tuple(out)

    def _held(self) -> list[np.ndarray] | None:
        """Inside `resamples_kept`, the resample counts as chunks held in memory (uint8, or float32 where a count
        exceeds KEPT_MAX), drawn or read now when not held yet; None outside it or for a set too large to hold."""
        kept, key = _kept.get(), (self.n_images, self.n_boot, self.seed)
        if kept is None or self.n_images * self.n_boot > KEPT_BYTES:
            return None
        chunks = kept.get(key)
        if chunks is None:
            chunks = self._bytes_kept() or list(self._draw())
            for chunk in chunks:
                chunk.setflags(write=False)
            need = sum(chunk.nbytes for chunk in chunks)
            if need <= KEPT_BYTES:  # a set widened to float32 may not fit: used for this pass only
                while kept and sum(c.nbytes for held in kept.values() for c in held) + need > KEPT_BYTES:
                    del kept[next(iter(kept))]  # the oldest first
                kept[key] = chunks
        return chunks

    def _bytes_kept(self) -> list[np.ndarray] | None:
        """The counts of `_draw` as uint8 chunks (views of one array), read from the folder of `resamples_kept`
        or drawn (and then stored there); None where a count exceeds KEPT_MAX (or `_draw_whole` draws)."""
        folder = _folder.get()
        whole = None if folder is None else stored_resamples.read(folder, self.n_images, self.n_boot, self.seed)
        if whole is None:
            whole = self._draw_bytes()
            if whole is None:
                return None
            if folder is not None:
                stored_resamples.write(folder, whole, self.seed)
        return [whole[start : start + self.chunk] for start in range(0, self.n_boot, self.chunk)]

    def _draw_bytes(self) -> np.ndarray | None:
        """The counts of `_draw` as one (n_boot, n_images) uint8 array, or None where a count exceeds KEPT_MAX (or
        `_draw_whole` draws)."""
        n = self.n_images
        if not 2 <= n <= MAX_IMAGES:
            return None
        draws, counts = IndexDraws(self.seed, n), np.empty((self.n_boot, n), np.uint8)
        for row in counts:
            drawn = np.bincount(draws.take(n), minlength=n)
            if n > KEPT_MAX and drawn.max() > KEPT_MAX:
                return None
            row[...] = drawn
        return counts

    def _draw(self) -> Iterator[np.ndarray]:
        n = self.n_images
        if not 2 <= n <= MAX_IMAGES:
            yield from self._draw_whole()
            return
        # the draws of `rng.integers(0, n, size=(size, n), dtype=np.int32)`, one resample at a time
        # (`evaluator.index_draws`): no chunk-sized array of draws for the system to map and clear
        draws = IndexDraws(self.seed, n)
        for start in range(0, self.n_boot, self.chunk):
            size = min(self.chunk, self.n_boot - start)
            counts = np.empty((size, n), np.float32)
            for row in range(size):  # one resample at a time: its counts stay in cache while they are added up
                counts[row] = np.bincount(draws.take(n), minlength=n)
            yield counts

    def _draw_whole(self) -> Iterator[np.ndarray]:
        """`_draw` for one image or more than MAX_IMAGES: numpy's integers for a chunk at once."""
        rng = np.random.default_rng(self.seed)
        n = self.n_images
        dtype = np.int32 if n < 2**31 else np.int64
        for start in range(0, self.n_boot, self.chunk):
            size = min(self.chunk, self.n_boot - start)
            draws = rng.integers(0, n, size=(size, n), dtype=dtype)
            counts = np.empty((size, n), np.float32)
            for row in range(size):
                counts[row] = np.bincount(draws[row], minlength=n)
            yield counts

    def means(self, values: ArrayLike, mask: ArrayLike | None = None) -> np.ndarray:
        """(n_boot, n_columns): the mean of each column of `values` over its `mask`ed images in each resample.

        `values` (n_columns, n_images) numbers or bools (an accuracy: the per-image correctness); `mask` bool
        (n_columns, n_images) or (n_images,), the images each column is taken over (default: all). NaN where a
        resample holds none of a column's images.
        """
        arr = np.asarray(values)
        if arr.ndim != 2 or arr.shape[1] != self.n_images or arr.dtype.kind not in "biuf":
            raise EvaluationError(f"values must be numbers of shape (n_columns, {self.n_images}), got {arr.shape}")
        if mask is None:
            keep = np.ones(self.n_images, bool)
        else:
            keep = check_mask(mask, "mask", np.shape(mask))
            if keep.shape not in ((self.n_images,), arr.shape):
                raise EvaluationError(f"mask has shape {keep.shape}; expected ({self.n_images},) or {arr.shape}")
        # (columns, images) @ (images, resamples) keeps the long image axis contiguous on both sides for BLAS
        weighted = np.ascontiguousarray(np.where(keep, arr, 0), dtype=np.float32)
        seen_by = np.ascontiguousarray(keep, dtype=np.float32)
        out = []
        for counts in self.counts():
            totals, seen = weighted @ counts.T, seen_by @ counts.T  # (columns, chunk), and (chunk,) or (columns, chunk)
            with np.errstate(invalid="ignore", divide="ignore"):
                out.append((totals / seen).T)
        return np.concatenate(out).astype(np.float64)


def _as_float32(chunks: list[np.ndarray]) -> Iterator[np.ndarray]:
    """Each of `chunks` (uint8) as float32, read-only, in one buffer taken from the spare ones of `resamples_kept`
    and given back when the pass ends (two passes at once get two buffers)."""
    spare = _spare.get()
    size = max(CHUNK_VALUES, max(c.size for c in chunks))
    ready = [] if spare is None else [i for i, b in enumerate(spare) if len(b) >= size]
    buffer = spare.pop(ready[0]) if spare is not None and ready else np.empty(size, np.float32)
    try:
        for chunk in chunks:
            out = buffer[: chunk.size].reshape(chunk.shape)
            np.copyto(out, chunk)
            view = out.view()
            view.setflags(write=False)
            yield view
    finally:
        if spare is not None:
            spare.append(buffer)


def percentile_interval(resampled: ArrayLike, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of each column of `resampled` (n_boot, ...), ignoring NaN resamples."""
    arr = np.asarray(resampled, dtype=np.float64)
    if arr.ndim < 1 or arr.shape[0] == 0:
        raise EvaluationError(f"resampled must have at least one resample, got shape {arr.shape}")
    if not 0 < level < 1:
        raise EvaluationError(f"level must be in (0, 1), got {level!r}")
    with np.errstate(invalid="ignore"):
        low, high = np.nanquantile(arr, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return low, high
