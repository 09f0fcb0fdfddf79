"""Every status and kind the workspace stores, in one place."""

from __future__ import annotations

from enum import Enum


class ImageStatus(str, Enum):
    ok = "ok"
    missing = "missing"  # named by a label file or manifest, not on disk (yet)
    unreadable = "unreadable"  # on disk but not a decodable image; `reason` says why


class SourceKind(str, Enum):
    original = "original"  # the dataset's own labels (ImGT)
    prior = "prior"  # an earlier relabeling effort: ReaL, Shankar et al., MTurk votes, ...


class PredictionStatus(str, Enum):
    ok = "ok"
    error = "error"  # the call failed (`reason` says why): scored by its cause, relabel.evaluation.failure_causes


class Verdict(str, Enum):
    labels = "labels"  # one or more classes are in the image
    none_fit = "none_fit"  # no class of the vocabulary fits (category Z)
    unclear = "unclear"  # the annotator cannot tell (category X)
    retract = "retract"  # undo of an earlier decision; the decision itself stays in the history


class SuggestionAction(str, Enum):
    none = "none"  # no suggestion was shown
    accepted = "accepted"
    edited = "edited"
    rejected = "rejected"


class Category(str, Enum):
    """ReGT category of an image in a snapshot (the Shankar et al. scheme plus U for undecided)."""

    A = "A"  # original label confirmed
    B = "B"  # exactly one label, different from the original
    M = "M"  # several labels
    Z = "Z"  # no class fits
    X = "X"  # unclear
    U = "U"  # nobody decided; labels follow the snapshot's policy for undecided images


class Answer(str, Enum):
    """A worker's answer to "is this class in the image?" (a vote, packed in `db.models.VotePair`)."""

    no = "no"
    maybe = "maybe"
    yes = "yes"


class Role(str, Enum):
    annotator = "annotator"
    lead = "lead"
