"""Caption hallucination after CHAIR (Rohrbach et al. 2018, "Object Hallucination in Image Captioning", EMNLP), on
ImageNet-style label sets.

Input, per caption: the classes its object mentions were mapped to (the mapping from text is done before, by the
mapper), and optionally the number of mentions that could not be mapped with confidence. A mention is
hallucinated when its class is not in the image's reference set. Over the captions a reference scores:

CHAIR-i     hallucinated mentions / mapped mentions (the instance-level rate);
CHAIR-s     captions with at least one hallucinated mention / captions (the sentence-level rate);
coverage    reference classes mentioned / reference classes, both summed over captions (a class of an image's
            set counts once, however often its caption names it).

Every mention counts, as in the authors' released code: "a dog chasing another dog" with no dog in the set is two
hallucinated mentions. Pass each caption's distinct classes to count each object once. Unmapped mentions are
counted apart (`n_unmapped`) and enter none of the three rates; `chair_i_bounds` gives CHAIR-i were every
unmapped mention right or every one hallucinated. A caption whose image has an empty set is excluded (as in
scoring). `failed` marks captions whose reply was a failure (a refusal, an unusable reply): they have no
mentions, count as captions with a hallucination in CHAIR-s and cover none of their classes (a failure is scored
as wrong); infrastructure errors never reach this function.

An ImageNet label set is not an exhaustive object list. CHAIR on COCO checks mentions against 80 object
categories, taken for each image from its instance annotations and its five reference captions; an ImageNet set
lists the one class the image was collected for (ImGT), or the classes raters confirmed among a few proposals
(ReaL, a ReGT snapshot), out of 1,000. A
mention of a class that is in the photo but not in the set (the bench under the dog, the second fruit in the
bowl) is counted as hallucinated. So CHAIR-i and CHAIR-s against these references overstate hallucination; they
are upper bounds of the rates against the true contents, and coverage is taken over the listed classes only.
A richer set can only lower CHAIR: against a ReGT snapshot that adds classes to ImGT's, the fall of CHAIR is
hallucination ImGT wrongly charged, and what remains still includes true objects no set lists.
`compare_chair` scores the same mentions against two references on the captions both score, and counts the
mentions hallucinated under the first that are true objects under the second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError
from evaluator.references import LabelSets, check_mask


@dataclass(frozen=True)
class ChairScore:
    """CHAIR-i, CHAIR-s and coverage against one reference (module docstring); NaN over nothing."""

    chair_i: float
    chair_s: float
    coverage: float
    n_captions: int
    n_mentions: int
    n_hallucinated: int
    n_hallucinated_captions: int
    n_reference_classes: int
    n_covered: int
    n_unmapped: int
    n_failed: int
    n_excluded: int

    @property
    def chair_i_bounds(self) -> tuple[float, float]:
        """CHAIR-i over mapped and unmapped mentions, were every unmapped mention right, or every one hallucinated."""
        total = self.n_mentions + self.n_unmapped
        if not total:
            return float("nan"), float("nan")
        return self.n_hallucinated / total, (self.n_hallucinated + self.n_unmapped) / total


@dataclass(frozen=True)
class ChairComparison:
    """The same mentions against references a and b on the captions both score.

    `hallucinated_a_present_b`: mentions hallucinated under a whose class is in b's set; `present_a_hallucinated_b`
    the reverse.
    """

    score_a: ChairScore
    score_b: ChairScore
    hallucinated_a_present_b: int
    present_a_hallucinated_b: int


@dataclass(frozen=True, eq=False)
class Mentions:
    """Mentions flattened: `caption` and `cls` (n_mentions,) int; per caption `image`, `n_unmapped`, `failed`."""

    caption: np.ndarray
    cls: np.ndarray
    image: np.ndarray
    n_unmapped: np.ndarray
    failed: np.ndarray


def chair(
    mentions: Sequence[Sequence[int]],
    reference: LabelSets,
    *,
    images: ArrayLike | None = None,
    n_unmapped: ArrayLike | None = None,
    failed: ArrayLike | None = None,
) -> ChairScore:
    """CHAIR-i, CHAIR-s and coverage of captions against `reference`.

    `mentions`: per caption, the mapped classes of its object mentions (in 0..n_classes-1, repeats count);
    `images` (n_captions,) the reference row each caption describes (default: caption i describes image i);
    `n_unmapped` (n_captions,) mentions not mapped with confidence; `failed` (n_captions,) bool failed replies.
    """
    flat = flatten_mentions(mentions, reference, images, n_unmapped, failed)
    present, scored = _presence(flat, reference)
    return _score(flat, reference, present, scored)


def compare_chair(
    mentions: Sequence[Sequence[int]],
    reference_a: LabelSets,
    reference_b: LabelSets,
    *,
    images: ArrayLike | None = None,
    n_unmapped: ArrayLike | None = None,
    failed: ArrayLike | None = None,
) -> ChairComparison:
    """The same captions against `reference_a` (ImGT) and `reference_b` (a ReGT snapshot), on the captions whose
    images both references label (arguments as `chair`)."""
    flat = flatten_mentions(mentions, reference_a, images, n_unmapped, failed)
    if not isinstance(reference_b, LabelSets) or reference_b.labels.shape[0] != reference_a.n_images:
        raise EvaluationError("reference_b must be LabelSets of the same images as reference_a")
    if reference_b.n_classes != reference_a.n_classes:
        raise EvaluationError(f"reference_a has {reference_a.n_classes} classes, reference_b {reference_b.n_classes}")
    present_a, scored_a = _presence(flat, reference_a)
    present_b, scored_b = _presence(flat, reference_b)
    common = scored_a & scored_b
    counted = common[flat.caption]
    return ChairComparison(
        _score(flat, reference_a, present_a, common),
        _score(flat, reference_b, present_b, common),
        int(np.count_nonzero(counted & ~present_a & present_b)),
        int(np.count_nonzero(counted & present_a & ~present_b)),
    )


def flatten_mentions(
    mentions: Sequence[Sequence[int]],
    reference: LabelSets,
    images: ArrayLike | None = None,
    n_unmapped: ArrayLike | None = None,
    failed: ArrayLike | None = None,
) -> Mentions:
    """Validated `Mentions` of the captions against `reference`'s images and classes."""
    if not isinstance(reference, LabelSets):
        raise EvaluationError(f"reference must be LabelSets, got {type(reference).__name__}")
    if isinstance(mentions, str | bytes | np.ndarray) or not isinstance(mentions, Sequence):
        raise EvaluationError("mentions must be a list with one list of classes per caption")
    n = len(mentions)
    lengths = np.fromiter((len(m) for m in mentions), dtype=np.int64, count=n)
    try:
        cls = np.fromiter((c for m in mentions for c in m), dtype=np.int64, count=int(lengths.sum()))
    except (TypeError, ValueError):
        raise EvaluationError("mentions must hold integer class indices") from None
    caption = np.repeat(np.arange(n), lengths)
    bad = np.flatnonzero((cls < 0) | (cls >= reference.n_classes))
    if len(bad):
        raise EvaluationError(
            f"caption {int(caption[bad[0]])} mentions class {int(cls[bad[0]])}, outside 0..{reference.n_classes - 1}"
        )
    image = np.arange(n) if images is None else _per_caption(images, "images", n)
    if images is None and n > reference.n_images:
        raise EvaluationError(f"{n} captions but the reference has {reference.n_images} images; pass images")
    outside = np.flatnonzero((image < 0) | (image >= reference.n_images))
    if len(outside):
        raise EvaluationError(
            f"caption {int(outside[0])} is of image {int(image[outside[0]])}, outside 0..{reference.n_images - 1}"
        )
    unmapped = np.zeros(n, np.int64) if n_unmapped is None else _per_caption(n_unmapped, "n_unmapped", n)
    if (unmapped < 0).any():
        raise EvaluationError(f"n_unmapped of caption {int(np.argmax(unmapped < 0))} is negative")
    fail = np.zeros(n, bool) if failed is None else check_mask(failed, "failed", (n,))
    if (fail & (lengths > 0)).any():
        raise EvaluationError(f"caption {int(np.argmax(fail & (lengths > 0)))} is failed but has mentions")
    return Mentions(caption, cls, image, unmapped, fail)


def _per_caption(values: ArrayLike, what: str, n: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != (n,) or arr.dtype.kind not in "iu":
        raise EvaluationError(f"{what} must be integers of shape ({n},), got {arr.dtype} {arr.shape}")
    return arr.astype(np.int64)


def _presence(flat: Mentions, reference: LabelSets) -> tuple[np.ndarray, np.ndarray]:
    """Per mention: its class is in the caption's image set; per caption: the image's set is not empty."""
    sets = reference.labels[flat.image[flat.caption]]
    present = (sets == flat.cls[:, None].astype(sets.dtype)).any(axis=1)
    return present, reference.counts[flat.image] > 0


def _score(flat: Mentions, reference: LabelSets, present: np.ndarray, scored: np.ndarray) -> ChairScore:
    n_captions = len(scored)
    counted = scored[flat.caption]
    hallucinated = counted & ~present
    per_caption = np.bincount(flat.caption[hallucinated], minlength=n_captions) > 0
    n_bad_captions = int(np.count_nonzero((per_caption | flat.failed) & scored))
    # coverage: distinct (caption, class) pairs whose class is in the set, over the sets' sizes
    key = flat.caption[counted & present] * reference.n_classes + flat.cls[counted & present]
    n_covered = len(np.unique(key))
    n_classes = int(reference.counts[flat.image][scored].sum())
    n_mentions, n_hallucinated, n_scored = int(counted.sum()), int(hallucinated.sum()), int(scored.sum())
    return ChairScore(
        _share(n_hallucinated, n_mentions),
        _share(n_bad_captions, n_scored),
        _share(n_covered, n_classes),
        n_scored,
        n_mentions,
        n_hallucinated,
        n_bad_captions,
        n_classes,
        n_covered,
        int(flat.n_unmapped[scored].sum()),
        int(np.count_nonzero(flat.failed & scored)),
        n_captions - n_scored,
    )


def _share(part: int, whole: int) -> float:
    return part / whole if whole else float("nan")
