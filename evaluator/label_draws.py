"""Label draws for the expected top-1 (`evaluator.label_uncertainty`): the two coins of each image, and the
accuracies of many runs over one shared set of label draws and image resamples.

Only the top-1 prediction matters, so an image's draw reduces to two independent coins: "the predicted class is
drawn" (probability q, the posterior of the predicted class) and "another class is drawn" (r = 1 − Π(1 − p_c)
over the other listed classes). The image is right when the first lands, and scored when either does.

The random numbers do not depend on the runs: per label draw, two uniforms U, V for every *sampled* image (one
with a posterior strictly between 0 and 1, or an unrated image drawn at a rate strictly between 0 and 1), and a
run's image is right when U < q, scored when U < q or V < r. An image outside the sampled ones has q and r of 0
or 1 whatever the run predicts, and costs no random numbers. So every run scored against one set of posteriors
reads the same draws and the same image resamples, and the draws are made once for all of them; a run's numbers
do not depend on which other runs are scored beside it. For one run the per-image coins are those it had before
the draws were shared (U < q and V < r, independent across images and draws), but the uniforms are laid out over
the sampled images rather than over the images that run's prediction leaves uncertain, so a given seed gives
other (equally distributed) numbers than before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from evaluator.index_draws import RawWords, unit_thresholds
from evaluator.paired import JointBootstrap, scratch
from evaluator.posteriors import Posteriors

BLOCK_VALUES = 262_144  # sampled (draw, image) pairs handled at once per run: 1 MB of float32, held in cache


@dataclass(frozen=True, eq=False)
class Coins:
    """Per image of one run: q (the predicted class is present) and r (another class is), both 0 where the image
    is not counted (an infrastructure error: never scored)."""

    counted: np.ndarray  # (n_images,) bool: answered or failed
    q: np.ndarray  # (n_images,) float
    r: np.ndarray  # (n_images,) float


@dataclass(frozen=True)
class DrawAccuracies:
    """One run's accuracies, each (n_draws,): per label draw on the images as they are (`label`), per (image
    resample, label draw) pair (`boot`), and the images scored per label draw (`scored`)."""

    label: np.ndarray
    boot: np.ndarray
    scored: np.ndarray


def coins(top1: np.ndarray, post: Posteriors, answered: np.ndarray, wrong: np.ndarray) -> Coins:
    """q and r of every image (module docstring) from the listed pairs. Trusts its input."""
    n = post.n_images
    counted = answered | wrong
    hit = answered[post.rows] & (post.classes == top1[post.rows])
    q = np.bincount(post.rows[hit], post.probs[hit], minlength=n)
    other = ~hit
    sure = np.bincount(post.rows[other & (post.probs >= 1)], minlength=n) > 0
    maybe = other & (post.probs < 1)
    log_none = np.bincount(post.rows[maybe], np.log1p(-post.probs[maybe]), minlength=n)  # log Π(1 − p)
    r = np.where(sure, 1.0, -np.expm1(log_none))
    return Coins(counted, np.where(counted, q, 0.0), np.where(counted, r, 0.0))


def with_noise(c: Coins, unrated: np.ndarray, noise: float) -> Coins:
    """The unrated images' labelled classes present with 1 − noise; an image with a label always holds some
    class (r = 1), so it stays scored when its label is drawn absent."""
    labelled = unrated & c.counted & ((c.q > 0) | (c.r > 0))
    return Coins(c.counted, np.where(labelled, c.q * (1.0 - noise), c.q), np.where(labelled, 1.0, c.r))


def sampled_images(post: Posteriors, unrated: np.ndarray, noise: float | None) -> np.ndarray:
    """(n_images,) bool: the images whose coins can be strictly between 0 and 1 for some prediction, from the
    posteriors (and the unrated images' rate) alone, never from a run."""
    sampled = np.zeros(post.n_images, bool)
    sampled[post.rows[(post.probs > 0) & (post.probs < 1)]] = True
    if noise is not None and 0 < noise < 1:
        labelled = np.zeros(post.n_images, bool)
        labelled[post.rows[post.probs > 0]] = True
        sampled |= unrated & labelled
    return sampled


def draw_accuracies(runs: Sequence[Coins], sampled: np.ndarray, n_draws: int, seed: int) -> list[DrawAccuracies]:
    """The accuracies of every run over the same `n_draws` label draws and image resamples (module docstring).

    Counts are summed in float32 and divided there, as `JointBootstrap.means` does: every sum is a whole number
    below 2**24, so exact whatever the order of the additions, and the quotients are bit for bit those of the
    ordinary bootstrap. The sums are einsum's loops rather than BLAS products: a product of a few columns wakes
    BLAS's threads, which then spin for more CPU time than the product takes."""
    boot = JointBootstrap(len(sampled), n_draws, seed)
    cols = np.flatnonzero(sampled)
    every = len(cols) == len(sampled)  # every image sampled: the resample counts are read in place, not copied
    step = max(1, BLOCK_VALUES // max(len(cols), 1))
    fixed = [_fixed(c, sampled) for c in runs]
    held = _scored_outside(fixed, len(sampled))  # only these images' counts are read for the part fixed in a draw
    fixed = [(None if right is None else right[held], None if scored is None else scored[held], n_right, n_scored)
             for right, scored, n_right, n_scored in fixed]  # fmt: skip
    q = [unit_thresholds(c.q[cols].astype(np.float32)) for c in runs]  # U < q as integers (`_uniforms`)
    r = [unit_thresholds(c.r[cols].astype(np.float32)) for c in runs]
    work = _Blocks(min(step, boot.chunk), len(cols))
    parts: list[list[list[np.ndarray]]] = [[[], [], []] for _ in runs]
    chunks = ((counts, counts) for counts in boot.counts()) if every else boot.columns(cols, held)
    for (picked, outside), (u, v) in zip(chunks, _uniforms(len(cols), boot.chunk, n_draws, seed)):
        for (right, scored, n_fixed_right, n_fixed_seen), q_run, r_run, part in zip(fixed, q, r, parts):
            drawn_right, drawn_seen, n_right, n_seen = work.counts(picked, u, v, q_run, r_run)
            n_seen += n_fixed_seen
            with np.errstate(invalid="ignore", divide="ignore"):
                part[0].append((n_fixed_right + n_right) / n_seen)
                part[1].append((_drawn(outside, right) + drawn_right) / (_drawn(outside, scored) + drawn_seen))
            part[2].append(n_seen)
    return [DrawAccuracies(*(np.concatenate(p).astype(np.float64) for p in part)) for part in parts]


def _fixed(c: Coins, sampled: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None, float, float]:
    """(right, scored) float32 (n_images,) of the images outside `sampled`, the same in every draw (None for
    none), and how many there are of each."""
    counted = c.counted & ~sampled
    right, scored = counted & (c.q >= 1), counted & ((c.q >= 1) | (c.r >= 1))
    n_right, n_scored = int(right.sum()), int(scored.sum())
    return (
        right.astype(np.float32) if n_right else None,
        scored.astype(np.float32) if n_scored else None,
        float(n_right),
        float(n_scored),
    )


def _scored_outside(fixed: list[tuple[np.ndarray | None, np.ndarray | None, float, float]], n: int) -> np.ndarray:
    """The images some run scores in every draw (outside the sampled ones), as indices: the right ones are among
    them."""
    mask = np.zeros(n, bool)
    for _, scored, _, _ in fixed:
        if scored is not None:
            mask |= scored > 0
    return np.flatnonzero(mask)


def _drawn(counts: np.ndarray, images: np.ndarray | None) -> np.ndarray:
    """(size,) float32: how often each resample of `counts` (size, m) drew `images` ((m,) 0 or 1)."""
    if images is None:
        return np.zeros(len(counts), np.float32)
    return np.einsum("ij,j->i", counts, images)


class _Blocks:
    """Buffers allocated once for a pass: the coins of a block of `step` draws."""

    def __init__(self, step: int, n_cols: int) -> None:
        self.step = step
        self.right = np.empty((step, n_cols), np.float32)
        self.seen = np.empty((step, n_cols), np.float32)

    def counts(
        self, picked: np.ndarray, u: np.ndarray, v: np.ndarray, q: np.ndarray, r: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Over the sampled images of one chunk of draws (size, n_cols): the resampled right and scored counts,
        and the right and scored counts of the label draw alone, each (size,). The coins land as 0.0 or 1.0, so
        each count is one multiply-and-add (einsum) or one sum over a block of draws held in cache."""
        size = len(u)
        out = np.empty(size, np.float32), np.empty(size, np.float32), np.empty(size), np.empty(size)
        for start in range(0, size, self.step):
            block = slice(start, start + self.step)
            right, seen = self.right[: len(u[block])], self.seen[: len(u[block])]
            np.less(u[block], q, out=right, casting="unsafe")
            np.less(v[block], r, out=seen, casting="unsafe")
            np.maximum(right, seen, out=seen)
            out[0][block] = np.einsum("ij,ij->i", picked[block], right)
            out[1][block] = np.einsum("ij,ij->i", picked[block], seen)
            out[2][block], out[3][block] = right.sum(axis=1), seen.sum(axis=1)
        return out


def _uniforms(n_cols: int, chunk: int, n_draws: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(U, V) per chunk of draws, (size, n_cols) uint32, valid until the next chunk: the numerators of the float32
    uniforms `rng.random(dtype=np.float32)` draws for U, then for V, over the chunk (`evaluator.index_draws`: an
    integer threshold gives the same coin as the float), read from the generator's raw words into the same two
    buffers each time (and each pass, inside `resamples_kept`). The stream is a child of `seed` apart from the
    image resamples', so sampling labels leaves those unchanged."""
    words = RawWords(np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0]).bit_generator)
    shape = (min(chunk, n_draws), n_cols)
    u, v = scratch("label_draws.u", shape, np.uint32), scratch("label_draws.v", shape, np.uint32)
    for start in range(0, n_draws, chunk):
        size = min(chunk, n_draws - start)
        yield words.fill_units(u[:size]), words.fill_units(v[:size])
