"""How far can any review order get on ReaL's raters? An oracle bound and a learnable bound for the review simulator.

The simulator (`relabel.planning.simulation`) starts from one rater's answer per (image, class) pair plus ImGT and a
review reveals an image's other answers. Here, on one half of the rated images (a seeded hash of the image's
position in val order; the other half stays held out for reporting), the fit at the start and the fit on every
answer are compared with ReaL per image: a review gains +1 where the label set is wrong at the start and right
with every answer, -1 the other way round. Refits between steps also move images nobody reviewed (a fraction of a
point on ReaL), so these are bounds on the reviewed images' share of the gain, not curves.

* **oracle**: the reviews needed to match random order's expected gain after N (N = a third of the half's
  images) when the images that gain come first;
* **learnable**: the same with the images ranked by a gradient-boosted model on 16 per-image features at the
  start (answer counts, the original label's answer, posterior doubt, exported classes, uncertain, the first run's
  top-1 among the candidates, the fitted accuracy of the raters who answered), fitted with 2-fold cross-fitting on
  the half's images, once on the true gain (it reads ReaL: a ceiling, not an order) and once on "the label set
  changes with every answer", what an order can learn without a reference. A learned order in the simulator sees
  only the images reviewed so far, chosen by itself, so it does worse than these.

Example:
  python bench/review_bound.py --seed 1
"""

from __future__ import annotations

import argparse
import hashlib
import sys

import numpy as np
from bench_review import real_pool
from benchlib import REPO

sys.path.insert(0, str(REPO))

from relabel.planning.simulation import KEEP_ORIGINAL, THRESHOLD, Pool, _exported, _fit, _starting_answers  # noqa: E402
from relabel.votes.aggregation import Aggregate, FitOptions, Votes  # noqa: E402


def half(pool: Pool, seed: int, side: int) -> Pool:
    """The pool on the images whose seeded hash bit is `side` (0: half A, 1: half B), items and images renumbered."""
    bit = [hashlib.sha256(f"{seed}:{i}".encode()).digest()[0] & 1 for i in range(pool.n_images)]
    keep = np.array(bit) == side
    v = pool.votes
    kept_items = keep[v.item_image]
    new_item, new_image = np.cumsum(kept_items) - 1, np.cumsum(keep) - 1
    answers = kept_items[v.item]
    votes = Votes(
        new_item[v.item[answers]], v.worker[answers], v.answer[answers], new_image[v.item_image[kept_items]],
        v.n_workers,
    )  # fmt: skip
    pairs = np.c_[new_image[pool.pairs[kept_items, 0]], pool.pairs[kept_items, 1]]
    reference = None if pool.reference is None else [pool.reference[i] for i in np.flatnonzero(keep)]
    return Pool(votes, pairs, pool.original[kept_items], int(keep.sum()), reference, pool.top1[:, keep],
                pool.run_names)  # fmt: skip


def image_features(
    pool: Pool, start: np.ndarray, fit: Aggregate, exported: np.ndarray, open_: np.ndarray
) -> np.ndarray:
    """(n_images, 16) per-image features of the start (module docstring); `start` the answers revealed."""
    v, image, n = pool.votes, pool.pairs[:, 0], pool.n_images
    answer = np.empty(v.n_items, np.int64)
    answer[v.item[start]] = v.answer[start]
    if fit.workers is None:
        raise SystemExit("the start fit has no worker reliabilities (Dawid-Skene gives them)")
    accuracy = ((fit.workers.sensitivity + fit.workers.specificity) / 2)[v.worker[start]]
    item_accuracy = np.empty(v.n_items)
    item_accuracy[v.item[start]] = accuracy
    orig, doubt = pool.original, np.minimum(fit.posterior, 1 - fit.posterior)
    top = pool.pairs[:, 1] == pool.top1[0][image]
    most = np.zeros(n)
    np.maximum.at(most, image, doubt)

    def per(x: np.ndarray) -> np.ndarray:
        return np.bincount(image, weights=np.asarray(x, np.float64), minlength=n)

    yes, count = per(answer == 2), per(np.ones(v.n_items))
    return np.c_[
        count, yes, per(answer == 1), per(answer == 0), per(orig & (answer == 0)), per(orig & (answer == 1)),
        per(~orig & (answer == 2)), per(doubt), most, per(exported), open_, per(top), per(top & (answer == 2)),
        per(orig & top), per(item_accuracy * (answer == 2)) / np.maximum(yes, 1), per(item_accuracy) / count,
    ]  # fmt: skip


def cross_fitted(features: np.ndarray, target: np.ndarray, regress: bool) -> np.ndarray:
    """Scores from a gradient-boosted model fitted on one fold of the images and applied to the other."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    fold, score = np.arange(len(target)) % 2, np.zeros(len(target))
    for f in (0, 1):
        train, test = fold != f, fold == f
        if regress:
            score[test] = HistGradientBoostingRegressor(max_iter=200).fit(features[train], target[train]).predict(
                features[test])  # fmt: skip
        else:
            model = HistGradientBoostingClassifier(max_iter=200).fit(features[train], target[train])
            score[test] = model.predict_proba(features[test])[:, 1]
    return score


def reviews_for(gain: np.ndarray, score: np.ndarray, n: int) -> float:
    """The reviews, in units of `n`, after which the images ranked by `score` gain what random order gains by n."""
    reached = np.cumsum(gain[np.argsort(-score, kind="stable")]) >= gain.mean() * n
    return float(np.argmax(reached)) / n if reached.any() else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="Draws the starting answers.")
    parser.add_argument("--side", type=int, choices=(0, 1), default=0, help="The half: 0 (A, tuning) or 1 (B).")
    parser.add_argument("--split-seed", type=int, default=0, help="Seeds the hash that splits the images.")
    args = parser.parse_args()
    pool = half(real_pool(), args.split_seed, args.side)
    assert pool.reference is not None
    start = _starting_answers(pool.votes, np.random.default_rng(args.seed))
    everything = np.ones(len(pool.votes.item), dtype=bool)
    fits = [_fit(pool, revealed, "ds", None, FitOptions.max_iter) for revealed in (start, everything)]
    decided = [_exported(pool, fit, THRESHOLD, KEEP_ORIGINAL) for fit in fits]
    truth = np.array([c in pool.reference[i] for i, c in pool.pairs.tolist()])
    image = pool.pairs[:, 0]
    right = [np.bincount(image, weights=d[0] != truth, minlength=pool.n_images) == 0 for d in decided]
    gain = right[1].astype(np.float64) - right[0]
    changes = np.bincount(image, weights=decided[0][0] != decided[1][0], minlength=pool.n_images) > 0
    features = image_features(pool, start, fits[0], *decided[0])
    n = pool.n_images // 3
    print(f"{pool.n_images:,} images (half {'AB'[args.side]}), N = {n:,}; right at the start {right[0].mean():.2%}, "
          f"with every answer {right[1].mean():.2%}; a review gains +1 on {(gain > 0).sum():,}, -1 on "
          f"{(gain < 0).sum():,}; random's gain per review {gain.mean():+.3f}")  # fmt: skip
    for what, score in (
        ("oracle (the true gain)", gain),
        ("learnable ceiling: boosted model on the true gain", cross_fitted(features, gain, regress=True)),
        ("learnable without a reference: boosted model on 'the set changes'", cross_fitted(features, changes, False)),
    ):
        top = np.argsort(-score, kind="stable")[: n // 2]
        print(f"- {what}: random's gain at N after {reviews_for(gain, score, n):.2f}·N; gain per review in the "
              f"first 0.5·N {gain[top].mean():+.3f} (needed for 0.5·N: {2 * gain.mean():+.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
