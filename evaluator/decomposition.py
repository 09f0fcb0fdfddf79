"""Where a paired difference between two references comes from: the images that changed, split by why.

A model's top-1 under reference b (ReaL, a ReGT snapshot) minus its top-1 under reference a (the original labels,
one per image) on the same images nets three effects of different meaning. Every image right under exactly one
reference falls in one of three parts; the other images are right or wrong under both and add nothing:

leniency      right under b only, and b's set holds the original label too: b accepts a second class the model
              chose (multi-label leniency). Adds to the difference.
a wrong       right under b only, and b's set lacks the original label: the original label is wrong by b and the
              model agrees with b. Adds to the difference.
dropped       right under a only: the prediction is the original label, and b's set lacks it (with a single-label
              a this is the only way to be right under a only). Takes from the difference.

So difference = leniency + a_wrong − dropped, exactly, as counts over the same n images. The intervals resample
the n images with replacement (paired bootstrap): the counts of the four cells (three parts and the rest) are then
Multinomial(n, observed shares), drawn in one vectorised call, and each part's interval is the percentile interval
of its share over the resamples. A part with no image gets ± the Wilson upper bound of 0 in n, never 0–0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError
from evaluator.intervals import LEVEL, wilson_interval
from evaluator.references import check_boot, check_mask

N_BOOT = 1000
PARTS = ("leniency", "a_wrong", "dropped")


@dataclass(frozen=True)
class DifferenceParts:
    """Top-1 under b minus under a on `n_common` images, as counts of the images behind each part (module
    docstring). Shares are in [0, 1]; `dropped` counts against the difference. `*_ci` are 95 % percentile
    intervals of each part's signed share (None: not computed); NaN shares when n_common = 0."""

    n_common: int
    n_leniency: int
    n_a_wrong: int
    n_dropped: int
    leniency_ci: tuple[float, float] | None = None
    a_wrong_ci: tuple[float, float] | None = None
    dropped_ci: tuple[float, float] | None = None  # of −dropped share: both bounds ≤ 0 (or ± when none)

    def _share(self, count: int) -> float:
        return count / self.n_common if self.n_common else float("nan")

    @property
    def leniency(self) -> float:
        return self._share(self.n_leniency)

    @property
    def a_wrong(self) -> float:
        return self._share(self.n_a_wrong)

    @property
    def dropped(self) -> float:
        """The share taken from the difference, negative (or 0)."""
        return -self._share(self.n_dropped)

    @property
    def difference(self) -> float:
        """leniency + a_wrong + dropped: top-1 under b minus under a, in [−1, 1]."""
        return self._share(self.n_leniency + self.n_a_wrong - self.n_dropped)


def decompose_difference(
    correct_a: ArrayLike,
    correct_b: ArrayLike,
    original_in_b: ArrayLike,
    common: ArrayLike | None = None,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> DifferenceParts:
    """The parts of top-1 under b minus under a on the images in `common` (default: all).

    `correct_a`, `correct_b`: bool (n_images,), the model right under a (the original label) and under b;
    `original_in_b`: bool (n_images,), b's set holds the image's original label; `common`: bool (n_images,), the
    images scored under both. `n_boot` = 0 skips the intervals.
    """
    a = check_mask(correct_a, "correct_a", np.shape(correct_a))
    if a.ndim != 1:
        raise EvaluationError(f"correct_a must be 1-D (n_images,), got shape {a.shape}")
    b = check_mask(correct_b, "correct_b", a.shape)
    kept = check_mask(original_in_b, "original_in_b", a.shape)
    both = np.ones(a.shape, bool) if common is None else check_mask(common, "common", a.shape)
    check_boot(n_boot)
    if not 0 < level < 1:
        raise EvaluationError(f"level must be in (0, 1), got {level!r}")
    only_b, only_a = both & b & ~a, both & a & ~b
    counts = (int((only_b & kept).sum()), int((only_b & ~kept).sum()), int(only_a.sum()))
    parts = DifferenceParts(int(both.sum()), *counts)
    if not n_boot:
        return parts
    low, high = _part_intervals(np.array(counts), parts.n_common, n_boot, level, seed)
    ci = [(float(lo), float(hi)) for lo, hi in zip(low, high)]
    return DifferenceParts(parts.n_common, *counts, *ci)


def _part_intervals(counts: np.ndarray, n: int, n_boot: int, level: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile intervals (3,) of the signed shares (+, +, −) of the three parts over multinomial resamples."""
    if n == 0:
        return np.full(3, np.nan), np.full(3, np.nan)
    shares = np.append(counts, n - counts.sum()) / n
    draws = np.random.default_rng(seed).multinomial(n, shares, size=n_boot)[:, :3] / n
    signed = draws * np.array([1.0, 1.0, -1.0])
    low, high = np.quantile(signed, [(1 - level) / 2, (1 + level) / 2], axis=0)
    bound = float(wilson_interval(0, n, level)[1])
    empty = counts == 0
    return np.where(empty, -bound, low), np.where(empty, bound, high)
