"""The rules of review (relabel/decisions/rules.py), and every place that shows or stores a category agreeing on
them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlmodel import Session

from db.enums import Category, Verdict
from db.models import Image, Label, LabelSource, Snapshot, SnapshotLabel
from relabel.common.errors import InputError
from relabel.decisions.annotations import record_annotation
from relabel.decisions.rules import (
    DEFAULT_RULE,
    RULES,
    Decision,
    Outcome,
    categorize,
    consensus,
    decision_key,
    get_rule,
    replay,
    rule_descriptions,
    settle,
    standing,
)
from relabel.review.dashboard import dashboard
from relabel.review.studio import Studio
from relabel.snapshots.freeze import create_snapshot
from tests.studio_workspace import build_workspace

L, Z, X = Verdict.labels, Verdict.none_fit, Verdict.unclear


class Ev:
    """A bare decision event: what `standing` and `replay` read."""

    def __init__(self, id: int, who: str, verdict: Verdict = L, retracts_id: int | None = None) -> None:
        self.id, self.who, self.verdict, self.retracts_id = id, who, verdict, retracts_id

    def __repr__(self) -> str:
        return f"Ev({self.id})"


def by_who(e: Ev) -> str:
    return e.who


class TestStanding:
    def test_the_newest_decision_of_a_slot_stands(self) -> None:
        events = [Ev(1, "a"), Ev(2, "b"), Ev(3, "a")]
        assert {k: e.id for k, e in standing(events, by_who).items()} == {"a": 3, "b": 2}

    def test_undo_brings_back_the_decision_before(self) -> None:
        events = [Ev(1, "a"), Ev(2, "a"), Ev(3, "a", Verdict.retract, retracts_id=2)]
        assert {k: e.id for k, e in standing(events, by_who).items()} == {"a": 1}
        events.append(Ev(4, "a", Verdict.retract, retracts_id=1))
        assert standing(events, by_who) == {}

    def test_replay_pairs_each_event_with_what_it_replaced_or_undid(self) -> None:
        events = [Ev(1, "a"), Ev(2, "a"), Ev(3, "a", Verdict.retract, retracts_id=2), Ev(4, "a")]
        got = [(e.id, None if before is None else before.id) for e, before in replay(events, by_who)]
        assert got == [(1, None), (2, 1), (3, 2), (4, 1)]  # after the undo of 2, decision 1 stood again


class TestSettle:
    def test_adjudication_wins_and_the_newest_of_several(self) -> None:
        votes = [("a", decision_key(L, [1])), ("b", decision_key(L, [2]))]
        assert settle(votes, [decision_key(L, [3]), decision_key(Z, [])]) == (Outcome.adjudication, (Z, frozenset()))

    def test_unanimous_needs_equal_keys_in_any_class_order(self) -> None:
        votes = [("a", decision_key(L, [1, 2])), ("b", decision_key(L, [2, 1, 1]))]
        assert settle(votes) == (Outcome.consensus, (L, frozenset({1, 2})))

    def test_disagreement_is_disputed_whatever_min_votes_asks(self) -> None:
        votes = [("a", decision_key(L, [1])), ("b", decision_key(X, []))]
        assert settle(votes, min_votes=3)[0] is Outcome.disputed

    def test_too_few_votes_is_undecided(self) -> None:
        assert settle([("a", decision_key(L, [1]))], min_votes=2) == (Outcome.undecided, None)
        assert settle([]) == (Outcome.undecided, None)

    def test_consensus_takes_the_oldest_agreeing_decision(self) -> None:
        older, newer = Decision(5, 1, L, (2, 1), False), Decision(9, 2, L, (1, 2), False)
        assert consensus([newer, older]) == (older, Outcome.consensus)

    def test_an_unknown_rule_names_the_known_ones(self) -> None:
        with pytest.raises(InputError, match=f"unknown consensus rule 'nope'; known: {', '.join(sorted(RULES))}$"):
            get_rule("nope")

    def test_the_rules_offered_are_what_the_registry_holds(self) -> None:
        assert rule_descriptions() == {name: rule.description for name, rule in RULES.items()}
        assert DEFAULT_RULE in RULES and "studio's decisions" in rule_descriptions()[DEFAULT_RULE]


@pytest.mark.parametrize(
    ("key", "original", "category"),
    [
        ((L, {1}), (1,), Category.A),
        ((L, {2}), (1,), Category.B),
        ((L, {1, 2}), (1,), Category.M),
        ((L, {1, 2}), (2, 1), Category.A),  # the multi-label original confirmed as it stands
        ((L, {1}), (1, 2), Category.B),  # narrowed to one of its classes
        ((L, {1, 3}), (1, 2), Category.M),
        ((L, {1}), (), Category.B),  # no original label: never A
        ((Z, set()), (1,), Category.Z),
        ((X, set()), (1,), Category.X),
        (None, (1,), Category.U),
    ],
)
def test_categories(key, original, category) -> None:
    assert categorize(None if key is None else (key[0], frozenset(key[1])), original) is category


# -- one workspace, every view -----------------------------------------------------------------------------------


@pytest.fixture
def mixed(db_url: str, tmp_path: Path) -> Studio:
    """The studio workspace with every kind of image: confirmed, changed, several classes, none fit, unclear,
    disputed, adjudicated, undecided, an undone decision, and an image whose original label holds two classes."""
    engine = build_workspace(tmp_path, db_url, extra=6)
    with Session(engine) as s:
        ids = {p.split("/")[-1]: i for p, i in s.execute(select(Image.path, Image.id))}
        imgt = s.scalar(select(LabelSource.id).where(LabelSource.name == "imgt"))
        s.execute(  # espresso and cup: a multi-label original
            update(Label)
            .where(Label.source_id == imgt, Label.image_id == ids["n07920052_espresso.jpg"])
            .values(classes=[967, 968])
        )
        s.commit()

    def decide(name: str, user: str, verdict: Verdict, classes=(), adjudicate: bool = False) -> None:
        record_annotation(
            engine, image_id=ids[name], user=user, verdict=verdict, classes=list(classes), adjudicate=adjudicate
        )

    decide("n02123045_tabby.jpg", "alice", L, [281])  # A
    decide("n07920052_espresso.jpg", "alice", L, [968, 967])  # A: the two-class original confirmed
    decide("n07920052_espresso.jpg", "bob", L, [967, 968])
    decide("n03773504_missile.jpg", "alice", L, [744])  # disputed
    decide("n03773504_missile.jpg", "bob", L, [657])
    decide("n01440764_tench.jpg", "alice", Z)
    decide("n02124075_egyptian.jpg", "alice", X)
    decide("n04266014_shuttle.jpg", "alice", L, [812])  # disputed, then adjudicated to B
    decide("n04266014_shuttle.jpg", "bob", L, [812, 744])
    decide("n04266014_shuttle.jpg", "lena", L, [744], adjudicate=True)
    decide("n02123045_extra0000.jpg", "alice", L, [281, 282])  # M
    decide("n03773504_extra0002.jpg", "bob", L, [744])  # B: projectile, not missile
    decide("n02124075_extra0004.jpg", "alice", L, [285])
    decide("n02124075_extra0004.jpg", "alice", L, [281])  # superseded: B by the newer decision
    decide("n07920052_extra0001.jpg", "alice", L, [967])  # A, then B, then undone in the studio: A again
    decide("n07920052_extra0001.jpg", "alice", L, [504])
    studio = Studio(engine, cache_dir=tmp_path / "cache", overlap=2)
    assert studio.queue.settled(ids["n07920052_extra0001.jpg"]).category is Category.B
    assert studio.undo("alice") == ids["n07920052_extra0001.jpg"]  # the queue learns it live, not by a rebuild
    return studio


def test_queue_card_snapshot_and_dashboard_agree_on_every_image(mixed: Studio) -> None:
    studio = mixed
    create_snapshot(studio.engine, "now")
    with Session(studio.engine) as s:
        snap = s.scalar(select(Snapshot.id).where(Snapshot.name == "now"))
        frozen = {
            i: (c, o)
            for i, c, o in s.execute(
                select(SnapshotLabel.image_id, SnapshotLabel.category, SnapshotLabel.origin).where(
                    SnapshotLabel.snapshot_id == snap
                )
            )
        }
        paths = dict(s.execute(select(Image.id, Image.path)).all())
    queue, card = {}, {}
    for image_id in frozen:
        settled = studio.queue.settled(image_id)
        queue[image_id] = settled.category
        shown, _ = studio.open_card("lena", image_id)
        outcome, card[image_id] = shown.settled()
        assert outcome is settled.outcome, paths[image_id]
    snapshot = {i: c for i, (c, _) in frozen.items()}
    assert queue == snapshot and card == snapshot
    live = dashboard(studio.engine).categories
    assert live.counts == {c.value: n for c, n in Counter(snapshot.values()).items()} | {
        c.value: 0 for c in Category if c not in snapshot.values()
    }
    named = {paths[i].split("/")[-1]: c.value for i, c in snapshot.items()}
    assert named == {
        "n02123045_tabby.jpg": "A",
        "n07920052_espresso.jpg": "A",
        "n03773504_missile.jpg": "U",
        "n01440764_tench.jpg": "Z",
        "n02124075_egyptian.jpg": "X",
        "n04266014_shuttle.jpg": "B",
        "n02123045_extra0000.jpg": "M",
        "n03773504_extra0002.jpg": "B",
        "n07920052_extra0001.jpg": "A",
        "n02124075_extra0004.jpg": "B",
        "n01440764_extra0003.jpg": "U",
        "n04266014_extra0005.jpg": "U",
    }
    disputed = {paths[i].split("/")[-1] for i in studio.queue.disputed()}
    assert disputed == {"n03773504_missile.jpg"} and live.disputed == 1
    assert sum(o == "disputed" for _, o in frozen.values()) == 1
