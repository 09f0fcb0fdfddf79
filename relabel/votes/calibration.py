"""Calibrate vote posteriors against labels a team trusts, and measure how well calibrated they are. Pure numpy.

A Dawid-Skene posterior assumes that raters answer independently given the truth; they do not (a hard image is
hard for all of them), so its posteriors are over-confident: on ReaL's raters, pairs at 0.5-0.7 are in ReaL's
label set some 14 % of the time. A *calibration* maps each posterior to the share of such pairs that a trusted
reference holds, by isotonic regression (pool adjacent violators: the non-decreasing step curve closest to the
reference's 0/1 answers in least squares). One curve is fitted for pairs whose class is an original (ImGT) label of
the image and one for the others: at the same posterior an original label is far more often right.

The reference is whatever the team trusts and the user names: a lead's adjudications, or an imported label source
(`relabel snapshot create --calibrate`). `cross_fit` fits on some images and applies to the others only, so a
calibration is never measured on the images it was fitted on; `expected_calibration_error` and `reliability`
measure it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from relabel.common.errors import InputError

GROUPS = ("other", "original")  # the curves of a Calibration, by whether the class is an original label
MIN_PAIRS = 20  # a group with fewer reference pairs keeps its posteriors as they are
ROUND = 4  # posteriors pooled to this many decimals before fitting: at most 10,001 points, fitted in milliseconds
ECE_RANGE = (0.05, 0.95)  # the pairs where calibration matters: most sit at 0 or 1 and hide the error there


@dataclass(frozen=True)
class Curve:
    """A non-decreasing map of [0, 1] onto [0, 1], linear between its knots (`x` ascending, `y` non-decreasing);
    without knots, the identity."""

    x: np.ndarray
    y: np.ndarray

    def __call__(self, posterior: np.ndarray) -> np.ndarray:
        return np.interp(posterior, self.x, self.y) if len(self.x) else np.asarray(posterior, float).copy()


IDENTITY = Curve(np.zeros(0), np.zeros(0))


@dataclass(frozen=True)
class Calibration:
    """One curve per group of `GROUPS` (other classes, original classes) and the reference pairs each saw."""

    curves: tuple[Curve, Curve]
    pairs: tuple[int, int]

    def apply(self, posterior: np.ndarray, original: np.ndarray | None = None) -> np.ndarray:
        """(I,) calibrated posteriors of `posterior` (I,); `original` (I,) bool: the class is an original label
        of its image (None: none is)."""
        is_original = np.zeros(len(posterior), bool) if original is None else np.asarray(original, bool)
        out = self.curves[0](posterior)
        out[is_original] = self.curves[1](posterior[is_original])
        return out


def isotonic(x: np.ndarray, y: np.ndarray) -> Curve:
    """The isotonic regression of `y` (0/1 or shares) on `x` (posteriors), by pool adjacent violators, after
    pooling `x` to `ROUND` decimals. Knots at the lowest and highest posterior of each block, both at its mean `y`
    (as scikit-learn's IsotonicRegression predicts): flat within a block, linear between blocks."""
    if not len(x):
        return IDENTITY
    keys, inverse = np.unique(np.round(np.asarray(x, float), ROUND), return_inverse=True)
    weight = np.bincount(inverse).astype(float)
    y_sum = np.bincount(inverse, weights=np.asarray(y, float))
    blocks: list[list[float]] = []  # [y sum, weight, lowest x, highest x]
    for k, w, s in zip(keys.tolist(), weight.tolist(), y_sum.tolist()):
        block = [s, w, k, k]
        while blocks and blocks[-1][0] * block[1] >= block[0] * blocks[-1][1]:  # the mean before is not lower
            before = blocks.pop()
            block = [before[0] + block[0], before[1] + block[1], before[2], block[3]]
        blocks.append(block)
    b = np.array(blocks)
    ends = np.stack([b[:, 2], b[:, 3]], axis=1).ravel()
    means = np.repeat(b[:, 0] / b[:, 1], 2)
    single = np.r_[True, ends[1:] != ends[:-1]]  # a block of one posterior needs one knot
    return Curve(ends[single], means[single])


def fit_calibration(
    posterior: np.ndarray, truth: np.ndarray, original: np.ndarray | None = None, *, by_original: bool = True
) -> Calibration:
    """Fit a calibration on reference pairs: `posterior` (I,) in [0, 1], `truth` (I,) bool (the reference holds
    the class), `original` (I,) bool (the class is an original label; None: none is). With `by_original`, one
    curve per group of `GROUPS`, else one for all. A group with fewer than `MIN_PAIRS` pairs stays as it is.
    Raises InputError for arrays of different lengths or posteriors outside [0, 1]."""
    posterior, truth = np.asarray(posterior, float), np.asarray(truth, bool)
    is_original = np.zeros(len(posterior), bool) if original is None else np.asarray(original, bool)
    if not len(posterior) == len(truth) == len(is_original):
        raise InputError(
            f"calibration: posterior, truth and original differ in length "
            f"({len(posterior)}, {len(truth)}, {len(is_original)})"
        )
    if len(posterior) and not (posterior.min() >= 0.0 and posterior.max() <= 1.0):
        raise InputError(f"calibration: posteriors must lie in [0, 1], got {posterior.min()}..{posterior.max()}")
    if not by_original:
        curve = isotonic(posterior, truth) if len(posterior) >= MIN_PAIRS else IDENTITY
        return Calibration((curve, curve), (int((~is_original).sum()), int(is_original.sum())))
    curves, counts = [], []
    for group in (~is_original, is_original):
        n = int(group.sum())
        curves.append(isotonic(posterior[group], truth[group]) if n >= MIN_PAIRS else IDENTITY)
        counts.append(n)
    return Calibration((curves[0], curves[1]), (counts[0], counts[1]))


def image_folds(image: np.ndarray, folds: int = 2, seed: int = 0) -> np.ndarray:
    """(I,) the fold (0..folds-1) of each pair, drawn per image (`image` (I,) image number of each pair), so that
    all pairs of an image fall in one fold; the same `seed` gives the same folds."""
    if folds < 2:
        raise InputError(f"folds must be at least 2, got {folds}")
    images, inverse = np.unique(image, return_inverse=True)
    fold_of_image = np.random.default_rng(seed).permutation(len(images)) % folds
    return fold_of_image[inverse.ravel()]


def cross_fit(
    posterior: np.ndarray,
    truth: np.ndarray,
    original: np.ndarray | None,
    fold: np.ndarray,
    *,
    by_original: bool = True,
) -> tuple[np.ndarray, list[Calibration]]:
    """Out-of-fold calibrated posteriors: for each fold f, a calibration fitted on the pairs of the other folds
    (`fold` (I,), from `image_folds`) is applied to the pairs of f; the truth of f's pairs is never read for
    them. Returns the calibrated posteriors (I,) and the calibration used for each fold."""
    is_original = np.zeros(len(posterior), bool) if original is None else np.asarray(original, bool)
    out = np.asarray(posterior, float).copy()
    fitted = []
    for f in range(int(fold.max()) + 1 if len(fold) else 0):
        train, test = fold != f, fold == f
        cal = fit_calibration(posterior[train], truth[train], is_original[train], by_original=by_original)
        out[test] = cal.apply(posterior[test], is_original[test])
        fitted.append(cal)
    return out, fitted


@dataclass(frozen=True)
class Bin:
    """One bin of a reliability diagram: posteriors in [low, high), their mean and the share the reference holds."""

    low: float
    high: float
    n: int
    mean_posterior: float
    share_true: float


def reliability(
    posterior: np.ndarray, truth: np.ndarray, bins: int = 10, within: tuple[float, float] = (0.0, 1.0)
) -> list[Bin]:
    """A reliability diagram: `bins` equal bins over [0, 1] (the last one closed) of the pairs whose posterior
    lies in `within` (both ends included); empty bins are left out."""
    p, t = np.asarray(posterior, float), np.asarray(truth, bool)
    keep = (p >= within[0]) & (p <= within[1])
    p, t = p[keep], t[keep]
    index = np.minimum((p * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        in_bin = index == b
        if in_bin.any():
            out.append(
                Bin(b / bins, (b + 1) / bins, int(in_bin.sum()), float(p[in_bin].mean()), float(t[in_bin].mean()))
            )
    return out


def expected_calibration_error(
    posterior: np.ndarray, truth: np.ndarray, bins: int = 10, within: tuple[float, float] = ECE_RANGE
) -> float:
    """ECE: the mean over the pairs whose posterior lies in `within` of |mean posterior - share true| of their
    bin (`reliability`); NaN when no pair lies there. `within` (0, 1) gives the usual overall ECE."""
    diagram = reliability(posterior, truth, bins, within)
    n = sum(b.n for b in diagram)
    return sum(b.n * abs(b.mean_posterior - b.share_true) for b in diagram) / n if n else float("nan")


def describe(cal: Calibration, against: str) -> dict[str, object]:
    """What a snapshot records of its calibration (`Snapshot.consensus["calibration"]`)."""
    return {"against": against, "method": "isotonic, original and other classes apart", "pairs": list(cal.pairs)}


def group_names(pairs: Sequence[int]) -> str:
    """ "1,234 other and 567 original pairs"."""
    return f"{pairs[0]:,} other and {pairs[1]:,} original pairs"
