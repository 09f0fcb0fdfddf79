"""Append-only decisions: idempotent writes, undo as an event, roles, consensus rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from db.enums import Role, Verdict
from db.models import Annotation, Image
from relabel.common.errors import ConflictError, InputError, StaleCardError
from relabel.decisions.annotations import add_user, record_annotation, retract_annotation, verify_password
from relabel.decisions.log import current_decisions
from relabel.decisions.rules import Decision, consensus
from relabel.ingest import ingest_dataset, plan_ingest
from tests import images


@pytest.fixture
def image_ids(engine, vocab, tmp_path: Path) -> list[int]:
    root = tmp_path / "r"
    for name in ("n01440764_a.jpg", "n02123045_b.jpg"):
        images.photo(root / name, color=(len(name), 50, 50))
    ingest_dataset(
        engine, plan_ingest(root, vocab), dataset="d", root=root, vocab=vocab, show_progress=False, workers=1
    )
    add_user(engine, "ann", Role.annotator, "pw-ann")
    add_user(engine, "bob", Role.annotator)
    add_user(engine, "lead", Role.lead, "pw-lead")
    with Session(engine) as s:
        return list(s.scalars(select(Image.id).order_by(Image.path)))


def n_annotations(engine) -> int:
    with Session(engine) as s:
        return s.execute(select(func.count()).select_from(Annotation)).scalar_one()


def test_passwords_are_hashed(engine, image_ids) -> None:
    with Session(engine) as s:
        from db.models import User

        stored = s.scalars(select(User.password_hash).where(User.name == "ann")).one()
    assert "pw-ann" not in stored and verify_password("pw-ann", stored) and not verify_password("nope", stored)
    with pytest.raises(ConflictError, match="already exists"):
        add_user(engine, "ann", Role.annotator, "x")


def test_resent_decision_is_stored_once(engine, image_ids) -> None:
    first = record_annotation(
        engine, image_id=image_ids[0], user="ann", verdict=Verdict.labels, classes=[0], client_token="tok-1"
    )
    again = record_annotation(
        engine, image_id=image_ids[0], user="ann", verdict=Verdict.labels, classes=[0], client_token="tok-1"
    )
    assert first == again and n_annotations(engine) == 1


def test_empty_tokens_are_no_tokens_and_a_missing_suggestion_is_a_one_line_error(engine, image_ids) -> None:
    for image_id in image_ids:  # two decisions without a token: both stored, no unique-constraint clash
        record_annotation(engine, image_id=image_id, user="ann", verdict=Verdict.unclear, client_token="")
    assert n_annotations(engine) == 2
    missing = rf"^suggestion #987654 is not a prediction for image {image_ids[0]} "
    with pytest.raises(StaleCardError, match=missing) as err:
        record_annotation(
            engine, image_id=image_ids[0], user="bob", verdict=Verdict.labels, classes=[1], suggestion_id=987654
        )
    assert "\n" not in str(err.value) and n_annotations(engine) == 2


def test_undo_is_a_new_event_and_brings_back_the_previous_decision(engine, image_ids) -> None:
    img = image_ids[0]
    record_annotation(engine, image_id=img, user="ann", verdict=Verdict.labels, classes=[0])
    second = record_annotation(engine, image_id=img, user="ann", verdict=Verdict.none_fit)
    with engine.connect() as conn:
        assert [d.verdict for d in current_decisions(conn, 1)[img]] == [Verdict.none_fit]
    retract_annotation(engine, second, user="ann")
    assert n_annotations(engine) == 3
    with engine.connect() as conn:
        assert [(d.verdict, d.classes) for d in current_decisions(conn, 1)[img]] == [(Verdict.labels, (0,))]
    with pytest.raises(ConflictError, match="belongs to another user"):
        retract_annotation(engine, second, user="bob")


def test_only_leads_adjudicate(engine, image_ids) -> None:
    with pytest.raises(ConflictError, match="only leads adjudicate"):
        record_annotation(
            engine, image_id=image_ids[0], user="ann", verdict=Verdict.labels, classes=[1], adjudicate=True
        )
    assert n_annotations(engine) == 0
    record_annotation(engine, image_id=image_ids[0], user="lead", verdict=Verdict.labels, classes=[1], adjudicate=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"verdict": Verdict.labels, "classes": []}, "needs at least one class"),
        ({"verdict": Verdict.none_fit, "classes": [3]}, "carries no classes"),
        ({"verdict": Verdict.labels, "classes": [1000]}, r"outside 0..999"),
        ({"verdict": Verdict.labels, "classes": [1], "flags": ["sparkly"]}, "unknown flag"),
    ],
)
def test_invalid_decisions_are_refused(engine, image_ids, kwargs, message: str) -> None:
    with pytest.raises(InputError, match=message):
        record_annotation(engine, image_id=image_ids[0], user="ann", **kwargs)
    assert n_annotations(engine) == 0


def d(i: int, user: int, verdict: Verdict = Verdict.labels, classes=(1,), adj: bool = False) -> Decision:
    return Decision(i, user, verdict, tuple(classes), adj)


def test_consensus_rules() -> None:
    assert consensus([]) == (None, "undecided")
    assert consensus([d(1, 1)]) == (d(1, 1), "consensus")
    assert consensus([d(1, 1)], min_votes=2) == (None, "undecided")
    assert consensus([d(1, 1, classes=(1, 2)), d(2, 2, classes=(2, 1))], min_votes=2)[1] == "consensus"
    assert consensus([d(1, 1), d(2, 2, classes=(2,))]) == (None, "disputed")
    assert consensus([d(1, 1), d(2, 2, classes=(2,)), d(3, 9, classes=(5,), adj=True)]) == (
        d(3, 9, classes=(5,), adj=True),
        "adjudication",
    )
