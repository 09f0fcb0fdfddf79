"""The rules of review in one place: which decisions stand, what an image's consensus is, and its category.

Pure: plain records and functions over decision events, no database and no UI (the only project imports are the
enums that name verdicts and categories, `db.enums`, and the error hierarchy). Everything that shows or stores a
standing decision, a consensus or a category goes through here: the decision log reader (`relabel.decisions.log`),
the review queue and card, `Studio.undo`, snapshots, the dashboard and the agreement report.

**Standing decisions.** Decision events are append-only and read in id order. A *slot* is one user's place on one
image, their annotator decision and their lead adjudication apart. In each slot the newest decision stands unless
it was undone; undoing it (a `retract` event naming it) brings back the one before it. An undo is not undone.

**Consensus** of one image, from its standing decisions (`consensus`, or `settle` on decision keys):

1. a lead's adjudication wins; with several leads, the newest standing adjudication;
2. otherwise a consensus rule (`RULES`; `DEFAULT_RULE`) reads the annotators' decisions. The one rule today,
   ``unanimous``, takes their decision when they all agree and at least ``min_votes`` of them decided. `RULES` is
   what `relabel snapshot create --consensus` and the studio's Snapshots tab offer besides the vote aggregation
   methods (`relabel.votes.aggregation.METHODS`, whose every-answer-yes method is ``all-yes``: no name means two rules);
3. otherwise the image is *disputed* or *undecided* (`Outcome`).

Two decisions agree when their `DecisionKey`s are equal: the same verdict and the same set of classes, in any order.

**Disputed** means one thing everywhere: no lead's adjudication stands and the rule finds no consensus because the
annotators disagree; under ``unanimous``, their standing decisions hold at least two different keys, however many
votes ``min_votes`` asks for. *Undecided*: no adjudication and no disagreement, but fewer than ``min_votes``
annotator decisions (none included). The queue's "disputed" filter, counter and adjudication list, a snapshot's
"disputed" origin and the dashboard's disputed counts all mean `Outcome.disputed`. (Images whose *original label*
other evidence contradicts, before anyone decided them, are "suspect": `relabel suggest --images suspect`.)

**Category** of a consensus against the image's original (ImGT) label set (`categorize`): Z no class fits,
X unclear; for a ``labels`` decision, A when its class set *equals* the original set (the original confirmed as it
stands), otherwise M for several classes and B for one. So with a multi-label original {a, b}: {a, b} is A, {a} is
B (the original narrowed to one class), {a, c} is M; with a single original {a}, {a} is A, as always. An image
without an original label is never A. U: no consensus (disputed or undecided).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from enum import Enum
from operator import attrgetter
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar

from db.enums import Category, Verdict
from relabel.common.errors import InputError

DecisionKey = tuple[Verdict, frozenset[int]]  # what two decisions must share to agree
Vote = tuple[Hashable, DecisionKey]  # (annotator, key of their standing decision)
DECIDED_CATEGORIES = tuple(c for c in Category if c is not Category.U)  # the categories of a consensus
_ID = attrgetter("annotation_id")


def decision_key(verdict: Verdict, classes: Iterable[int]) -> DecisionKey:
    """The key two agreeing decisions share: the verdict and the set of classes (order and repeats ignored)."""
    return verdict, frozenset(classes)


class Decision(NamedTuple):
    """One decision that stands. A NamedTuple, not a dataclass: the log reader builds 150,000 of them at once,
    and a frozen dataclass takes some ten times longer to build."""

    annotation_id: int
    user_id: int
    verdict: Verdict
    classes: tuple[int, ...]
    is_adjudication: bool

    @property
    def key(self) -> DecisionKey:
        return self.verdict, frozenset(self.classes)


class Outcome(str, Enum):
    """How an image stands; the values are the `origin` a snapshot stores for a decided image."""

    adjudication = "adjudication"  # a lead's adjudication stands
    consensus = "consensus"  # the rule found the annotators' consensus
    disputed = "disputed"  # no adjudication; the annotators disagree (see the module docstring)
    undecided = "undecided"  # no adjudication, no disagreement, fewer annotator votes than asked for

    @property
    def decided(self) -> bool:
        return self is Outcome.adjudication or self is Outcome.consensus


class Consensus(NamedTuple):
    """The consensus of one image: the decision a snapshot takes (None when disputed or undecided) and why."""

    decision: Decision | None
    outcome: Outcome

    def category(self, original: Collection[int] | None) -> Category:
        """`categorize` of this consensus against the image's original label set."""
        return categorize(None if self.decision is None else self.decision.key, original)


# -- which decisions stand -------------------------------------------------------------------------------------


class DecisionEvent(Protocol):
    """What the standing rule reads of an event: its id, its verdict and, for an undo, the id it undoes. Met by
    `relabel.decisions.log.LogRow` (the dataset's log) and `relabel.review.cards.HistoryEntry` (one image's)."""

    @property
    def id(self) -> int: ...

    @property
    def verdict(self) -> Verdict: ...

    @property
    def retracts_id(self) -> int | None: ...


class LogEvent(DecisionEvent, Protocol):
    """An event of a dataset's annotation log (`relabel.decisions.log.LogRow`)."""

    @property
    def image_id(self) -> int: ...

    @property
    def user_id(self) -> int: ...

    @property
    def classes(self) -> tuple[int, ...]: ...

    @property
    def is_adjudication(self) -> bool: ...


E = TypeVar("E", bound=DecisionEvent)
LOG_SLOT: Callable[[LogEvent], Hashable] = attrgetter("image_id", "user_id", "is_adjudication")


def standing(events: Sequence[E], slot: Callable[[E], Hashable]) -> dict[Hashable, E]:
    """The events that stand, by slot: in each slot (`slot(event)`, e.g. image, user and adjudication or not) the
    newest decision that no `retract` undid. `events` in id order, oldest first; undo events are never returned."""
    retract = Verdict.retract
    undone = {e.retracts_id for e in events if e.verdict == retract}
    latest: dict[Hashable, E] = {}
    for e in events:
        if e.verdict == retract or e.id in undone:
            continue  # undoing a decision brings back the one before it
        latest[slot(e)] = e
    return latest


def standing_decisions(events: Sequence[LogEvent]) -> dict[int, list[Decision]]:
    """Each image's standing decisions (`standing` by image, user and adjudication or not), from a dataset's
    events in id order. Images without one are left out."""
    by_image: defaultdict[int, list[Decision]] = defaultdict(list)
    for e in standing(events, LOG_SLOT).values():
        by_image[e.image_id].append(Decision(e.id, e.user_id, e.verdict, e.classes, e.is_adjudication))
    return dict(by_image)


def replay(events: Iterable[E], slot: Callable[[E], Hashable]) -> Iterator[tuple[E, E | None]]:
    """Each event (id order) with the decision that stood in its slot just before it, None when none did: for a
    decision, the one it replaces; for an undo, the one it undoes (whose predecessor then stands again). After
    the last event the decisions standing are those of `standing`."""
    stacks: dict[Hashable, list[E]] = {}  # per slot, the decisions not undone, oldest first: the last one stands
    seen: dict[int, tuple[Hashable, E]] = {}  # decision id -> (its slot, the decision)
    for e in events:
        if e.verdict == Verdict.retract:
            key, undone = seen.get(e.retracts_id or -1, (None, None))
            yield e, undone
            if undone is not None:  # an undo of a decision already undone changes nothing
                stacks[key] = [d for d in stacks[key] if d is not undone]
        else:
            key = slot(e)
            seen[e.id] = key, e
            stack = stacks.setdefault(key, [])
            yield e, (stack[-1] if stack else None)
            stack.append(e)


# -- consensus rules -------------------------------------------------------------------------------------------


class ConsensusRule(ABC):
    """How an image that no lead adjudicated is settled from its annotators' standing decisions.

    A rule is registered under its `name` with `register_rule`; the per-image `agree` is all most rules need. A rule
    that learns from the whole dataset (annotator reliabilities, as Dawid-Skene does) overrides `settle_images`.
    """

    name: ClassVar[str]
    description: ClassVar[str]

    @abstractmethod
    def agree(self, votes: Sequence[Vote], min_votes: int) -> tuple[Outcome, DecisionKey | None]:
        """(Outcome.consensus, the agreed key), or (Outcome.disputed or Outcome.undecided, None). `votes`: one
        (annotator, key) pair per annotator with a standing decision, oldest decision first; `min_votes` ≥ 1."""

    def settle_images(
        self, decisions: Mapping[int, Sequence[Decision]], image_ids: Iterable[int], min_votes: int
    ) -> dict[int, Consensus]:
        """The consensus of each of `image_ids`, from every image's standing decisions (image id -> decisions)."""
        return {i: consensus(decisions.get(i, ()), min_votes, self) for i in image_ids}


RULES: dict[str, ConsensusRule] = {}
R = TypeVar("R", bound=type[ConsensusRule])


def register_rule(rule: R) -> R:
    """Class decorator: make `rule` known under its `name` (an instance of it settles images)."""
    RULES[rule.name] = rule()
    return rule


@register_rule
class Unanimous(ConsensusRule):
    name = "unanimous"
    description = "the studio's decisions, where every annotator's standing decision agrees and at least min_votes did"

    def agree(self, votes: Sequence[Vote], min_votes: int) -> tuple[Outcome, DecisionKey | None]:
        keys = {key for _, key in votes}
        if len(keys) > 1:
            return Outcome.disputed, None
        if not keys or len(votes) < min_votes:
            return Outcome.undecided, None
        return Outcome.consensus, keys.pop()


DEFAULT_RULE = Unanimous.name


def reads_votes(consensus: Mapping[str, Any] | None) -> bool:
    """Whether a snapshot's consensus settings (`Snapshot.consensus`; None for older snapshots, all settled by the
    default rule) name a rule that aggregates votes, and so store posteriors: any name but a rule on the studio's
    decisions (`RULES`, as stored: ``unanimous``)."""
    return bool(consensus) and consensus.get("rule", DEFAULT_RULE) not in RULES  # type: ignore[union-attr]


def rule_descriptions() -> dict[str, str]:
    """Each registered rule's description, in the registry's order: what the CLI's help and the studio list."""
    return {name: rule.description for name, rule in RULES.items()}


def get_rule(rule: str | ConsensusRule) -> ConsensusRule:
    """The registered rule named `rule` (a rule itself is returned as it is); InputError naming the known ones."""
    if isinstance(rule, ConsensusRule):
        return rule
    found = RULES.get(rule)
    if found is None:
        raise InputError(f"unknown consensus rule {rule!r}; known: {', '.join(sorted(RULES))}")
    return found


def settle(
    votes: Iterable[Vote],
    adjudications: Sequence[DecisionKey] = (),
    *,
    min_votes: int = 1,
    rule: str | ConsensusRule = DEFAULT_RULE,
) -> tuple[Outcome, DecisionKey | None]:
    """The consensus of one image from decision keys: (outcome, the key decided, None when there is none).

    `votes`: the annotators' standing decisions as (annotator, key), oldest first; `adjudications`: the keys of the
    standing lead adjudications, oldest first (the last one wins).
    """
    if adjudications:
        return Outcome.adjudication, adjudications[-1]
    return get_rule(rule).agree(list(votes), min_votes)


def adjudication(decisions: Iterable[Decision]) -> Decision | None:
    """The adjudication that settles an image, from its standing decisions: the newest; None without one."""
    return max((d for d in decisions if d.is_adjudication), key=_ID, default=None)


def consensus(decisions: Sequence[Decision], min_votes: int = 1, rule: str | ConsensusRule = DEFAULT_RULE) -> Consensus:
    """The consensus of one image from its standing decisions (any order), as `settle` decides it. The decision
    returned is the newest adjudication, or the oldest of the agreeing annotator decisions (whose class order a
    snapshot keeps)."""
    adjudicated = adjudication(decisions)
    if adjudicated is not None:
        return Consensus(adjudicated, Outcome.adjudication)
    ordered = sorted(decisions, key=_ID)
    keys = [d.key for d in ordered]
    outcome, agreed = get_rule(rule).agree([(d.user_id, k) for d, k in zip(ordered, keys)], min_votes)
    if agreed is None:
        return Consensus(None, outcome)
    return Consensus(ordered[keys.index(agreed)], outcome)


def settle_images(
    decisions: Mapping[int, Sequence[Decision]],
    image_ids: Iterable[int],
    *,
    min_votes: int = 1,
    rule: str | ConsensusRule = DEFAULT_RULE,
) -> dict[int, Consensus]:
    """The consensus of each of `image_ids` under `rule`, from every image's standing decisions (image id ->
    decisions, as `standing_decisions` gives them): what a snapshot freezes and the dashboard counts."""
    return get_rule(rule).settle_images(decisions, image_ids, min_votes)


# -- categories ------------------------------------------------------------------------------------------------


def categorize(key: DecisionKey | None, original: Collection[int] | None) -> Category:
    """The category of a decided key against the image's original label set (None or empty: the image has
    none): Z none fit, X unclear, A the original set itself, else M for several classes and B for one; U when
    `key` is None (no consensus)."""
    if key is None:
        return Category.U
    verdict, classes = key
    if verdict == Verdict.none_fit:
        return Category.Z
    if verdict == Verdict.unclear:
        return Category.X
    if original and classes == frozenset(original):
        return Category.A
    return Category.M if len(classes) > 1 else Category.B
