"""Comments on images (`relabel.review.comments`, `relabel comments list`): stored as typed, refused when empty,
too long or unstorable, listed by image and by user."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.models import Image, ImageComment, pk
from relabel.cli import cli
from relabel.common.errors import ConflictError, InputError, NotFoundError
from relabel.review.comments import MAX_COMMENT, add_comment, image_comments, list_comments
from relabel.review.users import set_active
from tests.studio_workspace import build_workspace


@pytest.fixture
def workspace(tmp_path: Path, db_url: str) -> tuple[Engine, list[str]]:
    engine = build_workspace(tmp_path / "ws", db_url)
    return engine, ["--workspace", str(tmp_path / "ws"), "--db", db_url]


def image_ids(engine: Engine) -> list[int]:
    with Session(engine) as s:
        return list(s.scalars(select(pk(Image.id)).order_by(pk(Image.id))))


def count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count(col(ImageComment.id)))).scalar_one())


def relabel(where: list[str], *args: str) -> Result:
    return CliRunner().invoke(cli, [*where, *args])


def test_comments_are_stored_and_listed_by_image_and_user(workspace) -> None:
    engine, _ = workspace
    first, second = image_ids(engine)[:2]
    a = add_comment(engine, image_id=first, user="alice", text="  the cat is cut off <b>here</b>  ")
    b = add_comment(engine, image_id=first, user="lena", text="a notebook, not a laptop")
    c = add_comment(engine, image_id=second, user="alice", text="blurry")
    assert a.text == "the cat is cut off <b>here</b>" and a.user == "alice" and a.created_at.tzinfo is not None
    with engine.connect() as conn:
        assert [x.id for x in image_comments(conn, first)] == [a.id, b.id]
    assert [x.id for x in list_comments(engine, user="alice")] == [a.id, c.id]
    assert [x.id for x in list_comments(engine, image_id=first, user="alice")] == [a.id]
    assert [x.id for x in list_comments(engine)] == [a.id, b.id, c.id]


@pytest.mark.parametrize(
    ("text", "reason"),
    [("", "empty"), ("   \n ", "empty"), ("x" * (MAX_COMMENT + 1), "2000"), ("a\0b", "NUL"), (7, "text")],
)
def test_an_unusable_comment_is_one_line_and_stores_nothing(workspace, text: object, reason: str) -> None:
    engine, _ = workspace
    with pytest.raises(InputError) as err:
        add_comment(engine, image_id=image_ids(engine)[0], user="alice", text=text)  # type: ignore[arg-type]
    assert "comment" in str(err.value) and reason in str(err.value) and "\n" not in str(err.value)
    assert count(engine) == 0


def test_an_unknown_image_or_user_or_a_disabled_user_stores_nothing(workspace) -> None:
    engine, _ = workspace
    image = image_ids(engine)[0]
    with pytest.raises(NotFoundError, match="image 999999"):
        add_comment(engine, image_id=999_999, user="alice", text="hi")
    with pytest.raises(NotFoundError, match="mallory"):
        add_comment(engine, image_id=image, user="mallory", text="hi")
    set_active(engine, "bob", False)
    with pytest.raises(ConflictError, match="disabled"):
        add_comment(engine, image_id=image, user="bob", text="hi")
    assert count(engine) == 0


def test_the_cli_lists_filters_and_refuses_an_unknown_user(workspace) -> None:
    engine, where = workspace
    first, second = image_ids(engine)[:2]
    add_comment(engine, image_id=first, user="alice", text="two\nlines")
    add_comment(engine, image_id=second, user="bob", text="blurry")
    lines = relabel(where, "comments", "list").stdout.splitlines()
    assert len(lines) == 2 and "alice: two lines" in lines[0] and f"image {second}" in lines[1]
    only = json.loads(relabel(where, "comments", "list", "--image", str(first), "--json").stdout)
    assert [(c["user"], c["text"]) for c in only] == [("alice", "two\nlines")]
    assert relabel(where, "comments", "list", "--user", "bob").stdout.count("\n") == 1
    result = relabel(where, "comments", "list", "--user", "mallory")
    assert result.exit_code == 3 and result.stderr.count("\n") == 1 and "mallory" in result.stderr
