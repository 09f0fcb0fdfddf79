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

from evaluator.paired import JointBootstrap
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
    ordinary bootstrap."""
    boot = JointBootstrap(len(sampled), n_draws, seed)
    cols = np.flatnonzero(sampled)
    step = max(1, BLOCK_VALUES // max(len(cols), 1))
    fixed = [_fixed(c, sampled) for c in runs]
    q = [c.q[cols].astype(np.float32) for c in runs]
    r = [c.r[cols].astype(np.float32) for c in runs]
    parts: list[list[list[np.ndarray]]] = [[[], [], []] for _ in runs]
    for counts, (u, v) in zip(boot.counts(), _uniforms(len(cols), boot.chunk, n_draws, seed)):
        picked = counts[:, cols]
        for (correct, scored), q_run, r_run, part in zip(fixed, q, r, parts):
            totals, seen_by, n_right, n_seen = _drawn_counts(picked, u, v, q_run, r_run, step)
            n_seen += float(scored.sum(dtype=np.float64))
            with np.errstate(invalid="ignore", divide="ignore"):
                part[0].append((float(correct.sum(dtype=np.float64)) + n_right) / n_seen)
                part[1].append((counts @ correct + totals) / (counts @ scored + seen_by))
            part[2].append(n_seen)
    return [DrawAccuracies(*(np.concatenate(p).astype(np.float64) for p in part)) for part in parts]


def _fixed(c: Coins, sampled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(right, scored) float32 (n_images,) of the images outside `sampled`: the same in every draw."""
    counted = c.counted & ~sampled
    return (counted & (c.q >= 1)).astype(np.float32), (counted & ((c.q >= 1) | (c.r >= 1))).astype(np.float32)


def _drawn_counts(
    picked: np.ndarray, u: np.ndarray, v: np.ndarray, q: np.ndarray, r: np.ndarray, step: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Over the sampled images of one chunk of draws (size, n_cols): the resampled right and scored counts, and
    the right and scored counts of the label draw alone, each (size,). Row blocks of `step` draws keep the
    arrays of one block in cache."""
    out: list[np.ndarray] = [
        np.empty(len(u), np.float32),
        np.empty(len(u), np.float32),
        np.empty(len(u)),
        np.empty(len(u)),
    ]
    for start in range(0, len(u), step):
        block = slice(start, start + step)
        right = u[block] < q
        seen = right | (v[block] < r)
        out[0][block] = (picked[block] * right).sum(axis=1, dtype=np.float32)
        out[1][block] = (picked[block] * seen).sum(axis=1, dtype=np.float32)
        out[2][block], out[3][block] = np.count_nonzero(right, axis=1), np.count_nonzero(seen, axis=1)
    return out[0], out[1], out[2], out[3]


def _uniforms(n_cols: int, chunk: int, n_draws: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(U, V), float32 (size, n_cols) per chunk of draws. The stream is a child of `seed` apart from the image
    resamples', so sampling labels leaves those unchanged."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    for start in range(0, n_draws, chunk):
        size = min(chunk, n_draws - start)
        yield rng.random((size, n_cols), dtype=np.float32), rng.random((size, n_cols), dtype=np.float32)
