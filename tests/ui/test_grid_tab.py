"""The Images tab's handlers: the grid's page of thumbnails, the adjudication link, one annotator's decisions and the
assignments, leads only (checked on the server), with one-line errors for unknown names."""

from __future__ import annotations

from pathlib import Path

import pytest

from relabel.common.errors import ConflictError, NotFoundError, RelabelError
from relabel.review.assignments import list_assignments
from relabel.review.studio import Studio
from tests.studio_workspace import build_workspace
from ui import grid_tab
from ui.grid_tab import ANY


@pytest.fixture
def studio(tmp_path: Path) -> Studio:
    s = Studio(build_workspace(tmp_path / "ws"), cache_dir=tmp_path / "cache", overlap=2)
    for user in ("alice", "bob"):
        image = s.queue.order[0]
        _, token = s.open_card(user, image)
        s.decide(user, token, image, "original" if user == "alice" else "suggestion")
    return s


def everything(studio: Studio, user: str = "lena", **kw: object) -> list:
    args = {"status": ANY, "class_text": "", "annotator": ANY, "disagrees": False, "assigned_to": ANY}
    args.update(kw)
    return grid_tab.grid_values(studio, user, *args.values(), "image", 1)  # type: ignore[arg-type]


def test_a_page_of_thumbnails_from_the_display_cache(studio: Studio) -> None:
    items, summary, page, ids = everything(studio)
    assert summary == "6 image(s) match; page 1 of 1" and page == 1 and len(ids) == 6
    for path, caption in items:
        assert Path(path).is_relative_to(studio.display.folder) and Path(path).is_file()
        assert caption.startswith("#")
    disputed = everything(studio, status="disputed")
    assert disputed[3] == [studio.queue.order[0]] and "disputed, 2 dec." in disputed[0][0][1]


def test_clicking_a_thumbnail_gives_its_adjudication_link(studio: Studio) -> None:
    ids = everything(studio)[3]
    assert grid_tab.adjudication_link(ids, 2) == (
        f"Image {ids[2]}: [open it on the adjudication card](?image={ids[2]}&tab=adjudicate)"
    )
    assert grid_tab.adjudication_link(ids, 99) == "" and grid_tab.adjudication_link(ids, None) == ""


def test_one_annotators_decisions(studio: Studio) -> None:
    rows = grid_tab.annotator_values(studio, "lena", "bob", ANY, "", False, ANY)
    assert len(rows) == 1 and rows[0][0] == studio.queue.order[0]
    assert rows[0][4:] == ["0 of 1", "disputed", f"?image={rows[0][0]}&tab=adjudicate"]
    assert grid_tab.annotator_values(studio, "lena", "bob", "decided", "", False, ANY) == []


def test_assign_the_filtered_images_and_a_class(studio: Studio) -> None:
    message = grid_tab.assign_filtered(studio, "lena", "alice", "undecided", "", ANY, False, ANY)
    assert message.startswith("assigned 5 image(s) to 'alice' (5 new)")
    assert grid_tab.assign_class(studio, "lena", "bob", "tabby") == "assigned class tabby (n02123045) to 'bob'"
    listed = list_assignments(studio.engine, studio.dataset_id, studio.vocab)
    assert sorted((x.user, x.what) for x in listed).count(("alice", "image")) == 5
    assert everything(studio, assigned_to="alice")[1].startswith("5 image(s)")
    card, _ = studio.next_card("bob")  # tabby's photo is bob's alone now, and first in his queue
    assert card is not None and Path(card.image.path).name == "n02123045_tabby.jpg"


@pytest.mark.parametrize(
    "call",
    [
        lambda s, u: everything(s, u),
        lambda s, u: grid_tab.annotator_values(s, u, "bob", ANY, "", False, ANY),
        lambda s, u: grid_tab.assign_filtered(s, u, "alice", ANY, "", ANY, False, ANY),
        lambda s, u: grid_tab.assign_class(s, u, "alice", "tabby"),
        lambda s, u: grid_tab.user_choices(s, u),
    ],
)
def test_an_annotator_is_refused(studio: Studio, call) -> None:
    with pytest.raises(ConflictError, match="this action is for leads"):
        call(studio, "alice")
    assert list_assignments(studio.engine, studio.dataset_id, studio.vocab) == []


def test_unknown_names_are_one_line_errors(studio: Studio) -> None:
    with pytest.raises(RelabelError, match="unknown class 'no-such-class'"):
        everything(studio, class_text="no-such-class")
    with pytest.raises(NotFoundError, match="unknown user 'zed'"):
        everything(studio, annotator="zed")
    with pytest.raises(NotFoundError, match="unknown user 'zed'"):
        grid_tab.assign_filtered(studio, "lena", "zed", ANY, "", ANY, False, ANY)
    with pytest.raises(NotFoundError, match="choose the user"):
        grid_tab.assign_class(studio, "lena", None, "tabby")
