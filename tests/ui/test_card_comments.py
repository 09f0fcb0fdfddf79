"""The cards' guidelines (G) and comments (O) through the card's server functions, without a server: who may read,
comment and save; blind review of others' comments; the lead's editor refusing an annotator; untrusted text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relabel.common.errors import InputError, RelabelError
from relabel.decisions.card_flags import CardFlag, register_flag
from relabel.review.comments import list_comments
from relabel.review.guidelines import current_guidelines, save_guidelines
from relabel.review.studio import Studio
from tests.studio_workspace import build_workspace
from ui import card_notes, guidelines_tab
from ui.card_component import handlers, server_function

XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    engine = build_workspace(tmp_path, db_url)
    return Studio(engine, cache_dir=tmp_path / "cache", overlap=2)


def call(studio: Studio, mode: str, name: str, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """A card's server function as the page calls it (errors come back as `{"error": ...}`)."""
    try:
        return handlers(studio, mode)[name](studio, user, data)
    except RelabelError as exc:
        return {"error": str(exc)}


def review_card(studio: Studio, user: str) -> dict[str, Any]:
    reply = call(studio, "review", "next", user, {})
    assert reply.get("card"), reply
    return reply["card"]


def comment(studio: Studio, user: str, card: dict[str, Any], text: str, mode: str = "review") -> dict[str, Any]:
    return call(studio, mode, "comment", user, {"key": card["key"], "text": text})


class TestComments:
    def test_a_comment_is_stored_as_text_and_shown_on_the_next_reply_of_the_card(self, studio: Studio) -> None:
        card = review_card(studio, "alice")
        assert card["comments"] == []
        reply = comment(studio, "alice", card, f"  {XSS} cut off  ")
        assert reply["message"].startswith("comment #") and reply["image_id"] == card["image_id"]
        [shown] = reply["comments"]
        assert shown["who"] == "alice" and shown["text"] == f"{XSS} cut off" and shown["when"].endswith("UTC")
        opened = call(studio, "review", "open", "alice", {"image_id": card["image_id"]})["card"]
        assert [c["text"] for c in opened["comments"]] == [f"{XSS} cut off"]

    def test_others_comments_stay_hidden_until_the_annotator_decides_and_a_lead_sees_all(self, studio: Studio) -> None:
        card = review_card(studio, "alice")
        comment(studio, "alice", card, "a notebook, not a laptop")
        bob_card = call(studio, "review", "open", "bob", {"image_id": card["image_id"]})["card"]
        assert bob_card["comments"] == []  # blind: bob has not decided this image
        comment(studio, "bob", bob_card, "mine")
        decided = call(studio, "review", "decide", "bob", {"key": bob_card["key"], "action": "original"})
        assert decided.get("card") is None or decided["card"]["image_id"] != card["image_id"]
        again = call(studio, "review", "open", "bob", {"image_id": card["image_id"]})["card"]
        assert [c["who"] for c in again["comments"]] == ["alice", "bob"]
        lead = call(studio, "adjudicate", "open", "lena", {"image_id": card["image_id"]})["card"]
        assert [c["text"] for c in lead["comments"]] == ["a notebook, not a laptop", "mine"]

    def test_refusals_store_nothing(self, studio: Studio) -> None:
        card = review_card(studio, "alice")
        for text, reason in (("   ", "empty"), ("x" * 2001, "2000"), ("a\0b", "NUL")):
            assert reason in comment(studio, "alice", card, text)["error"]
        assert "text" in call(studio, "review", "comment", "alice", {"key": card["key"], "text": 5})["error"]
        assert "no card is open" in call(studio, "review", "comment", "alice", {"text": "hi"})["error"]
        assert list_comments(studio.engine) == []

    def test_an_image_outside_the_dataset_is_refused(self, studio: Studio) -> None:
        reply = call(studio, "review", "comment", "alice", {"key": "999999:tok", "text": "hi"})
        assert "not yours to open" in reply["error"]
        assert list_comments(studio.engine) == []


class TestGuidelines:
    def test_everyone_reads_the_current_guidelines_as_text_blocks(self, studio: Studio) -> None:
        assert "no labeling guidelines yet" in call(studio, "review", "guidelines", "alice", {})["message"]
        save_guidelines(studio.engine, f"# Heading\n{XSS}\n- **mouse**: the computer mouse", author="lena")
        reply = call(studio, "review", "guidelines", "alice", {})["guidelines"]
        assert reply["blocks"] == [
            {"kind": "h1", "spans": [["Heading", False]]},
            {"kind": "p", "spans": [[XSS, False]]},
            {"kind": "li", "spans": [["mouse", True], [": the computer mouse", False]]},
        ]
        assert "lena" in reply["about"]
        assert call(studio, "adjudicate", "guidelines", "lena", {})["guidelines"]["version"] == reply["version"]

    def test_only_a_lead_saves_and_the_preview_escapes_markup(self, studio: Studio) -> None:
        with pytest.raises(Exception, match="annotator"):
            guidelines_tab.save_values(studio, "alice", "# mine")
        with pytest.raises(Exception, match="annotator"):
            guidelines_tab.load_values(studio, "alice")
        assert current_guidelines(studio.engine) is None
        message, preview = guidelines_tab.save_values(studio, "lena", f"# Heading\n{XSS}\n- **b**")
        assert message.startswith("saved guidelines version")
        assert "<img" not in preview and "&lt;img src=x onerror=alert(1)&gt;" in preview
        assert "<h1>Heading</h1>" in preview and "<ul><li><strong>b</strong></li></ul>" in preview
        text, about, _ = guidelines_tab.load_values(studio, "lena")
        assert text.startswith("# Heading") and "lena" in about
        with pytest.raises(InputError, match="guidelines are empty"):
            card_notes.save_lead_guidelines(studio, "lena", "  ")

    def test_the_page_reaches_both_through_its_server_functions(self, studio: Studio) -> None:
        for mode in ("review", "adjudicate"):
            names = handlers(studio, mode)
            assert {"guidelines", "comment"} <= set(names)
        fn = server_function(studio, "comment", handlers(studio, "review")["comment"])
        assert fn.__name__ == "comment"


@pytest.mark.parametrize("key", ["g", "o"])
def test_a_flag_cannot_take_the_guidelines_or_comment_key(key: str) -> None:
    with pytest.raises(InputError, match="must be a free lower-case letter"):
        register_flag(CardFlag(f"taken_{key}", key, "x"))
