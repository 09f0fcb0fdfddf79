"""Object-presence probes after POPE (Li et al. 2023, "Evaluating Object Hallucination in Large Vision-Language
Models", EMNLP 2023), on ImageNet-style label sets.

The probes (one per class of an image's reference set, and negatives sampled random, popular or adversarial, as
POPE samples them) are built by `evaluator.presence_sampling`.

Answers are int codes per probe: YES 1, NO 0, FAILED -1 (the model replied but the reply reads as neither yes nor
no: scored as wrong), ERROR -2 (no reply: an infrastructure error, never scored, counted in `n_errors`). Booleans
read as yes (True) and no (False). With TP yes on a positive, FN no on a positive, FP yes on a negative, TN no on a
negative, and F+ / F− the failed replies on positives / negatives, POPE's five numbers are:

accuracy    (TP + TN) / n, over the n scored probes: a failure is in n and never right;
precision   TP / (TP + FP + F−): a failure on a negative counts as a false alarm;
recall      TP / (TP + FN + F+): a failure on a positive counts as a miss;
F1          2 · precision · recall / (precision + recall);
yes-ratio   (TP + FP) / n: the share of yes answers; a failure is in n and is not a yes.

So accuracy, precision, recall and F1 are those of the table with each failure replaced by the wrong answer, and
the yes-ratio describes what the model said. A ratio over nothing is NaN.

`compare_presence` scores the same answers against two references (ImGT and a ReGT snapshot) on the probes of the
images both label. Probe truth is re-read from each reference, so a probe built as a negative from ImGT can be a
positive under ReGT: a yes to it is a "hallucination under ImGT" that is a true object under ReGT, and those are
counted. The accuracy difference b − a gets a paired bootstrap interval over images: an image's probes are
resampled together, since probes of one image are not independent. An image enters a run's difference only
through its kind, (probes right under b − right under a, probes scored), of which there are a few dozen, so
resampling the n images with replacement draws the count of each kind from Multinomial(n, observed shares),
exactly, as `evaluator.paired` does for its four cells; each run is drawn on its own from `seed`, so its interval
does not depend on the other runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError
from evaluator.intervals import LEVEL, wilson_interval
from evaluator.paired import N_BOOT, percentile_interval
from evaluator.presence_sampling import Probes
from evaluator.references import LabelSets, check_boot

YES, NO, FAILED, ERROR = 1, 0, -1, -2


@dataclass(frozen=True)
class PresenceScore:
    """POPE's five numbers for one run (module docstring), with the counts they come from."""

    accuracy: float
    precision: float
    recall: float
    f1: float
    yes_ratio: float
    n_scored: int
    n_tp: int
    n_fn: int
    n_fp: int
    n_tn: int
    n_failed_positive: int
    n_failed_negative: int
    n_errors: int
    n_excluded: int


@dataclass(frozen=True, eq=False)
class PresenceScores:
    """Counts of n_runs runs on the same probes: every array is (n_runs,); the five numbers are properties."""

    n_tp: np.ndarray
    n_fn: np.ndarray
    n_fp: np.ndarray
    n_tn: np.ndarray
    n_failed_positive: np.ndarray
    n_failed_negative: np.ndarray
    n_errors: np.ndarray
    n_excluded: np.ndarray

    @property
    def n_scored(self) -> np.ndarray:
        return self.n_tp + self.n_fn + self.n_fp + self.n_tn + self.n_failed_positive + self.n_failed_negative

    @property
    def accuracy(self) -> np.ndarray:
        return _ratio(self.n_tp + self.n_tn, self.n_scored)

    @property
    def precision(self) -> np.ndarray:
        return _ratio(self.n_tp, self.n_tp + self.n_fp + self.n_failed_negative)

    @property
    def recall(self) -> np.ndarray:
        return _ratio(self.n_tp, self.n_tp + self.n_fn + self.n_failed_positive)

    @property
    def f1(self) -> np.ndarray:
        p, r = self.precision, self.recall
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(p + r > 0, 2 * p * r / (p + r), np.where(np.isnan(p + r), np.nan, 0.0))

    @property
    def yes_ratio(self) -> np.ndarray:
        return _ratio(self.n_tp + self.n_fp, self.n_scored)

    def row(self, i: int) -> PresenceScore:
        """The `PresenceScore` of run i."""
        counts = {name: int(getattr(self, name)[i]) for name in (*_COUNT_FIELDS, "n_scored")}
        return PresenceScore(
            accuracy=float(self.accuracy[i]),
            precision=float(self.precision[i]),
            recall=float(self.recall[i]),
            f1=float(self.f1[i]),
            yes_ratio=float(self.yes_ratio[i]),
            **counts,
        )


_COUNT_FIELDS = ("n_tp", "n_fn", "n_fp", "n_tn", "n_failed_positive", "n_failed_negative", "n_errors", "n_excluded")


@dataclass(frozen=True, eq=False)
class PresenceComparison:
    """The same answers against references a and b on the probes of the images both label; arrays are (n_runs,).

    `yes_absent_a_present_b`: yes answers on a class absent from a's set and present in b's (hallucinations under a
    that are true objects under b); `yes_present_a_absent_b` the reverse. `difference` is accuracy b − accuracy a,
    with its paired bootstrap interval over images (None when n_boot = 0).
    """

    score_a: PresenceScores
    score_b: PresenceScores
    n_common_images: int
    n_common_probes: int
    yes_absent_a_present_b: np.ndarray
    yes_present_a_absent_b: np.ndarray
    difference: np.ndarray
    ci_low: np.ndarray | None = None
    ci_high: np.ndarray | None = None


# ---------------------------------------------------------------------------------------------- scoring


def score_presence(probes: Probes, answers: ArrayLike, reference: LabelSets | None = None) -> PresenceScores:
    """POPE's five numbers of each run. `answers` (n_probes,) or (n_runs, n_probes) codes (module docstring).

    Truth is the probes' own, or read from `reference` when given (its excluded images' probes are then counted
    in `n_excluded`, not scored). Returns arrays of shape (n_runs,) ((1,) for one run of answers).
    """
    codes = check_answers(answers, len(probes))
    if reference is None:
        truth, scored = probes.truth, np.ones(len(probes), bool)
    else:
        truth, scored = probe_truth(probes, reference)
    return _count(codes, truth, scored)


def probe_truth(probes: Probes, reference: LabelSets) -> tuple[np.ndarray, np.ndarray]:
    """Per probe: (truth, scored) under `reference`: the class is in the image's set; the image's set is not empty."""
    _check_probes(probes, reference)
    sets = reference.labels[probes.image]
    truth = (sets == probes.cls[:, None].astype(sets.dtype)).any(axis=1)
    return truth, reference.counts[probes.image] > 0


def compare_presence(
    probes: Probes,
    answers: ArrayLike,
    reference_a: LabelSets,
    reference_b: LabelSets,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> PresenceComparison:
    """The same answers scored against `reference_a` (ImGT) and `reference_b` (a ReGT snapshot) on the probes of
    the images both label, with the hallucination counts and the paired bootstrap interval of the accuracy
    difference over images (module docstring). `n_boot` = 0 skips the interval."""
    codes = check_answers(answers, len(probes))
    check_boot(n_boot)
    truth_a, scored_a = probe_truth(probes, reference_a)
    truth_b, scored_b = probe_truth(probes, reference_b)
    common = scored_a & scored_b
    score_a = _count(codes, truth_a, common)
    score_b = _count(codes, truth_b, common)
    yes = (codes == YES) & common
    images, where = np.unique(probes.image[common], return_inverse=True)
    per_image = _per_image_correct(codes[:, common], truth_a[common], truth_b[common], where, len(images))
    difference = _ratio(score_b.n_tp + score_b.n_tn - score_a.n_tp - score_a.n_tn, score_a.n_scored)
    low = high = None
    if n_boot and len(images):
        low, high = _paired_interval(*per_image, n_boot, level, seed)
    return PresenceComparison(
        score_a,
        score_b,
        len(images),
        int(common.sum()),
        np.count_nonzero(yes & ~truth_a & truth_b, axis=1),
        np.count_nonzero(yes & truth_a & ~truth_b, axis=1),
        difference,
        low,
        high,
    )


def check_answers(answers: ArrayLike, n_probes: int) -> np.ndarray:
    """Answers as (n_runs, n_probes) int8 codes; bools read as yes/no."""
    arr = np.asarray(answers)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != n_probes:
        raise EvaluationError(f"answers have shape {np.shape(answers)}; expected ({n_probes},) or (n_runs, {n_probes})")
    if arr.dtype == bool:
        return arr.astype(np.int8)
    if arr.dtype.kind not in "iu":
        raise EvaluationError(f"answers must be int codes (1 yes, 0 no, -1 failed, -2 error), got dtype {arr.dtype}")
    bad = (arr < ERROR) | (arr > YES)
    if bad.any():
        run, probe = (int(i) for i in np.argwhere(bad)[0])
        raise EvaluationError(
            f"answers run {run}, probe {probe} is {arr[run, probe]}; expected 1 yes, 0 no, -1 failed, -2 error"
        )
    return arr.astype(np.int8)


def _check_probes(probes: Probes, reference: LabelSets) -> None:
    if not isinstance(reference, LabelSets):
        raise EvaluationError(f"reference must be LabelSets, got {type(reference).__name__}")
    n = len(probes.image)
    if np.shape(probes.cls) != (n,) or np.shape(probes.truth) != (n,):
        raise EvaluationError(f"probes have {n} images but {len(probes.cls)} classes and {len(probes.truth)} truths")
    for values, what, limit in (
        (probes.image, "image", reference.n_images),
        (probes.cls, "class", reference.n_classes),
    ):
        bad = np.flatnonzero((values < 0) | (values >= limit))
        if len(bad):
            raise EvaluationError(f"probe {int(bad[0])} has {what} {int(values[bad[0]])}, outside 0..{limit - 1}")


def _count(codes: np.ndarray, truth: np.ndarray, scored: np.ndarray) -> PresenceScores:
    pos, neg = truth & scored, ~truth & scored

    def n(answer: int, mask: np.ndarray) -> np.ndarray:
        return np.count_nonzero((codes == answer) & mask, axis=1)

    return PresenceScores(
        n(YES, pos), n(NO, pos), n(YES, neg), n(NO, neg), n(FAILED, pos), n(FAILED, neg), n(ERROR, scored),
        np.full(len(codes), np.count_nonzero(~scored)),
    )  # fmt: skip


def _per_image_correct(
    codes: np.ndarray, truth_a: np.ndarray, truth_b: np.ndarray, where: np.ndarray, n_images: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per run and image: probes right under a, under b, and scored (errors left out), (n_runs, n_images) each."""
    n_runs = len(codes)
    flat = (np.arange(n_runs)[:, None] * n_images + where[None]).ravel()

    def per_image(mask: np.ndarray) -> np.ndarray:
        return np.bincount(flat[mask.ravel()], minlength=n_runs * n_images).reshape(n_runs, n_images)

    said_yes, said_no = codes == YES, codes == NO
    right_a = (said_yes & truth_a) | (said_no & ~truth_a)
    right_b = (said_yes & truth_b) | (said_no & ~truth_b)
    return per_image(right_a), per_image(right_b), per_image(codes != ERROR)


def _paired_interval(
    right_a: np.ndarray, right_b: np.ndarray, scored: np.ndarray, n_boot: int, level: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per run, the percentile interval of Σ (b − a) / Σ n over resamples of the images (module docstring); when
    no image's probes differ between the references, ± the Wilson upper bound of 0 discordant probes in n (as
    `evaluator.paired` does)."""
    low, high = np.full(len(scored), np.nan), np.full(len(scored), np.nan)
    for run, (gain, size) in enumerate(zip(right_b - right_a, scored, strict=True)):
        n = int(size.sum())
        if not n:
            continue
        if not gain.any():
            high[run] = wilson_interval(0, n, level)[1]
            low[run] = -high[run]
            continue
        # an image is one of a few kinds (gain, probes); resampling the images draws the count of each kind
        width = int(size.max()) + 1  # |gain| ≤ size < width: one integer per kind
        counts = np.bincount((gain + width) * width + size)
        kind = np.flatnonzero(counts)
        draws = np.random.default_rng(seed).multinomial(len(size), counts[kind] / len(size), size=n_boot)
        with np.errstate(invalid="ignore", divide="ignore"):
            diffs = (draws @ (kind // width - width)) / (draws @ (kind % width))
        low[run], high[run] = percentile_interval(diffs, level)
    return low, high


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1), np.nan)
