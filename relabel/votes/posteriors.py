"""What a vote-based consensus says about each image: its label set, whether it stays uncertain, its posteriors.

Pure: reads the items of a `relabel.votes.table.VoteTable` and the `relabel.votes.aggregation.Aggregate` fitted on them
(no database). A snapshot (`relabel.snapshots.freeze.create_snapshot`) turns each `VotedImage` into a label set and a
category:

* an item (image, class) is *accepted* when `relabel.votes.aggregation.decide` accepts it (a posterior of at least the
  threshold, or of `keep_original` for a class of the image's original labels: the burden of proof lies on a
  change; a counting method by its own rule); the image's label set is its accepted classes;
* an image with an item neither accepted nor confidently absent (a posterior above 1 - threshold; a counting
  method's undecided items) is *uncertain*: the answers settle nothing, the snapshot gives it category U and sends
  it to review first. `relabel.votes.aggregation.uncertain` is the one definition, which the vote report counts too;
* an uncertain image still carries its *best estimate*: the classes whose posterior reaches 0.5 (for a class of
  its original labels, `keep_original`), the label set the answers make most likely; a snapshot exports it;
* an image whose items are all confidently absent has no class that fits (category Z).

Posteriors may be calibrated first (`relabel.votes.calibration`, `relabel.votes.fit.fit_votes`): every rule here
reads whatever posterior the `Aggregate` holds.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain, compress, repeat
from typing import Protocol

import numpy as np

from relabel.common.errors import InputError, RelabelError, unknown_name
from relabel.decisions.rules import DEFAULT_RULE, RULES, rule_descriptions
from relabel.votes.aggregation import Aggregate, Votes, check_threshold, decide, method_summaries, uncertain

UNCERTAIN = "uncertain"  # a snapshot's origin for an image whose votes settle nothing (category U)
LOWEST_THRESHOLD = 0.5  # below it a class judged more likely absent than present would be accepted
BEST_ESTIMATE = 0.5  # an uncertain image's best estimate: the classes more likely present than absent


class Items(Protocol):
    """What is read of a `relabel.votes.table.VoteTable`: the answers, and the (image id, class index) of each item."""

    @property
    def votes(self) -> Votes: ...

    @property
    def pairs(self) -> np.ndarray: ...


@dataclass(frozen=True)
class VotedImage:
    """One image as the votes settle it: `classes` accepted (ascending class index), `uncertain` whether an item
    is undecided, `posteriors` class index -> P(class present) of every item of the image, `best` its best
    estimate (see the module docstring; None: the method gives none, as set-majority without a majority)."""

    classes: tuple[int, ...]
    uncertain: bool
    posteriors: dict[int, float]
    best: tuple[int, ...] | None = None

    @property
    def none_fit(self) -> bool:
        """No class fits: every item is confidently absent."""
        return not self.classes and not self.uncertain


def consensus_choices() -> dict[str, str]:
    """What a snapshot's consensus can be, name -> what it does: the rules on the studio's decisions
    (`relabel.decisions.rules.RULES`, the default first), then the methods that aggregate votes
    (`relabel.votes.aggregation.METHODS`). The CLI's `--consensus` and the studio's Snapshots tab offer these; one name
    means one rule."""
    rules, methods = rule_descriptions(), method_summaries()
    rules = {DEFAULT_RULE: rules[DEFAULT_RULE], **rules}
    shared = sorted(set(rules) & set(methods))
    if shared:
        raise RelabelError(f"{', '.join(shared)}: registered both as a consensus rule and as an aggregation method")
    return {**rules, **methods}


def check_rule(rule: str, threshold: float, keep_original: float | None = None) -> bool:
    """Validate a snapshot's consensus `rule` (a name of `consensus_choices`), its `threshold` and its
    `keep_original` (None: off); returns whether the rule reads votes (an aggregation method). Raises NotFoundError
    for an unknown rule, InputError for a bad threshold."""
    if rule not in consensus_choices():
        raise unknown_name("consensus rule", rule, list(consensus_choices()))
    check_threshold(threshold, "--threshold")
    if threshold < LOWEST_THRESHOLD:
        raise InputError(
            f"--threshold {threshold} is below {LOWEST_THRESHOLD}: it would accept classes the votes find more "
            "likely absent than present; use a value in [0.5, 1], e.g. 0.9"
        )
    if keep_original is not None:
        check_threshold(keep_original, "--keep-original")
    return rule not in RULES


def voted_images(
    table: Items,
    result: Aggregate,
    threshold: float,
    *,
    original: Mapping[int, Collection[int]] | None = None,
    keep_original: float | None = None,
) -> dict[int, VotedImage]:
    """Image id -> `VotedImage` for every image with an item in `table`, from `result` fitted on `table.votes`.

    With `keep_original`, a class of the image's `original` labels (image id -> classes) is accepted at that
    posterior already (`relabel.votes.aggregation.decide`: the burden of proof lies on a change), and is uncertain
    only between 1 - threshold and `keep_original`."""
    mask = original_items(table.pairs, original) if original is not None and keep_original is not None else None
    accepted = decide(result, threshold, original=mask, keep_original=keep_original)
    undecided = uncertain(result, threshold, original=mask, keep_original=keep_original)
    best = decide(result, BEST_ESTIMATE, original=mask, keep_original=keep_original)
    estimated = np.ones(len(best), bool) if result.undecided is None else ~result.undecided
    return dict(_per_image(table.pairs, accepted, undecided, result.posterior, best, estimated))


def original_items(pairs: np.ndarray, original: Mapping[int, Collection[int]]) -> np.ndarray:
    """(I,) bool: the class of each item `pairs` (I, 2) (image id, class index) is one of its image's `original`
    labels (image id -> classes)."""
    return items_held(pairs, original)


def items_held(pairs: np.ndarray, sets: Mapping[int, Collection[int]]) -> np.ndarray:
    """(I,) bool: the class of each item `pairs` (I, 2) (image id, class index, sorted or not) is in its image's
    set of `sets` (image id -> classes; an image left out holds none). One lookup per image, not per item: an
    (image, class) pair is keyed as image * span + class, span one more than the largest class of `pairs`."""
    if not len(pairs) or pairs[:, 1].min() < 0:
        return np.fromiter((c in sets.get(i, ()) for i, c in pairs.tolist()), bool, len(pairs))
    span = int(pairs[:, 1].max()) + 1
    images = [i for i in np.unique(pairs[:, 0]).tolist() if i in sets]
    keys = np.fromiter((i * span + c for i in images for c in sets[i] if 0 <= c < span), np.int64)
    return np.isin(pairs[:, 0].astype(np.int64) * span + pairs[:, 1], keys)


def _per_image(
    pairs: np.ndarray,
    accepted: np.ndarray,
    undecided: np.ndarray,
    posterior: np.ndarray,
    best: np.ndarray,
    estimated: np.ndarray,
) -> Iterator[tuple[int, VotedImage]]:
    """Walk the items, sorted by image id, one image at a time (`pairs` (I, 2) image id, class index)."""
    if not len(pairs):
        return
    starts = np.flatnonzero(np.r_[True, pairs[1:, 0] != pairs[:-1, 0]])
    ends = np.r_[starts[1:], len(pairs)]
    image_ids, classes = pairs[:, 0].tolist(), pairs[:, 1].tolist()
    accepted_list, undecided_list, p = accepted.tolist(), undecided.tolist(), posterior.tolist()
    best_list, estimated_list = best.tolist(), estimated.tolist()
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        cls = classes[lo:hi]  # slices and compress: a generator per image took twice as long on 25,000 images
        yield (
            image_ids[lo],
            VotedImage(
                tuple(sorted(compress(cls, accepted_list[lo:hi]))),
                any(undecided_list[lo:hi]),
                dict(zip(cls, p[lo:hi])),
                tuple(sorted(compress(cls, best_list[lo:hi]))) if estimated_list[lo] else None,
            ),
        )


POSTERIOR_COLUMNS = ("snapshot_id", "image_id", "class_index", "posterior")  # of `snapshot_posteriors`


def posterior_rows(
    snapshot_id: int, images: Mapping[int, VotedImage], image_ids: Iterable[int]
) -> Iterator[tuple[int, int, int, float]]:
    """`snapshot_posteriors` rows (`POSTERIOR_COLUMNS`: snapshot, image, class, posterior) of the voted images
    among `image_ids`, each image's in the order of its `posteriors`. Made by iterators alone, without a Python step
    per row (185,000 rows for ReaL's raters)."""
    ids = list(image_ids)
    posteriors = [images[i].posteriors for i in ids]
    return zip(
        repeat(snapshot_id),
        chain.from_iterable(map(repeat, ids, map(len, posteriors))),
        chain.from_iterable(posteriors),
        chain.from_iterable(map(dict.values, posteriors)),
    )
