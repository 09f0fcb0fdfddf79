"""The order of the review queue (`relabel.review.queue`): which images are most worth a look first.

When the dataset has a snapshot whose consensus read votes (`relabel snapshot create --consensus ds`), the
queue serves in two tiers:

1. **By expected benefit.** The images of the newest such snapshot that hold posteriors and whose expected benefit
   of one more review (`relabel.review.active.review_benefit` over that snapshot's posteriors and every stored
   run's top-1, read by `relabel.review.benefit`) reaches `MIN_BENEFIT`, highest benefit first: an image whose
   label is uncertain and where the runs' scores hang on it comes before one whose label is as uncertain but no
   run's top-1 is at stake. This is `relabel.review.active.active_order` restricted to these images (the same
   seeded tie-break). Every image the snapshot leaves *uncertain* (category U, origin "uncertain") is here when
   its threshold and --keep-original are at most 0.95: its doubtful pair alone adds more than 0.05.
2. **By evidence.** Every other image (no votes, or votes that settle it: benefit under `MIN_BENEFIT`) by the
   evidence that its original label is wrong, summed from four signals (weights in `WEIGHTS`): the suggestion's
   top-1 differs from the original label; the classifier gives the original label little probability; prior
   relabels (ReaL, Shankar, MTurk...) leave the original label out; the image is disputed. An image uncertain in
   the snapshot adds `UNCERTAIN_WEIGHT`, more than the four together, so one that fell to this tier (a threshold
   above 0.95) still leads it.

Without a vote-based snapshot there is no benefit and no uncertain image: the whole queue is tier 2, the evidence
order. Ties keep a seeded shuffle, so two workspaces built the same way serve the same order. The order is
fixed when the queue is built (`Studio.refresh`); decisions change who may be served an image, not where it stands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relabel.decisions.rules import Outcome
from relabel.review.active import AT_STAKE

if TYPE_CHECKING:
    from relabel.review.image_evidence import Evidence

WEIGHTS = {"suggestion": 1.0, "classifier": 1.0, "priors": 1.0, "annotators": 2.0}
# an image uncertain in the newest vote-based snapshot: more than all of WEIGHTS together, so it comes first
UNCERTAIN_WEIGHT = sum(WEIGHTS.values()) + 1.0
# an image's expected benefit below this (expected label errors plus runs' top-1 changes) is nothing worth a review
# before the evidence order: `relabel.review.active`'s own floor for a run at stake
MIN_BENEFIT = AT_STAKE


def priority(e: Evidence, disputed: bool | None = None) -> float:
    """Evidence that the original label is wrong, in [0, sum(WEIGHTS)], plus UNCERTAIN_WEIGHT for an uncertain
    image; see the module docstring. `disputed`: whether the image is disputed, when the caller knows it (None:
    worked out from `e`)."""
    score = UNCERTAIN_WEIGHT if e.uncertain else 0.0
    if e.original is None:
        return score + sum(WEIGHTS.values())  # nothing to confirm: every signal says "look"
    if e.suggestion is not None and e.suggestion != e.original:
        score += WEIGHTS["suggestion"]
    if e.original_confidence is not None:
        score += WEIGHTS["classifier"] * (1.0 - min(max(e.original_confidence, 0.0), 1.0))
    if e.priors:
        score += WEIGHTS["priors"] * sum(e.original not in p for p in e.priors) / len(e.priors)
    if disputed is None:
        disputed = e.settle().outcome is Outcome.disputed
    if disputed:
        score += WEIGHTS["annotators"]
    return score


def by_benefit(e: Evidence) -> bool:
    """Whether the image is served by its expected benefit (tier 1 of the module docstring)."""
    return e.benefit is not None and e.benefit >= MIN_BENEFIT


def rank_key(e: Evidence, evidence_priority: float) -> tuple[int, float]:
    """Sort key of an image in the queue, smallest first: (tier, minus the benefit or the evidence priority)."""
    if e.benefit is not None and by_benefit(e):
        return (0, -e.benefit)
    return (1, -evidence_priority)
