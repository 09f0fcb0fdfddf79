"""Decisions an annotator forges: made-up tokens, tokens moved to other images, images of another dataset, classes
of another vocabulary. Each is refused with a message and the database is unchanged; a snapshot never freezes a
class outside its dataset's vocabulary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.enums import SuggestionAction, Verdict
from db.models import Annotation, Image, Prediction, Snapshot, User
from relabel.common.errors import ConflictError, InputError, NotFoundError, RelabelError
from relabel.common.vocabulary import load_vocabulary_file
from relabel.common.workspace import get_dataset
from relabel.decisions.annotations import store_annotation
from relabel.exports.formats import export_snapshot
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.ingest.layouts import LayoutOptions
from relabel.review.studio import Studio
from relabel.snapshots.freeze import create_snapshot
from tests import images
from tests.studio_workspace import build_workspace
from ui import card_api


@pytest.fixture
def two_datasets(db_url: str, tmp_path: Path) -> tuple[Studio, int]:
    """The studio on dataset 'photos' (ImageNet classes), and the id of an image of a 10-class dataset 'small'."""
    engine = build_workspace(tmp_path, db_url)
    (tmp_path / "ten.txt").write_text("\n".join(f"thing{i}" for i in range(10)) + "\n")
    vocab = load_vocabulary_file(tmp_path / "ten.txt")
    root = tmp_path / "small"
    images.photo(root / "a.jpg")
    (tmp_path / "m.csv").write_text("path,labels\na.jpg,thing3\n")
    plan = plan_ingest(root, vocab, "manifest", LayoutOptions(manifest=tmp_path / "m.csv"))
    ingest_dataset(engine, plan, dataset="small", root=root, vocab=vocab, show_progress=False, workers=1)
    with Session(engine) as s:
        small = get_dataset(s, "small")
        other = s.scalars(select(Image.id).where(Image.dataset_id == small.id)).one()
    return Studio(engine, "photos", cache_dir=tmp_path / "cache", overlap=1), other


def count(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.scalar(select(func.count()).select_from(Annotation)) or 0)


def attempt(studio: Studio, user: str, data: dict[str, Any]) -> str:
    """The refusal of a forged decision: an error raised, or an error reply."""
    try:
        reply = card_api.decide(studio, user, data)
    except RelabelError as exc:
        return str(exc)
    assert reply.get("error"), reply
    return str(reply["error"])


def test_made_up_and_moved_tokens_write_nothing(two_datasets: tuple[Studio, int]) -> None:
    studio, other = two_datasets
    card = card_api.next_card(studio, "alice", {})["card"]
    token = card["key"].split(":")[1]
    forged = [
        {"key": f"{card['image_id']}:{'a' * 24}", "action": "original"},  # made up
        {"key": f"{other}:{'b' * 24}", "action": "labels", "classes": [500, 999]},  # another dataset's image
        {"key": f"{other}:{token}", "action": "labels", "classes": [3]},  # a real token moved to that image
        {"key": f"{card['image_id'] + 1}:{token}", "action": "original"},  # moved to the next image
        {"key": card["key"], "action": "labels", "classes": [1000]},  # outside the vocabulary
        {"key": card["key"], "action": "labels", "classes": [-1]},
    ]
    messages = [attempt(studio, "alice", data) for data in forged]
    assert "not served by this studio session" in messages[0] and "another card" in messages[2]
    assert "outside 0..999" in messages[4] and "outside 0..999" in messages[5]
    assert all(len(m.splitlines()) == 1 for m in messages)
    assert count(studio.engine) == 0
    with pytest.raises(ConflictError, match="another card"):  # bob cannot use alice's card
        card_api.decide(studio, "bob", {"key": card["key"], "action": "original"})
    assert count(studio.engine) == 0


def test_the_service_checks_the_image_against_the_dataset_it_serves(two_datasets: tuple[Studio, int]) -> None:
    studio, other = two_datasets
    with pytest.raises(NotFoundError, match="does not exist in this dataset"):
        store_annotation(studio.engine, image_id=other, user="alice", verdict=Verdict.labels, classes=[3],
                         n_classes=1000, dataset_id=studio.dataset_id)  # fmt: skip
    # a vocabulary size without the dataset it belongs to is not trusted: the image's own vocabulary is used
    with pytest.raises(InputError, match=r"outside 0\.\.9"):
        store_annotation(studio.engine, image_id=other, user="alice", verdict=Verdict.labels, classes=[500, 999],
                         n_classes=1000)  # fmt: skip
    assert count(studio.engine) == 0


def test_a_snapshot_refuses_classes_outside_its_vocabulary(two_datasets: tuple[Studio, int]) -> None:
    studio, other = two_datasets
    with Session(studio.engine) as s:  # a decision stored before classes were checked against the image's dataset
        alice = s.scalars(select(User.id).where(User.name == "alice")).one()
        s.execute(
            insert(Annotation),
            [{"image_id": other, "user_id": alice, "verdict": Verdict.labels, "classes": [500, 999], "flags": [],
              "note": "", "is_adjudication": False, "suggestion_action": SuggestionAction.none}],
        )  # fmt: skip
        s.commit()
    with pytest.raises(InputError, match=r"snapshot 'round-1' not created: 1 image\(s\) hold classes outside 0\.\.9"):
        create_snapshot(studio.engine, "round-1", dataset="small")
    with Session(studio.engine) as s:
        assert s.scalar(select(func.count()).select_from(Snapshot)) == 0


@pytest.mark.parametrize("fmt", ["real", "jsonl", "csv"])
def test_a_snapshot_frozen_with_foreign_classes_is_not_exported(
    two_datasets: tuple[Studio, int], tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    studio, other = two_datasets
    with Session(studio.engine) as s:
        alice = s.scalars(select(User.id).where(User.name == "alice")).one()
        s.execute(
            insert(Annotation),
            [{"image_id": other, "user_id": alice, "verdict": Verdict.labels, "classes": [500, 999], "flags": [],
              "note": "", "is_adjudication": False, "suggestion_action": SuggestionAction.none}],
        )  # fmt: skip
        s.commit()
    with monkeypatch.context() as m:  # frozen as a snapshot made before classes were checked
        m.setattr("relabel.snapshots.freeze.check_classes", lambda *args: None)
        create_snapshot(studio.engine, "old", dataset="small")
    out = tmp_path / f"old.{fmt}"
    with pytest.raises(InputError, match=r"not exported .*1 image\(s\) hold classes outside 0\.\.9: 'a\.jpg"):
        export_snapshot(studio.engine, "old", fmt=fmt, out=out, dataset="small")
    assert not out.exists()


def test_an_image_left_and_given_to_others_cannot_be_decided_with_the_old_card(db_url: str, tmp_path: Path) -> None:
    studio = Studio(build_workspace(tmp_path, db_url), cache_dir=tmp_path / "cache", overlap=1)
    card = card_api.next_card(studio, "alice", {})["card"]
    card_api.skip(studio, "alice", {"key": card["key"]})
    bob = card_api.open_image(studio, "bob", {"image_id": card["image_id"]})["card"]
    card_api.decide(studio, "bob", {"key": bob["key"], "action": "original"})
    reply = card_api.decide(studio, "alice", {"key": card["key"], "action": "labels", "classes": [5]})
    assert "went to other annotators" in reply["error"] and reply["card"]["image_id"] != card["image_id"]
    with Session(studio.engine) as s:
        assert s.scalars(select(Annotation.user_id).where(Annotation.image_id == card["image_id"])).all() == [
            studio.user("bob")[0]
        ]


def test_a_suggestion_replaced_since_the_card_was_served_is_refused(two_datasets: tuple[Studio, int]) -> None:
    studio, other = two_datasets
    card = card_api.next_card(studio, "alice", {})["card"]
    shown = studio.tokens.check(card["key"].split(":")[1], studio.user("alice")[0], card["image_id"])
    assert shown.suggestion_id is not None
    with Session(studio.engine) as s:  # a re-import gave the prediction's id to another image's row
        s.execute(update(Prediction).where(Prediction.id == shown.suggestion_id).values(image_id=other))
        s.commit()
    reply = card_api.decide(studio, "alice", {"key": card["key"], "action": "suggestion"})
    assert "is not a prediction for image" in reply["error"] and reply["card"]["image_id"] == card["image_id"]
    assert count(studio.engine) == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"image_id": "²"}, "not an image id"),
        ({"image_id": str(2**63)}, "not an image id"),
        ({"image_id": "-1"}, "not an image id"),
    ],
)
def test_image_ids_that_are_not_plain_whole_numbers_are_refused(
    two_datasets: tuple[Studio, int], data: dict[str, Any], message: str
) -> None:
    studio, _ = two_datasets
    with pytest.raises(InputError, match=message):
        card_api.open_image(studio, "lena", data)
    with pytest.raises(InputError, match="no card is open"):
        card_api.decide(studio, "alice", {"key": f"{data['image_id']}:{'a' * 24}", "action": "original"})


@pytest.mark.parametrize(("note", "message"), [("a\0b", "NUL"), ("\ud800", "unpaired surrogate")])
def test_a_note_a_database_cannot_store_is_refused(two_datasets: tuple[Studio, int], note: str, message: str) -> None:
    studio, _ = two_datasets
    card = card_api.next_card(studio, "alice", {})["card"]
    with pytest.raises(InputError, match=message):
        card_api.decide(studio, "alice", {"key": card["key"], "action": "original", "note": note})
    with pytest.raises(InputError, match=message):
        studio.decide("alice", card["key"].split(":")[1], card["image_id"], "original", note=note)
    assert count(studio.engine) == 0


@pytest.mark.parametrize(
    ("name", "message"),
    [("a\0b", "NUL"), ("two\nlines", "control characters"), ("x" * 201, "at most 200"), (" ", "empty")],
)
def test_snapshot_names_are_one_printable_line(two_datasets: tuple[Studio, int], name: str, message: str) -> None:
    studio, _ = two_datasets
    with pytest.raises(InputError, match=message):
        create_snapshot(studio.engine, name, dataset="photos")
    with pytest.raises(InputError, match="between 1 and 1000"):
        create_snapshot(studio.engine, "ok", dataset="photos", min_votes=10**308)
    with Session(studio.engine) as s:
        assert s.scalar(select(func.count()).select_from(Snapshot)) == 0
