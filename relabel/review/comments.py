"""Comments on images: a line an annotator or a lead leaves on an image's card ("the dog is cut off at the
edge", "is this a notebook or a laptop?"), for the others who open it and for the lead who adjudicates it.

A comment is a row of `db.models.ImageComment`, never updated. Its text is untrusted: the studio shows it only as
text. Who may comment on which image is the studio's check (`ui.card_notes`: the images a user may open); here a
comment needs an existing image and an active user.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from db.engine import session_scope
from db.models import Image, ImageComment, User, pk, stored_id
from relabel.common.errors import InputError, NotFoundError
from relabel.common.storable import storable_text
from relabel.decisions.annotations import disabled_user, get_user

MAX_COMMENT = 2000  # characters, as a decision's note
LIST_LIMIT = 10_000  # comments `list_comments` returns at most


@dataclass(frozen=True)
class Comment:
    """One comment as it is shown: who wrote it, when (UTC) and on which image."""

    id: int
    image_id: int
    path: str
    user: str
    text: str
    created_at: datetime


def check_comment(text: object) -> str:
    """`text` without the spaces around it when it can be saved as a comment; raises InputError otherwise."""
    if not isinstance(text, str):
        raise InputError(f"the comment must be text, not {type(text).__name__}")
    storable_text(text, "the comment", max_length=MAX_COMMENT)
    if not text.strip():
        raise InputError("the comment is empty: write something before saving")
    return text.strip()


def add_comment(engine: Engine, *, image_id: int, user: str, text: object) -> Comment:
    """Store `user`'s comment on `image_id`. Raises InputError for unusable text, NotFoundError for an unknown
    image or user, ConflictError for a disabled user; nothing is written then."""
    body = check_comment(text)
    with session_scope(engine) as s:
        author = get_user(s, user)
        if not author.active:
            raise disabled_user(user)
        image = s.get(Image, image_id)
        if image is None:
            raise NotFoundError(f"image {image_id} does not exist")
        row = ImageComment(image_id=image_id, user_id=stored_id(author), text=body)
        s.add(row)
        s.flush()
        return Comment(stored_id(row), image_id, image.path, author.name, row.text, row.created_at)


_SELECT = (
    select(
        pk(ImageComment.id),
        col(ImageComment.image_id),
        col(Image.path),
        col(User.name),
        col(ImageComment.text),
        col(ImageComment.created_at),
    )
    .join(User, col(User.id) == col(ImageComment.user_id))
    .join(Image, col(Image.id) == col(ImageComment.image_id))
)


def image_comments(conn: Connection, image_id: int) -> list[Comment]:
    """The comments on one image, oldest first."""
    query = _SELECT.where(col(ImageComment.image_id) == image_id).order_by(col(ImageComment.id))
    return [Comment(*row) for row in conn.execute(query)]


def list_comments(
    engine: Engine, *, image_id: int | None = None, user: str | None = None, limit: int = LIST_LIMIT
) -> list[Comment]:
    """Comments, oldest first, on one image and/or by one user (None: any). Raises NotFoundError for an unknown
    user or image, so a typo is not answered "no comments"."""
    query = _SELECT
    with engine.connect() as conn:
        if user is not None:
            if conn.execute(select(col(User.id)).where(col(User.name) == user)).first() is None:
                raise NotFoundError(f"unknown user {user!r}; `relabel users list` shows the users")
            query = query.where(col(User.name) == user)
        if image_id is not None:
            if conn.execute(select(col(Image.id)).where(col(Image.id) == image_id)).first() is None:
                raise NotFoundError(f"image {image_id} does not exist")
            query = query.where(col(ImageComment.image_id) == image_id)
        return [Comment(*row) for row in conn.execute(query.order_by(col(ImageComment.id)).limit(limit))]


def visible_comments(comments: list[Comment], viewer: str, *, sees_all: bool) -> list[Comment]:
    """The comments `viewer` is shown on a card: all of them for a lead or once the viewer has decided the image
    (`sees_all`); before that only their own, as other users' decisions stay hidden (blind review)."""
    return comments if sees_all else [c for c in comments if c.user == viewer]
