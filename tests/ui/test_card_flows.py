"""The flows between leads and annotators and across a restart, called directly without a server: a lead holds no
Review card until they review, the adjudication link opens its image, a decision resent after a restart is
answered as stored, each message is said once, and export files are named without a doubled suffix.
The same flows in a browser: tests/ui/test_browser_flows.py."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete
from sqlmodel import Session

from db.enums import Role
from db.models import CardToken
from relabel.common.errors import ConflictError
from relabel.decisions.annotations import add_user
from relabel.exports.formats import EXPORT_FORMATS
from relabel.review.studio import Studio
from tests.studio_workspace import PASSWORD, build_workspace, stored_annotations
from ui import card_api, handlers


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    engine = build_workspace(tmp_path, db_url)
    for name in ("carol", "dave"):
        add_user(engine, name, Role.annotator, PASSWORD)
    return Studio(engine, cache_dir=tmp_path / "cache", overlap=2)


def card_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply.get("card"), reply
    return reply["card"]


def next_image(studio: Studio, user: str) -> int:
    return int(card_of(card_api.next_card(studio, user, {}))["image_id"])


def dispute(studio: Studio) -> list[int]:
    """Two disputed images: alice and bob disagree on the first two cards they are served."""
    disputed = []
    for _ in range(2):
        alice = card_of(card_api.next_card(studio, "alice", {}))
        bob = card_of(card_api.next_card(studio, "bob", {}))
        assert alice["image_id"] == bob["image_id"]  # overlap 2: both are served the same image
        card_api.decide(studio, "alice", {"key": alice["key"], "action": "original"})
        card_api.decide(studio, "bob", {"key": bob["key"], "action": "none_fit"})
        disputed.append(int(alice["image_id"]))
    return disputed


class TestLeadsAndReview:
    def test_a_lead_signing_in_and_adjudicating_holds_no_review_card(self, studio: Studio) -> None:
        first = studio.queue.order[0]
        booted = card_api.boot(studio, "lena", {})  # the page a lead signs in to opens on the Review tab
        assert booted["card"] is None and "press N" in booted["message"] and booted["role"] == "lead"
        card_api.adjudication_boot(studio, "lena", {})
        looked = card_api.adjudication_open(studio, "lena", {"image_id": first})
        card_api.history(studio, "lena", {"key": card_of(looked)["key"]})
        # overlap 2: both annotators are served the image the lead looked at in adjudication
        assert next_image(studio, "alice") == first and next_image(studio, "bob") == first

    def test_a_lead_who_takes_a_review_card_holds_it_like_an_annotator(self, studio: Studio) -> None:
        first = studio.queue.order[0]
        assert next_image(studio, "alice") == first and next_image(studio, "bob") == first
        taken = next_image(studio, "lena")  # N on the Review tab: the lead reviews
        assert taken != first
        assert next_image(studio, "carol") == taken  # the lead and carol make the overlap of 2
        assert next_image(studio, "dave") not in (first, taken)  # so dave is served neither

    def test_a_review_link_opened_by_a_lead_is_reviewing(self, studio: Studio) -> None:
        first = studio.queue.order[0]
        booted = card_api.boot(studio, "lena", {"image_id": str(first)})
        assert card_of(booted)["image_id"] == first
        assert next_image(studio, "alice") == first and next_image(studio, "bob") != first


class TestAdjudicationLink:
    def test_the_link_opens_its_image_not_the_first_disputed_one(self, studio: Studio) -> None:
        disputed = dispute(studio)
        booted = card_api.adjudication_boot(studio, "lena", {"image_id": str(disputed[1])})
        assert [r["image_id"] for r in booted["list"]][0] != disputed[1]  # not the first of the list
        assert card_of(booted)["image_id"] == disputed[1] and not booted.get("error") and not booted.get("message")

    @pytest.mark.parametrize("image_id", ["999999", "12abc", "-3"])
    def test_an_unknown_id_says_so_in_one_line_beside_the_first_disputed_image(
        self, studio: Studio, image_id: str
    ) -> None:
        disputed = dispute(studio)
        booted = card_api.adjudication_boot(studio, "lena", {"image_id": image_id})
        assert image_id in booted["error"] and "\n" not in booted["error"]
        assert card_of(booted)["image_id"] == booted["list"][0]["image_id"] in disputed

    def test_an_image_that_is_not_disputed_opens_with_a_one_line_note(self, studio: Studio) -> None:
        dispute(studio)
        calm = next(i for i in studio.queue.order if not studio.queue.evidence[i].voters)
        booted = card_api.adjudication_boot(studio, "lena", {"image_id": calm})
        assert card_of(booted)["image_id"] == calm
        assert booted["message"] == f"image {calm} is not disputed: a verdict on it overrides its annotators"


class TestRestart:
    def test_a_decision_resent_after_a_restart_is_answered_stored(self, studio: Studio, tmp_path: Path) -> None:
        card = card_of(card_api.next_card(studio, "alice", {}))
        request = {"key": card["key"], "action": "original"}
        first = card_api.decide(studio, "alice", request)  # stored; say its answer was lost in the restart
        restarted = Studio(studio.engine, cache_dir=tmp_path / "cache", overlap=2)
        again = card_api.decide(restarted, "alice", request)
        [row] = stored_annotations(studio, "alice")
        assert first["message"].startswith(f"saved #{row.id}") and "error" not in again
        assert again["message"] == f"saved #{row.id} on image {card['image_id']} (already saved)"
        assert card_of(again)["image_id"] != card["image_id"]  # and the next card comes with it

    def test_a_token_stored_by_one_user_tells_another_nothing(self, studio: Studio, tmp_path: Path) -> None:
        card = card_of(card_api.next_card(studio, "alice", {}))
        card_api.decide(studio, "alice", {"key": card["key"], "action": "original"})
        restarted = Studio(studio.engine, cache_dir=tmp_path / "cache", overlap=2)
        with pytest.raises(ConflictError, match="issued for another card"):  # not "already saved"
            card_api.decide(restarted, "bob", {"key": card["key"], "action": "none_fit"})
        assert [r.user_id for r in stored_annotations(studio)] == [studio.user("alice")[0]]

    def test_a_decision_that_was_not_stored_is_refused_with_the_card_reloaded(
        self, studio: Studio, tmp_path: Path
    ) -> None:
        card = card_of(card_api.next_card(studio, "alice", {}))
        restarted = Studio(studio.engine, cache_dir=tmp_path / "cache", overlap=2)
        with Session(studio.engine) as s:  # the card is too old: its token left alice's pool
            s.execute(delete(CardToken))
            s.commit()
        reply = card_api.decide(restarted, "alice", {"key": card["key"], "action": "original"})
        assert "decide again" in reply["error"] and card_of(reply)["image_id"] == card["image_id"]
        assert stored_annotations(studio) == []


class TestMessagesOnce:
    def test_a_decision_an_undo_and_a_verdict_say_what_happened_once(self, studio: Studio) -> None:
        card = card_of(card_api.next_card(studio, "alice", {}))
        saved = card_api.decide(studio, "alice", {"key": card["key"], "action": "original"})
        assert "saved #" in saved["message"] and "saved" not in card_of(saved)["status"]
        undone = card_api.undo(studio, "alice", {})
        assert "undid" in undone["message"] and "undid" not in card_of(undone)["status"]
        dispute(studio)
        board = card_of(card_api.adjudication_boot(studio, "lena", {}))
        verdict = card_api.adjudicate(studio, "lena", {"key": board["key"], "action": "none_fit"})
        assert "saved #" in verdict["message"] and "saved" not in card_of(verdict)["status"]

    def test_a_refused_decision_is_said_once(self, studio: Studio) -> None:
        card = card_of(card_api.next_card(studio, "alice", {}))
        forged = card_api.decide(studio, "alice", {"key": f"{card['image_id']}:{'0' * 24}", "action": "original"})
        assert "not served" in forged["error"] and "not served" not in card_of(forged)["status"]


class TestExportNames:
    @pytest.mark.parametrize("fmt", list(EXPORT_FORMATS))
    def test_no_name_repeats_its_suffix(self, fmt: str) -> None:
        suffix = EXPORT_FORMATS[fmt].suffix
        for snapshot in ("round-1", "round-1.csv", f"round.{suffix}", "../a/b"):
            name = handlers.export_file_name(snapshot, fmt, suffix, datetime(2026, 1, 2, 3, 4, 5))
            assert name.endswith(f"-20260102-030405.{suffix}") or name.endswith(f"-20260102-030405.{fmt}.{suffix}")
            assert not name.endswith(f".{suffix}.{suffix}") and "/" not in name and name.count(".") <= 2

    def test_the_studio_exports_csv_as_dot_csv(self, studio: Studio, tmp_path: Path) -> None:
        handlers.create_snapshot(studio, "lena", "round-1", "keep", 1)
        exported = {
            f: Path(handlers.export_snapshot(studio, "lena", "round-1", f, tmp_path / "x")) for f in ("csv", "jsonl")
        }
        assert exported["csv"].name.endswith(".csv") and not exported["csv"].name.endswith(".csv.csv")
        assert exported["jsonl"].name.endswith(".jsonl") and exported["csv"].read_text().count("\n") == 7
