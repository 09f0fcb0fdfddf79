"""Top-1 accuracy with the label noise left in: scores against probabilistic labels (after Stutz et al. 2023).

A consensus such as Dawid–Skene gives each (image, class) pair a posterior: the probability that the class belongs
to the image's label set. Thresholding the posteriors (p ≥ 0.9) gives ordinary label sets, and an accuracy that
treats them as certain. Stutz et al., "Evaluating AI systems under uncertain ground truth" (2023), instead sample
plausible labels from the posteriors and report the spread of the accuracy over the samples. Here:

reference        `Posteriors`: P(class present) of listed (image, class) pairs; a pair not listed is absent (0).
                 A certain label is a posterior of 1.
thresholded      the ReaL-rule top-1 against the sets {c : p_c ≥ threshold}, with the Wilson interval of
                 `evaluator.scoring` (images with an empty set excluded, as there).
label draw       every class of every image is present with its posterior, independently. Images whose drawn set
                 is empty are excluded from that draw's accuracy (ReaL's convention, draw by draw); failed replies
                 count as wrong and infrastructure errors are never scored, as in `evaluator.scoring`.
expected         the mean over `n_draws` label draws of the accuracy: E[accuracy] under the posteriors.
label interval   percentiles of the accuracy over the label draws alone, the images fixed: how much the label
                 uncertainty alone moves the score (a point when every posterior is 0 or 1).
interval         draw b resamples the images with replacement (the b-th resample of `JointBootstrap(n_images,
                 n_draws, seed)`, so the same stream as every other bootstrap of the evaluator) and draws the label
                 set of each image (the b-th label draw); the percentiles of the b accuracies. With every posterior
                 0 or 1 nothing is drawn for the labels and this is, number for number, the percentile bootstrap
                 `percentile_interval(JointBootstrap(...).means(correct, scored))`.

unrated images   images whose label set rests on one unverified source (a snapshot's base labels, ImGT by
                 default, where nobody rated the image). By default (`unrated_noise` None) they are left out of
                 every number and counted in `n_unrated`: the thresholded top-1 is taken as if the reference did
                 not hold them, and a draw scores none of them, though they stay among the images resampled (a
                 resample's rated images are those it drew), so that every statistic over the reference's images
                 reads one set of resamples. That source's error rate can only be estimated on the rated images
                 (`base_error_rate`), which are rarely a random sample (ReaL rated the images some model doubted:
                 by Dawid-Skene ImGT's label is absent from 30 % of them; Shankar et al. give a different label or
                 none to under 1 % of the never-rated images they labelled). With a rate ε in [0, 1] they are
                 drawn: each labelled class present with 1 − ε; drawn absent, the image holds another class and
                 stays scored; a prediction outside its labels stays wrong (a lower bound given ε). ε = 0 is,
                 number for number, the result without `unrated`.

Only the top-1 prediction matters, so an image's draw reduces to two independent coins (`evaluator.label_draws`):
"the predicted class is drawn" (q, the posterior of the predicted class) and "another class is drawn" (r). Images
whose posteriors are all 0 or 1 are the same in every draw and cost no random numbers; the rest are drawn in
chunks, so 50,000 images × 1,000 draws take seconds. The draws depend on the posteriors and the seed, never on
the predictions: `uncertain_accuracies` scores many runs over the images of one reference against one set of
draws and image resamples, made once, and gives each run the numbers `uncertain_accuracy` gives it alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from evaluator import kept_scores
from evaluator.errors import EvaluationError
from evaluator.intervals import LEVEL
from evaluator.label_draws import DrawAccuracies, coins, draw_accuracies, sampled_images, with_noise
from evaluator.paired import N_BOOT, kept_folder, percentile_interval
from evaluator.posteriors import THRESHOLD, Posteriors
from evaluator.references import LabelSets, check_boot, check_predictions
from evaluator.scoring import INTERVAL, Score, multilabel_accuracy


@dataclass(frozen=True)
class UncertainScore:
    """Top-1 against probabilistic labels (module docstring); shares in [0, 1], NaN where nothing was scored.

    `n_uncertain` of the counted images (answered or failed) have a posterior that settles nothing, strictly
    between 1 − threshold and threshold (a consensus sends such images to review, category U);
    `expected_scored` is the mean number of scored images per label draw. `n_unrated` counted images rest on an
    unverified source (module docstring): left out when `unrated_noise` is None, else drawn at that rate.
    """

    threshold: float
    thresholded: Score
    expected_accuracy: float
    ci_low: float
    ci_high: float
    label_ci_low: float
    label_ci_high: float
    expected_scored: float
    n_uncertain: int
    n_draws: int
    seed: int
    n_unrated: int = 0
    unrated_noise: float | None = None


def uncertain_accuracy(
    pred: ArrayLike,
    posteriors: Posteriors,
    ok: ArrayLike | None = None,
    *,
    failed: ArrayLike | None = None,
    threshold: float = THRESHOLD,
    n_draws: int = N_BOOT,
    seed: int = 0,
    level: float = LEVEL,
    interval: str | None = INTERVAL,
    decided: LabelSets | None = None,
    unrated: ArrayLike | None = None,
    unrated_noise: float | None = None,
) -> UncertainScore:
    """Top-1 of `pred` against `posteriors`: thresholded, expected over label draws, and the intervals.

    `pred` (n_images, k) ranked classes (only the first column is read; -1: no class) or (n_images,); `ok`,
    `failed` (n_images,) bool as in `evaluator.scoring` (failed replies are wrong, other failures unscored).
    `n_draws` ≥ 1 label draws, each paired with one image resample; `interval` is the thresholded top-1's.
    `decided`: the label sets the consensus settled on, when its rule is more than the threshold (an original
    class kept at a lower posterior, say); the thresholded top-1 is scored against them. Default: {p ≥ threshold}.
    `unrated` (n_images,) bool: images whose labels rest on an unverified source; `unrated_noise` None leaves them
    out, a rate in [0, 1] draws them (module docstring).
    """
    (score,) = uncertain_accuracies(
        [pred], posteriors, [ok], failed=[failed], threshold=threshold, n_draws=n_draws, seed=seed, level=level,
        interval=interval, decided=decided, unrated=unrated, unrated_noise=unrated_noise,
    )  # fmt: skip
    return score


def uncertain_accuracies(
    preds: Sequence[ArrayLike],
    posteriors: Posteriors,
    oks: Sequence[ArrayLike | None] | None = None,
    *,
    failed: Sequence[ArrayLike | None] | None = None,
    threshold: float = THRESHOLD,
    n_draws: int = N_BOOT,
    seed: int = 0,
    level: float = LEVEL,
    interval: str | None = INTERVAL,
    decided: LabelSets | None = None,
    unrated: ArrayLike | None = None,
    unrated_noise: float | None = None,
) -> list[UncertainScore]:
    """`uncertain_accuracy` of every run of `preds` over the same images, number for number what it gives each
    run alone, with the label draws and image resamples made once for all of them (`evaluator.label_draws`).

    `preds`: one prediction array per run, as `pred` there; `oks`, `failed`: one mask (or None) per run, or None
    for all. The other arguments are those of `uncertain_accuracy`, shared by every run.
    """
    if not isinstance(posteriors, Posteriors):
        raise EvaluationError(f"posteriors must be Posteriors, got {type(posteriors).__name__}")
    check_boot(n_draws, allow_zero=False)
    arguments = (preds, posteriors, oks, failed, threshold, n_draws, seed, level, interval, decided, unrated,
                 unrated_noise)  # fmt: skip
    folder = kept_folder()
    key = None if folder is None else _digest(*arguments)
    held = None if folder is None or key is None else _scores(kept_scores.read(folder, key), len(preds))
    if held is not None:
        return held
    out = _uncertain_accuracies(*arguments)
    if folder is not None and key is not None:
        kept_scores.write(folder, key, [asdict(score) for score in out])
    return out


def _scores(items: list[dict[str, Any]] | None, n_runs: int) -> list[UncertainScore] | None:
    """The kept mappings of `n_runs` scores as scores; None where they are not that."""
    if items is None or len(items) != n_runs:
        return None
    try:
        return [UncertainScore(**{**item, "thresholded": Score(**item["thresholded"])}) for item in items]
    except (TypeError, KeyError):
        return None


def _digest(preds: Sequence[ArrayLike], posteriors: Posteriors, *rest: Any) -> str | None:
    """The digest (`evaluator.kept_scores`) of the arguments of `uncertain_accuracies`."""
    post = (posteriors.rows, posteriors.classes, posteriors.probs, posteriors.n_images, posteriors.n_classes)
    rest = tuple((r.labels, r.n_classes) if isinstance(r, LabelSets) else r for r in rest)
    return kept_scores.digest(list(preds), post, *rest)


def _uncertain_accuracies(
    preds: Sequence[ArrayLike], posteriors: Posteriors, oks: Sequence[ArrayLike | None] | None,
    failed: Sequence[ArrayLike | None] | None, threshold: float, n_draws: int, seed: int, level: float,
    interval: str | None, decided: LabelSets | None, unrated: ArrayLike | None, unrated_noise: float | None,
) -> list[UncertainScore]:  # fmt: skip
    answers, fails = _per_run(oks, len(preds), "oks"), _per_run(failed, len(preds), "failed")
    support = _support(posteriors)
    sets = posteriors.label_sets(threshold) if decided is None else _check_decided(decided, posteriors)
    aside = _check_unrated(unrated, unrated_noise, posteriors.n_images)
    # left out (no rate): an unrated image counts in no number, yet stays among the images resampled, so every
    # statistic over the reference's images reads the same resamples of them (`evaluator.paired.JointBootstrap`)
    left_out = unrated_noise is None and bool(aside.any())
    runs = [_checked(p, o, f, support, aside, left_out) for p, o, f in zip(preds, answers, fails)]
    noise = None if unrated_noise is None else float(unrated_noise)
    run_coins = [coins(arr[:, 0], posteriors, answered, wrong) for arr, answered, wrong, _ in runs]
    if noise is not None:
        run_coins = [with_noise(c, aside, noise) for c in run_coins]
    if not runs:
        return []
    sampled = sampled_images(posteriors, aside, noise)
    if left_out:
        sampled &= ~aside
    draws = draw_accuracies(run_coins, sampled, n_draws, seed)
    # the thresholded top-1 is taken as if the reference did not hold the images left out
    held = np.flatnonzero(~aside) if left_out else slice(None)
    sets = LabelSets(sets.labels[held], sets.n_classes) if left_out else sets
    out = []
    for (arr, answered, wrong, n_unrated), c, d in zip(runs, run_coins, draws):
        thresholded = _thresholded(arr[held, :1], sets, answered[held], wrong[held], interval, level)
        n_uncertain = _n_uncertain(posteriors, c.counted, threshold)
        out.append(_summary(d, thresholded, n_uncertain, threshold, n_draws, seed, level, n_unrated, noise))
    return out


def _support(posteriors: Posteriors) -> LabelSets:
    """One class per image that some draw can hold (any, -1 for an image none can): what checking the predictions
    against the posteriors reads (the image and class counts, whether any image can be labelled)."""
    first = np.full(posteriors.n_images, -1, dtype=np.int64)
    possible = posteriors.probs > 0
    first[posteriors.rows[possible]] = posteriors.classes[possible]
    return LabelSets(first[:, None], posteriors.n_classes)


def _per_run(masks: Sequence[ArrayLike | None] | None, n_runs: int, what: str) -> list[ArrayLike | None]:
    if masks is None:
        return [None] * n_runs
    if len(masks) != n_runs:
        raise EvaluationError(f"{what} holds {len(masks)} masks for {n_runs} runs; give one per run, or None")
    return list(masks)


def _checked(
    pred: ArrayLike, ok: ArrayLike | None, failed: ArrayLike | None, support: LabelSets, aside: np.ndarray,
    left_out: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:  # fmt: skip
    """One run's predictions, answered and failed masks (the images `aside` in neither when they are `left_out`),
    and how many of its counted images are unrated."""
    arr, answered, wrong = check_predictions(pred, support, 1, ok, failed, batched=False)
    n_unrated = int((aside & (answered | wrong)).sum())
    if left_out:
        answered, wrong = answered & ~aside, wrong & ~aside
    return arr, answered, wrong, n_unrated


def _summary(
    d: DrawAccuracies, thresholded: Score, n_uncertain: int, threshold: float, n_draws: int, seed: int,
    level: float, n_unrated: int, noise: float | None,
) -> UncertainScore:  # fmt: skip
    label_low, label_high = percentile_interval(d.label, level)
    low, high = percentile_interval(d.boot, level)
    with np.errstate(invalid="ignore"):
        expected = float(np.nanmean(d.label)) if np.isfinite(d.label).any() else float("nan")
    return UncertainScore(
        float(threshold), thresholded, expected, float(low), float(high), float(label_low), float(label_high),
        float(d.scored.mean()), n_uncertain, int(n_draws), int(seed), n_unrated, noise,
    )  # fmt: skip


def _n_uncertain(posteriors: Posteriors, counted: np.ndarray, threshold: float) -> int:
    """Counted images with a posterior strictly between 1 − threshold and threshold."""
    low, high = min(threshold, 1 - threshold), max(threshold, 1 - threshold)
    unsettled = (posteriors.probs > low) & (posteriors.probs < high)
    uncertain = np.zeros(posteriors.n_images, bool)
    uncertain[posteriors.rows[unsettled]] = True
    return int((uncertain & counted).sum())


def base_error_rate(posteriors: Posteriors, base: LabelSets, rated: ArrayLike) -> float:
    """How often the `base` labels are wrong on the `rated` images ((n_images,) bool), by the posteriors: the
    mean over the rated images with a base label of P(none of its base classes is present), classes independent
    (for a single base label, 1 − its posterior). NaN when no rated image has a base label.

    It estimates the error rate of the base source on *unrated* images only when the rated images are a random
    sample of all of them. They seldom are: raters are sent where someone doubted the label (ReaL rated the
    images whose model proposals differed from ImGT), so on unrated images the rate is usually lower, and drawing
    them at this rate gives a lower bound of the expected top-1, not an estimate."""
    shape = (posteriors.n_images, posteriors.n_classes)
    if not isinstance(base, LabelSets) or (base.n_images, base.n_classes) != shape:
        raise EvaluationError(f"base must be LabelSets of {shape[0]} images of {shape[1]} classes, got {base!r}")
    mask = np.asarray(rated, dtype=bool)
    if mask.shape != (posteriors.n_images,):
        raise EvaluationError(f"rated must be ({posteriors.n_images},) bool, got shape {mask.shape}")
    n_classes = posteriors.n_classes
    listed = posteriors.rows * n_classes + posteriors.classes
    order = np.argsort(listed)
    listed, probs = listed[order], posteriors.probs[order]
    rows, cols = np.nonzero(base.labels >= 0)
    keys = rows * n_classes + base.labels[rows, cols]
    at = np.searchsorted(listed, keys)
    found = at < len(listed)
    found[found] = listed[at[found]] == keys[found]
    p = np.zeros(len(keys))
    p[found] = probs[at[found]]
    with np.errstate(divide="ignore"):  # log 0 = -inf where a base class is certain
        log_absent = np.bincount(rows, np.log1p(-np.minimum(p, 1.0)), minlength=base.n_images)
    use = mask & (base.counts > 0)
    return float(np.exp(log_absent[use]).mean()) if use.any() else float("nan")


def _check_unrated(unrated: ArrayLike | None, noise: float | None, n_images: int) -> np.ndarray:
    if noise is not None and (isinstance(noise, bool) or not isinstance(noise, float | int) or not 0 <= noise <= 1):
        raise EvaluationError(f"unrated_noise must be a rate in [0, 1] or None, got {noise!r}")
    if unrated is None:
        return np.zeros(n_images, bool)
    mask = np.asarray(unrated)
    if mask.shape != (n_images,) or mask.dtype != bool:
        raise EvaluationError(f"unrated must be a ({n_images},) bool array, got {mask.dtype} of shape {mask.shape}")
    return mask


def _check_decided(decided: object, posteriors: Posteriors) -> LabelSets:
    if not isinstance(decided, LabelSets):
        raise EvaluationError(f"decided must be LabelSets, got {type(decided).__name__}")
    if (decided.n_images, decided.n_classes) != (posteriors.n_images, posteriors.n_classes):
        raise EvaluationError(
            f"decided has {decided.n_images} images of {decided.n_classes} classes, the posteriors "
            f"{posteriors.n_images} of {posteriors.n_classes}"
        )
    return decided


def _thresholded(
    top1: np.ndarray, sets: LabelSets, answered: np.ndarray, wrong: np.ndarray, interval: str | None, level: float
) -> Score:
    """The ReaL-rule top-1 against `sets`; when every set is empty, a NaN score with nothing scored (the label
    draws may still score images)."""
    if sets.counts.any():
        return multilabel_accuracy(top1, sets, 1, answered, failed=wrong, interval=interval, level=level)
    counted = answered | wrong
    return Score(float("nan"), 0, 0, int((~counted).sum()), int(counted.sum()))
