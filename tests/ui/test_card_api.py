"""The cards' server side called directly, without a server: decisions, stale cards, own answers, links,
blind review, search, adjudication by keyboard, and untrusted text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from db.enums import Role, SuggestionAction, Verdict
from relabel.common.errors import ConflictError, InputError, NotFoundError, RelabelError
from relabel.common.vocabulary import load_builtin
from relabel.decisions.annotations import add_user
from relabel.review.class_search import ClassSearch
from relabel.review.studio import Studio
from relabel.sources.bulk import store_run
from tests.studio_workspace import build_workspace, stored_annotations
from ui import card_api
from ui.card_component import handlers, server_function

VOCAB = load_builtin()
XSS = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
MISSILE, PROJECTILE = VOCAB.resolve("n03773504"), VOCAB.resolve("n04008634")


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    engine = build_workspace(tmp_path, db_url)
    return Studio(engine, cache_dir=tmp_path / "cache", overlap=2)


def card_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply.get("card"), reply
    return reply["card"]


def first_card(studio: Studio, user: str) -> dict[str, Any]:
    return card_of(card_api.next_card(studio, user, {}))


def decide(studio: Studio, user: str, card: dict[str, Any], action: str, **form: Any) -> dict[str, Any]:
    return card_api.decide(studio, user, {"key": card["key"], "action": action, **form})


class TestDecisions:
    def test_a_quick_action_is_stored_for_the_session_user_with_time_and_suggestion_outcome(
        self, studio: Studio
    ) -> None:
        card = first_card(studio, "alice")
        assert card["original"][0]["name"] == "missile"  # the most suspect image comes first
        assert card["classifier"]["top"][0]["name"] == "projectile" and card["classifier"]["top"][0]["score"] == 0.8
        reply = decide(studio, "alice", card, "original")
        [row] = stored_annotations(studio, "alice")
        assert row.image_id == card["image_id"] and row.verdict is Verdict.labels and row.classes == [MISSILE]
        assert row.seconds_on_item is not None and 0 <= row.seconds_on_item < 60
        assert row.suggestion_action is SuggestionAction.rejected and row.suggestion_id is not None
        assert card_of(reply)["image_id"] != card["image_id"] and reply["message"].startswith(f"saved #{row.id}")

    def test_a_resent_decision_is_stored_once(self, studio: Studio) -> None:
        card = first_card(studio, "alice")
        decide(studio, "alice", card, "suggestion")
        again = decide(studio, "alice", card, "suggestion")
        assert len(stored_annotations(studio)) == 1 and "already saved" in again["message"]
        assert stored_annotations(studio)[0].suggestion_action is SuggestionAction.accepted

    def test_multi_label_no_class_fits_unclear_flags_and_note(self, studio: Studio) -> None:
        for action, classes in (("labels", [281, 285]), ("none_fit", []), ("unclear", [])):
            card = first_card(studio, "alice")
            decide(studio, "alice", card, action, classes=classes, flags=["drawing"], note="  a note  ")
        got = stored_annotations(studio, "alice")
        assert [(r.verdict, r.classes) for r in got] == [
            (Verdict.labels, [281, 285]),
            (Verdict.none_fit, []),
            (Verdict.unclear, []),
        ]
        assert all(r.flags == ["drawing"] and r.note == "a note" for r in got)

    def test_both_takes_the_original_and_the_suggestion(self, studio: Studio) -> None:
        decide(studio, "alice", first_card(studio, "alice"), "both")  # missile, suggested projectile
        assert stored_annotations(studio)[0].classes == [MISSILE, PROJECTILE]
        assert stored_annotations(studio)[0].suggestion_action is SuggestionAction.edited

    @pytest.mark.parametrize(
        ("form", "message"),
        [
            ({"action": "maybe"}, "unknown action 'maybe'"),
            ({"action": "labels"}, "pick at least one class"),
            ({"action": "labels", "classes": [1000]}, r"outside 0\.\.999"),
            ({"action": "labels", "classes": [True]}, "list of class indices"),
            ({"action": "labels", "classes": "281"}, "list of class indices"),
            ({"action": "original", "key": "nonsense"}, "no card is open"),
            ({"action": "original", "flags": ["sparkly"]}, "unknown flags"),
            ({"action": "original", "note": 5}, "note must be text"),
            ({"action": "original", "note": "x" * 2001}, "at most 2000"),
            ({"action": "original", "filter": {"status": "all"}}, "unknown queue status 'all'"),
        ],
    )
    def test_bad_decisions_are_refused_and_store_nothing(
        self, studio: Studio, form: dict[str, Any], message: str
    ) -> None:
        card = first_card(studio, "alice")
        with pytest.raises(RelabelError, match=message):
            card_api.decide(studio, "alice", {"key": card["key"], **form})
        assert stored_annotations(studio) == []

    def test_a_token_belongs_to_its_user_and_image(self, studio: Studio) -> None:
        card = first_card(studio, "alice")
        with pytest.raises(ConflictError, match="another card"):
            decide(studio, "bob", card, "original")
        token = card["key"].split(":")[1]
        with pytest.raises(ConflictError, match="another card"):
            card_api.decide(studio, "alice", {"key": f"{card['image_id'] + 1}:{token}", "action": "original"})
        assert stored_annotations(studio) == []

    def test_a_made_up_token_is_refused_and_the_card_reloaded_and_a_pre_restart_one_still_answers(
        self, studio: Studio, tmp_path: Path
    ) -> None:
        card = first_card(studio, "alice")
        forged = card_api.decide(studio, "alice", {"key": f"{card['image_id']}:{'0' * 24}", "action": "original"})
        assert "was not served by this studio session" in forged["error"]
        assert card_of(forged)["image_id"] == card["image_id"] and card_of(forged)["key"] != card["key"]
        restarted = Studio(studio.engine, cache_dir=tmp_path / "cache", overlap=2)
        reply = decide(restarted, "alice", card, "original")  # served before the restart: its token is stored
        assert "error" not in reply and reply["message"].startswith("saved #")
        assert [r.classes for r in stored_annotations(studio)] == [[MISSILE]]

    def test_a_token_for_an_image_of_another_dataset_cannot_be_made(self, studio: Studio) -> None:
        with pytest.raises(NotFoundError):
            card_api.open_image(studio, "lena", {"image_id": 999_999})


class TestStaleCardsAndOwnAnswers:
    def test_a_stale_tab_is_refused_with_the_newer_answer_shown(self, studio: Studio) -> None:
        tab_a = first_card(studio, "alice")
        tab_b = first_card(studio, "alice")  # the same held card, another token
        assert tab_a["image_id"] == tab_b["image_id"] and tab_a["key"] != tab_b["key"]
        decide(studio, "alice", tab_a, "none_fit")
        reply = decide(studio, "alice", tab_b, "original")
        assert "again since this card was shown" in reply["error"]
        reloaded = card_of(reply)
        assert reloaded["image_id"] == tab_a["image_id"] and reloaded["own"]["verdict"] == "none_fit"
        assert [r.verdict for r in stored_annotations(studio)] == [Verdict.none_fit]
        decide(studio, "alice", reloaded, "original")  # deciding on the fresh card replaces the answer
        assert [r.verdict for r in stored_annotations(studio)] == [Verdict.none_fit, Verdict.labels]

    def test_revisiting_shows_your_answer_pre_filled(self, studio: Studio) -> None:
        card = first_card(studio, "alice")
        assert card["own"] is None
        decide(studio, "alice", card, "labels", classes=[PROJECTILE, 657], flags=["duplicate"], note="two")
        again = card_of(card_api.open_image(studio, "alice", {"image_id": card["image_id"]}))
        own = again["own"]
        assert [c["index"] for c in own["classes"]] == [PROJECTILE, 657]
        assert own["flags"] == ["duplicate"] and own["note"] == "two" and own["undone"] is False
        mine = card_of(card_api.next_card(studio, "alice", {"filter": {"status": "mine"}}))
        assert mine["image_id"] == card["image_id"] and mine["own"]["verdict"] == "labels"

    def test_undo_reopens_the_image_with_the_undone_answer_pre_filled(self, studio: Studio) -> None:
        card = first_card(studio, "alice")
        decide(studio, "alice", card, "unclear", note="too dark")
        back = card_api.undo(studio, "alice", {})
        reopened = card_of(back)
        assert reopened["image_id"] == card["image_id"] and "undid" in back["message"]
        assert reopened["own"]["verdict"] == "unclear" and reopened["own"]["undone"] is True
        assert reopened["own"]["note"] == "too dark"
        assert [r.verdict for r in stored_annotations(studio)] == [Verdict.unclear, Verdict.retract]
        history = card_api.history(studio, "alice", {"key": reopened["key"]})["rows"]
        assert [h["what"] for h in history] == ["unclear (X)", f"undo of #{stored_annotations(studio)[0].id}"]
        decide(studio, "alice", reopened, "original")  # the undone card is not stale
        with pytest.raises(InputError, match="nothing to undo"):
            card_api.undo(studio, "bob", {})

    def test_skip_moves_on_without_writing(self, studio: Studio) -> None:
        card = first_card(studio, "alice")
        after = card_api.skip(studio, "alice", {"key": card["key"]})
        assert card_of(after)["image_id"] != card["image_id"] and stored_annotations(studio) == []


class TestLinksAndBlindReview:
    def test_others_decisions_stay_hidden_until_you_decide(self, studio: Studio) -> None:
        alice, bob = first_card(studio, "alice"), first_card(studio, "bob")
        assert alice["image_id"] == bob["image_id"]  # overlap 2: both review the top image
        decide(studio, "alice", alice, "none_fit", note="only a launcher")
        before = card_of(card_api.open_image(studio, "bob", {"image_id": bob["image_id"]}))
        assert before["others"] == []
        assert all(h["who"] != "alice" for h in card_api.history(studio, "bob", {"key": before["key"]})["rows"])
        decide(studio, "bob", before, "original")
        after = card_of(card_api.open_image(studio, "bob", {"image_id": bob["image_id"]}))
        assert [(o["who"], o["what"], o["note"]) for o in after["others"]] == [
            ("alice", "no class fits (Z)", "only a launcher")
        ]

    def test_a_link_opens_an_image_within_what_the_user_may_see(self, studio: Studio, tmp_path: Path) -> None:
        card = first_card(studio, "alice")
        decide(studio, "alice", card, "original")
        decide(studio, "bob", first_card(studio, "bob"), "original")  # the image now has its 2 opinions
        add_user(studio.engine, "carol", Role.annotator, "pw")
        carol = Studio(studio.engine, cache_dir=tmp_path / "cache", overlap=2)
        with pytest.raises(NotFoundError, match="not yours to open"):
            card_api.open_image(carol, "carol", {"image_id": card["image_id"]})
        assert card_of(card_api.open_image(carol, "alice", {"image_id": card["image_id"]}))["own"]
        assert card_of(card_api.open_image(carol, "lena", {"image_id": card["image_id"]}))
        with pytest.raises(InputError, match="not an image id"):
            card_api.open_image(carol, "alice", {"image_id": "1; drop table"})
        booted = card_api.boot(carol, "carol", {"image_id": card["image_id"]})
        assert "not yours to open" in booted["error"] and card_of(booted)["image_id"] != card["image_id"]

    def test_boot_opens_the_linked_image_and_says_who_is_signed_in(self, studio: Studio) -> None:
        card = first_card(studio, "alice")
        other = card_api.skip(studio, "alice", {"key": card["key"]})
        booted = card_api.boot(studio, "alice", {"image_id": str(card["image_id"])})
        assert card_of(booted)["image_id"] == card["image_id"] and booted["user"] == "alice"
        assert booted["role"] == "annotator" and {f["name"] for f in booted["flags"]} >= {"drawing"}
        assert [s["value"] for s in booted["statuses"]] == ["open", "disputed", "decided", "mine"]
        reload = card_api.boot(studio, "alice", {})  # no link: the card the user holds comes back
        assert card_of(reload)["image_id"] == card["image_id"] != card_of(other)["image_id"]

    def test_the_image_likely_next_is_named_for_the_page_to_fetch_ahead(self, studio: Studio) -> None:
        card = first_card(studio, "alice")
        assert card["prefetch"] and card["prefetch"][0].startswith("gradio_api/file=")
        following = card_of(decide(studio, "alice", card, "original"))
        assert following["url"] == card["prefetch"][0]


class TestSearch:
    @pytest.mark.parametrize(
        ("typed", "first"),
        [("espresso", "espresso"), ("cup", "cup"), ("tiger", "tiger"), ("cardigan", "cardigan"),
         ("car", "car wheel"), ("Egyptian", "Egyptian cat"), ("n02123045", "tabby"), ("tigr", "tiger")],
    )  # fmt: skip
    def test_what_was_typed_comes_first(self, studio: Studio, typed: str, first: str) -> None:
        reply = card_api.search(studio, "alice", {"query": typed}, ClassSearch(studio.vocab))
        assert reply["matches"][0]["name"] == first and reply["query"] == typed

    def test_hits_carry_the_class_description_and_its_near_duplicates(self, studio: Studio) -> None:
        search = ClassSearch(studio.vocab)
        [mouse] = [m for m in card_api.search(studio, "alice", {"query": "mouse"}, search)["matches"][:1]]
        assert (
            mouse["name"] == "mouse"
            and "computer" in mouse["gloss"].lower()
            and mouse["twins"] == []
            and mouse["twin_note"] == ""
        )
        notebook = card_api.search(studio, "alice", {"query": "notebook"}, search)["matches"][0]
        assert notebook["name"] == "notebook" and notebook["twins"] == ["laptop (n03642806)"]
        assert len(notebook["gloss"]) <= card_api.GLOSS_CHARS

    def test_search_refuses_a_non_text_query(self, studio: Studio) -> None:
        with pytest.raises(InputError, match="search for text"):
            card_api.search(studio, "alice", {"query": ["cup"]}, ClassSearch(studio.vocab))


class TestAdjudication:
    def dispute(self, studio: Studio) -> dict[str, Any]:
        alice, bob = first_card(studio, "alice"), first_card(studio, "bob")
        decide(studio, "alice", alice, "original")
        decide(studio, "bob", bob, "suggestion", note=XSS)
        return alice

    def test_the_list_shows_every_answer_and_taking_one_adjudicates(self, studio: Studio) -> None:
        alice = self.dispute(studio)
        booted = card_api.adjudication_boot(studio, "lena", {})
        [row] = booted["list"]
        assert row["image_id"] == alice["image_id"]
        assert [(a["who"], a["what"]) for a in row["answers"]] == [
            ("alice", "missile (n03773504)"),
            ("bob", "projectile (n04008634)"),
        ]
        card = card_of(booted)
        assert [o["who"] for o in card["others"]] == ["alice", "bob"]  # a lead sees every answer
        bob_answer = card["others"][1]["id"]
        after = card_api.take_answer(studio, "lena", {"key": card["key"], "answer_id": bob_answer, "note": "ok"})
        [verdict] = stored_annotations(studio, "lena")
        assert verdict.is_adjudication and verdict.classes == [PROJECTILE] and verdict.note == "ok"
        assert after["list"] == [] and after["card"] is None and "saved" in after["message"]

    def test_after_a_verdict_the_next_disputed_image_opens(self, studio: Studio) -> None:
        self.dispute(studio)
        second_a, second_b = first_card(studio, "alice"), first_card(studio, "bob")
        decide(studio, "alice", second_a, "none_fit")
        decide(studio, "bob", second_b, "unclear")
        booted = card_api.adjudication_boot(studio, "lena", {})
        assert len(booted["list"]) == 2
        first = card_of(booted)
        after = card_api.adjudicate(studio, "lena", {"key": first["key"], "action": "none_fit"})
        assert [r["image_id"] for r in after["list"]] == [card_of(after)["image_id"]] != [first["image_id"]]
        skipped = card_api.adjudication_skip(studio, "lena", {"key": card_of(after)["key"]})
        assert card_of(skipped)["image_id"] == card_of(after)["image_id"]  # the only one left comes round again

    def test_a_link_opens_any_image_for_a_lead(self, studio: Studio) -> None:
        self.dispute(studio)
        opened = card_api.adjudication_open(studio, "lena", {"image_id": 3})
        assert card_of(opened)["image_id"] == 3 and len(opened["list"]) == 1
        with pytest.raises(InputError):
            card_api.adjudication_open(studio, "lena", {"image_id": None})

    def test_annotators_are_refused_and_nothing_is_written(self, studio: Studio) -> None:
        alice = self.dispute(studio)
        before = len(stored_annotations(studio))
        for call in (
            lambda: card_api.adjudication_boot(studio, "alice", {}),
            lambda: card_api.adjudication_open(studio, "alice", {"image_id": alice["image_id"]}),
            lambda: card_api.adjudicate(studio, "alice", {"key": alice["key"], "action": "original"}),
            lambda: card_api.take_answer(studio, "alice", {"key": alice["key"], "answer_id": 1}),
            lambda: card_api.adjudication_skip(studio, "alice", {"key": alice["key"]}),
        ):
            with pytest.raises(ConflictError, match="'alice' is an annotator"):
                call()
        assert len(stored_annotations(studio)) == before

    def test_taking_an_answer_that_is_not_standing_is_refused(self, studio: Studio) -> None:
        self.dispute(studio)
        card = card_of(card_api.adjudication_boot(studio, "lena", {}))
        with pytest.raises(NotFoundError, match="not a standing answer"):
            card_api.take_answer(studio, "lena", {"key": card["key"], "answer_id": 10_000})


class TestUntrustedText:
    def test_html_in_model_output_and_notes_is_passed_on_verbatim_as_data(self, studio: Studio) -> None:
        with Session(studio.engine) as s:
            answers = [{"image_id": i, "classes": [281], "raw_output": XSS} for i in range(1, 7)]
            store_run(s, dataset_id=studio.dataset_id, name=XSS, model=XSS, protocol="ow", predictions=answers)
            s.commit()
        fresh = Studio(studio.engine, cache_dir=studio.display.folder.parent)
        card = first_card(fresh, "alice")
        assert card["suggestion"]["answer"] == XSS and card["suggestion"]["model"] == XSS
        decide(fresh, "alice", card, "none_fit", note=XSS)
        again = card_of(card_api.open_image(fresh, "alice", {"image_id": card["image_id"]}))
        assert again["own"]["note"] == XSS

    def test_the_page_script_puts_data_into_the_page_as_text_only(self) -> None:
        from ui.card_component import asset

        script = asset("card.js")
        assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "outerHTML" not in script
        assert "${" not in asset("card.html") and "{{" not in asset("card.html")  # a static template


class TestServerFunctions:
    def test_errors_become_replies_and_the_user_comes_from_the_session(self, studio: Studio) -> None:
        class Request:
            def __init__(self, user: str | None) -> None:
                self.username = user

        fn = dict(handlers(studio, "review"))
        next_fn = server_function(studio, "next", fn["next"])
        assert card_of(next_fn({}, Request("alice")))["image_id"]
        assert "not signed in" in next_fn({}, Request(None))["error"]
        assert "expected an object" in next_fn(["x"], Request("alice"))["error"]
        decide_fn = server_function(studio, "decide", fn["decide"])
        assert "no card is open" in decide_fn({"action": "original"}, Request("alice"))["error"]

    def test_both_cards_offer_what_their_pages_call(self, studio: Studio) -> None:
        notes = {"guidelines", "comment", "thumbs", "recent"}  # ui.card_notes, ui.card_extras
        assert set(handlers(studio, "review")) - notes == {"boot", "next", "open", "decide", "skip", "undo", "full",
                                                           "history", "search"}  # fmt: skip
        assert set(handlers(studio, "adjudicate")) - notes == {"boot", "open", "disputed", "adjudicate", "take",
                                                               "skip", "full", "history", "search"}  # fmt: skip
        assert notes <= set(handlers(studio, "review")) & set(handlers(studio, "adjudicate"))

    def test_full_resolution_is_a_served_address(self, studio: Studio) -> None:
        card = first_card(studio, "alice")
        url = card_api.full_resolution(studio, "alice", {"key": card["key"]})["url"]
        path = Path(url.removeprefix("gradio_api/file="))
        assert path.is_file() and path.is_relative_to(studio.display.folder)
