"""Assignments: an image assigned to annotators (directly or through its original class) is served only to them and
first in their queue; unassigned images go to everyone; several studios on one database honour the same rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from db import init_db
from db.migrations import MIGRATIONS, current_version
from db.models import Assignment, Image, pk
from relabel.common.errors import ConflictError, InputError, NotFoundError
from relabel.review.assignments import (
    AssignmentRow,
    add_assignments,
    assigned_images,
    candidates,
    list_assignments,
    remove_assignments,
    resolve_images,
)
from relabel.review.studio import Studio
from tests.studio_workspace import build_workspace


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return build_workspace(tmp_path / "ws")


def studio(engine: Engine, tmp_path: Path, overlap: int = 1) -> Studio:
    return Studio(engine, cache_dir=tmp_path / "cache", overlap=overlap)


def served(s: Studio, user: str) -> list[int]:
    """Every image `user` is served, deciding each with the original label, until nothing is left."""
    out = []
    while True:
        card, token = s.next_card(user)
        if card is None:
            return out
        out.append(card.image_id)
        s.decide(user, token, card.image_id, "original")


def ids_by_name(engine: Engine) -> dict[str, int]:
    with Session(engine) as s:
        return {Path(p).stem: i for p, i in s.exec(select(col(Image.path), pk(Image.id))).all()}


class TestRules:
    def test_resolution_by_image_and_class_in_queue_order(self) -> None:
        rows = [AssignmentRow(1, 30, None), AssignmentRow(2, None, 7), AssignmentRow(1, None, 7)]
        got = assigned_images(rows, {10: (7,), 20: (3,), 30: (3,)}, order=[30, 20, 10])
        assert dict(got.users) == {30: frozenset({1}), 10: frozenset({1, 2})}
        assert got.first_for(1) == (30, 10) and got.first_for(2) == (10,) and got.first_for(3) == ()
        assert got.allows(20, 3) and got.allows(10, 2) and not got.allows(30, 2)

    def test_candidates_put_the_assigned_first_then_one_round_from_the_cursor(self) -> None:
        assert list(candidates([5], [1, 2, 3], start=1)) == [(None, 5), (1, 2), (2, 3), (0, 1)]


class TestQueue:
    def test_an_assigned_image_goes_only_to_its_assignee_and_first(self, engine: Engine, tmp_path: Path) -> None:
        s = studio(engine, tmp_path)
        last = s.queue.order[-1]  # the image the queue would serve last
        assert add_assignments(engine, s.dataset_id, "alice", image_ids=[last], by="lena") == 1
        bob = served(s, "bob")
        assert last not in bob and len(bob) == len(s.queue.order) - 1
        assert served(s, "alice") == [last]

    def test_unassigned_images_still_go_to_everyone(self, engine: Engine, tmp_path: Path) -> None:
        s = studio(engine, tmp_path, overlap=2)
        first = s.queue.order[0]
        add_assignments(engine, s.dataset_id, "alice", image_ids=[first])
        assert set(served(s, "bob")) == set(s.queue.order) - {first}
        assert sorted(served(s, "alice")) == sorted(s.queue.order)

    def test_a_class_assigns_every_image_whose_original_labels_hold_it(self, engine: Engine, tmp_path: Path) -> None:
        s = studio(engine, tmp_path)
        tabby = ids_by_name(engine)["n02123045_tabby"]
        add_assignments(engine, s.dataset_id, "bob", class_index=s.vocab.resolve("n02123045"), vocab=s.vocab)
        assert tabby not in served(s, "alice")
        assert served(s, "bob") == [tabby]

    def test_an_assignment_made_elsewhere_is_honoured_on_the_next_card(self, tmp_path: Path, db_url: str) -> None:
        """Two studios on one database (SQLite, and PostgreSQL with its SKIP LOCKED claims)."""
        engine = build_workspace(tmp_path / "shared", db_url)
        one, other = studio(engine, tmp_path), studio(engine, tmp_path)
        last = one.queue.order[-1]
        card, _ = one.next_card("alice")  # both queues have read the (empty) assignments
        held, token = other.next_card("bob")
        assert card is not None and held is not None and last not in (card.image_id, held.image_id)
        add_assignments(engine, one.dataset_id, "bob", image_ids=[last])
        other.decide("bob", token, held.image_id, "original")  # the card bob holds stays his until he decides it
        assert other.next_card("bob")[0].image_id == last  # type: ignore[union-attr]
        assert not one.queue.may_serve(last, one.user("alice")[0])
        remove_assignments(engine, one.dataset_id, "bob", image_ids=[last])
        other.skip("bob", last)  # his lease ended: the image is everyone's again
        assert one.queue.may_serve(last, one.user("alice")[0])

    def test_a_non_assignee_may_not_open_or_decide_it(self, engine: Engine, tmp_path: Path) -> None:
        s = studio(engine, tmp_path)
        image = s.queue.order[0]
        add_assignments(engine, s.dataset_id, "alice", image_ids=[image])
        assert not s.may_open("bob", image) and s.may_open("alice", image) and s.may_open("lena", image)


class TestLeadActions:
    def test_unknown_user_image_or_class_store_nothing(self, engine: Engine, tmp_path: Path) -> None:
        s = studio(engine, tmp_path)
        with pytest.raises(NotFoundError, match="unknown user 'zed'"):
            add_assignments(engine, s.dataset_id, "zed", image_ids=[s.queue.order[0]])
        with pytest.raises(NotFoundError, match="'nope.jpg'"):
            resolve_images(engine, s.dataset_id, ["n01440764_tench.jpg", "nope.jpg"])
        with pytest.raises(NotFoundError, match="999999"):
            add_assignments(engine, s.dataset_id, "alice", image_ids=[s.queue.order[0], 999999])
        with pytest.raises(InputError, match="not both"):
            add_assignments(engine, s.dataset_id, "alice", image_ids=[1], class_index=2, vocab=s.vocab)
        assert list_assignments(engine, s.dataset_id, s.vocab) == []

    def test_names_and_ids_resolve_and_adding_twice_adds_nothing(self, engine: Engine, tmp_path: Path) -> None:
        s = studio(engine, tmp_path)
        ids = ids_by_name(engine)
        tench = ids["n01440764_tench"]
        found = resolve_images(engine, s.dataset_id, ["n01440764_tench.jpg", str(ids["n07920052_espresso"])])
        assert found == [tench, ids["n07920052_espresso"]]
        assert add_assignments(engine, s.dataset_id, "alice", image_ids=found) == 2
        assert add_assignments(engine, s.dataset_id, "alice", image_ids=found) == 0
        listed = list_assignments(engine, s.dataset_id, s.vocab, user="alice")
        assert {x.image_id for x in listed} == set(found) and all(x.what == "image" for x in listed)
        assert remove_assignments(engine, s.dataset_id, "alice", everything=True) == 2
        with pytest.raises(ConflictError, match="no such assignment"):
            remove_assignments(engine, s.dataset_id, "alice", image_ids=[tench])

    def test_the_database_refuses_a_row_with_both_or_neither(self, engine: Engine, tmp_path: Path) -> None:
        s = studio(engine, tmp_path)
        for row in (
            Assignment(dataset_id=s.dataset_id, user_id=1, image_id=s.queue.order[0], class_key="n01440764"),
            Assignment(dataset_id=s.dataset_id, user_id=1),
        ):
            with Session(engine) as session, pytest.raises(IntegrityError):
                session.add(row)
                session.commit()


def test_migration_11_adds_the_table_to_an_older_workspace(tmp_path: Path) -> None:
    from sqlalchemy import text

    from db import create_db_engine

    engine = create_db_engine(f"sqlite:///{tmp_path / 'old.db'}")
    init_db(engine)
    with engine.begin() as conn:  # the workspace as a relabel before migration 11 left it
        conn.execute(text("DROP TABLE assignments"))
        conn.execute(text("DELETE FROM schema_version WHERE version >= 11"))
        assert current_version(conn) == max(m.version for m in MIGRATIONS if m.version < 11)
    init_db(engine)
    with engine.connect() as conn:
        assert conn.dialect.has_table(conn, "assignments") and current_version(conn) == MIGRATIONS[-1].version
