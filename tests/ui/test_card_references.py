"""Reference thumbnails, the user's day and the recent decisions on the card's server side (`ui.card_extras`),
called through the card's server functions without a server: the picker's results and the classifier's top-5 name
a reference thumbnail of each class (never the card's own image, only files of the display cache), `thumbs` makes
the missing ones for class indices only, every card reply of the review card says how many images are left for the
user and how many they decided today, and `recent` lists their last decisions."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from PIL import Image

from relabel.common.vocabulary import load_builtin
from relabel.review.studio import Studio
from tests.studio_workspace import build_workspace
from ui import card_extras
from ui.card_component import handlers, server_function

VOCAB = load_builtin()
TABBY, TENCH, GOLDFISH = VOCAB.resolve("n02123045"), VOCAB.resolve("n01440764"), VOCAB.resolve("n01443537")
PREFIX = "gradio_api/file="


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    engine = build_workspace(tmp_path, db_url, extra=6)  # two photos of each of the six classes
    return Studio(engine, cache_dir=tmp_path / "cache", overlap=2)


def call(studio: Studio, name: str, user: str, data: dict[str, Any], mode: str = "review") -> dict[str, Any]:
    return handlers(studio, mode)[name](studio, user, data)


def served_file(studio: Studio, url: str) -> Path:
    """The display-cache file an address names (and that it names one)."""
    assert url.startswith(PREFIX), url
    path = Path(unquote(url[len(PREFIX) :]))
    assert path.resolve().is_relative_to(studio.display.folder.resolve()) and path.is_file(), path
    return path


def test_search_results_name_a_thumbnail_and_thumbs_makes_the_missing_ones(studio: Studio) -> None:
    card = call(studio, "boot", "alice", {})["card"]
    reply = call(studio, "search", "alice", {"query": "tabby", "exclude": card["image_id"]})
    first = reply["matches"][0]
    assert first["index"] == TABBY and first["gloss"] and first["thumb"] is not None  # has a photo
    made = call(studio, "thumbs", "alice", {"classes": [TABBY, GOLDFISH], "exclude": card["image_id"]})
    assert first["thumb"] in ("", made["thumbs"][str(TABBY)])  # "": not made yet (the page then asks for it)
    assert list(made["thumbs"]) == [str(TABBY)]  # goldfish has no reference photo: left out
    path = served_file(studio, made["thumbs"][str(TABBY)])
    with Image.open(path) as im:
        assert max(im.size) <= card_extras.THUMB_SIDE
    again = call(studio, "search", "alice", {"query": "tabby"})
    assert again["matches"][0]["thumb"] == made["thumbs"][str(TABBY)]  # made once, named from then on
    assert call(studio, "search", "alice", {"query": "goldfish"})["matches"][0]["thumb"] is None


def test_a_reference_is_never_the_card_s_own_image(studio: Studio) -> None:
    photos = studio.examples[TENCH]
    assert len(photos) == 2
    for own, other in ((photos[0], photos[1]), (photos[1], photos[0])):
        made = call(studio, "thumbs", "alice", {"classes": [TENCH], "exclude": own.image_id})
        assert made["thumbs"][str(TENCH)] == card_extras.file_url(
            studio.display.path_for(other, side=card_extras.THUMB_SIDE)
        )


def test_the_top5_names_a_thumbnail_per_class(studio: Studio) -> None:
    card = call(studio, "boot", "alice", {})["card"]
    top = card["classifier"]["top"]
    assert top and all("thumb" in t for t in top)
    with_photo = [t["index"] for t in top if t["thumb"] is not None]
    assert with_photo  # the workspace's classes have photos
    made = call(studio, "thumbs", "alice", {"classes": with_photo, "exclude": card["image_id"]})
    shown = call(studio, "open", "alice", {"image_id": card["image_id"]})["card"]["classifier"]["top"]
    assert {str(t["index"]): t["thumb"] for t in shown if t["thumb"]} == made["thumbs"]
    for url in made["thumbs"].values():
        served_file(studio, url)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"classes": "281"}, "classes must be a list of class indices"),
        ({"classes": [True]}, "classes must be a list of class indices"),
        ({"classes": [1000]}, "classes [1000] are outside 0..999"),
        ({"classes": [-1]}, "classes [-1] are outside 0..999"),
        ({"classes": list(range(17))}, "at most 16 classes at once, not 17"),
        ({"classes": [1], "exclude": "../../etc/passwd"}, "is not an image id"),
    ],
)
def test_thumbs_takes_class_indices_only(studio: Studio, data: dict[str, Any], error: str) -> None:
    fn = server_function(studio, "thumbs", handlers(studio, "review")["thumbs"])

    class Request:  # what `ui.events.session_user` reads: the signed-in user
        username = "alice"

    reply = fn(data, Request())
    assert list(reply) == ["error"] and error in reply["error"] and "\n" not in reply["error"]


def test_every_review_reply_says_what_is_left_and_what_was_decided_today(studio: Studio) -> None:
    boot = call(studio, "boot", "alice", {})
    left = boot["today"]["left"]
    assert boot["today"] == {"left": left, "today": 0} and left == len(studio.queue.order)
    decided = call(studio, "decide", "alice", {"key": boot["card"]["key"], "action": "original"})
    assert decided["today"] == {"left": left - 1, "today": 1}
    skipped = call(studio, "skip", "alice", {"key": decided["card"]["key"]})
    assert skipped["today"]["today"] == 1
    undone = call(studio, "undo", "alice", {})
    assert undone["today"] == {"left": left, "today": 0}
    assert "today" not in call(studio, "boot", "lena", {}, mode="adjudicate")  # a verdict queue has no "left"


def test_one_count_of_what_is_left_serves_every_user_until_it_is_stale(
    studio: Studio, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full pass over the queue counts every user at once; until it is LEFT_TTL_S old a user's count is that
    pass's less their own decisions since, and a stale one is counted again."""
    passes = []
    count = studio.queue.left_by_user

    def counted(flt: Any) -> Any:
        passes.append(flt)
        return count(flt)

    monkeypatch.setattr(studio.queue, "left_by_user", counted)
    alice, bob = call(studio, "boot", "alice", {}), call(studio, "boot", "bob", {})
    everything = len(studio.queue.order)
    assert len(passes) == 1 and alice["today"]["left"] == bob["today"]["left"] == everything
    decided = call(studio, "decide", "bob", {"key": bob["card"]["key"], "action": "original"})
    assert decided["today"]["left"] == everything - 1 and len(passes) == 1
    monkeypatch.setattr(card_extras, "LEFT_TTL_S", -1.0)  # every count is stale
    again = call(studio, "next", "alice", {})
    bob_id = studio.user("bob")[0]
    assert len(passes) == 2 and again["today"]["left"] == studio.queue.remaining(studio.user("alice")[0])
    assert studio.queue.remaining(bob_id) == everything - 1


def test_recent_lists_the_user_s_decisions_with_whether_they_may_open_them(studio: Studio) -> None:
    card = call(studio, "boot", "alice", {})["card"]
    call(studio, "decide", "alice", {"key": card["key"], "action": "none_fit"})
    [item] = call(studio, "recent", "alice", {})["items"]
    assert item["image_id"] == card["image_id"] and item["what"] == "no class fits (Z)"
    assert item["can_open"] and not item["undone"] and item["when"].endswith(" UTC")
    assert call(studio, "recent", "bob", {})["items"] == []
    reopened = call(studio, "open", "alice", {"image_id": item["image_id"]})["card"]
    assert reopened["own"]["verdict"] == "none_fit"  # opened with the answer to change
