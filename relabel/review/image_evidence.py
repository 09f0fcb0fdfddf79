"""What the review queue knows of one image: its evidence (original label, suggestion, classifier confidence,
prior relabels, the newest vote snapshot's word) and its standing decisions, and the consensus they settle on.

A leaf of `relabel.review`: the queue, the ranking, the assignments, the leases and the grid all read these
records, and it imports none of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

from db.enums import Category
from relabel.decisions.rules import Decision, DecisionKey, Outcome, categorize, settle


class Settled(NamedTuple):
    """An image's consensus in the queue (`relabel.decisions.rules.settle`)."""

    outcome: Outcome
    key: DecisionKey | None  # the decision settled on; None when disputed or undecided
    category: Category  # U when disputed or undecided


@dataclass
class Evidence:
    """What is known about one readable image when the queue is built, and its standing decisions."""

    image_id: int
    original: int | None  # first ImGT class, None when the image has no original label
    suggestion: int | None = None  # the suggestion's top-1 class
    original_confidence: float | None = None  # classifier probability of the original class (0 if not in top-k)
    priors: list[list[int]] = field(default_factory=list)  # label sets of prior relabels
    voters: dict[int, DecisionKey] = field(default_factory=dict)  # annotator id -> key of their standing decision
    adjudications: dict[int, DecisionKey] = field(default_factory=dict)  # lead id -> adjudication key, oldest first
    original_labels: tuple[int, ...] = ()  # the whole ImGT label set; () means (original,)
    uncertain: bool = False  # uncertain in the newest vote-based snapshot (see the module docstring)
    benefit: float | None = None  # expected benefit of one more review; None: no posteriors of it

    def __post_init__(self) -> None:
        if not self.original_labels and self.original is not None:
            self.original_labels = (self.original,)

    def take(self, decisions: Iterable[Decision]) -> None:
        """Make `decisions` (the image's standing decisions, any order) its voters and adjudications."""
        self.voters, self.adjudications = {}, {}
        for d in sorted(decisions, key=attrgetter("annotation_id")):
            (self.adjudications if d.is_adjudication else self.voters)[d.user_id] = d.key

    def settle(self) -> Settled:
        """The image's consensus now (`relabel.decisions.rules.settle`) and its category."""
        outcome, key = settle(self.voters.items(), list(self.adjudications.values()))
        return Settled(outcome, key, categorize(key, self.original_labels))
