"""The cards' guidelines (key G) and comments (key O): server functions added to a card's (`extend`), and the
comments every card reply carries.

Guidelines and comments are untrusted text. The guidelines go to the page as blocks of (text, bold) spans
(`relabel.review.guidelines.guideline_blocks`), comments as plain strings; the page puts both into the DOM as text
only. Any signed-in user reads the guidelines; a user comments only on an image they may open (an annotator: one
they decided, hold or would be served; a lead: any image of the dataset); only a lead saves guidelines, checked here
on the server whatever the page shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from db.enums import Role
from relabel.common.errors import NotFoundError
from relabel.review.comments import Comment, add_comment, image_comments, visible_comments
from relabel.review.guidelines import current_guidelines, guideline_blocks, save_guidelines
from relabel.review.studio import Studio
from ui.card_api import parse_key

Handler = Callable[[Studio, str, dict[str, Any]], dict[str, Any]]
WHEN = "%Y-%m-%d %H:%M UTC"
CARD_REPLIES = ("boot", "next", "open", "decide", "skip", "undo", "adjudicate", "take", "disputed")


def comment_rows(comments: list[Comment]) -> list[dict[str, Any]]:
    return [{"id": c.id, "who": c.user, "when": f"{c.created_at:{WHEN}}", "text": c.text} for c in comments]


def card_comments(studio: Studio, user: str, image_id: int, *, decided: bool) -> list[dict[str, Any]]:
    """The comments on `image_id` that `user` is shown (`visible_comments`: all for a lead or once `decided`),
    oldest first."""
    _, role = studio.user(user)
    with studio.engine.connect() as conn:
        comments = image_comments(conn, image_id)
    return comment_rows(visible_comments(comments, user, sees_all=role is Role.lead or decided))


def guidelines(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """The current guidelines as blocks to draw, with their version, author and time; `guidelines: None` when no
    lead has written any."""
    _, role = studio.user(user)
    version = current_guidelines(studio.engine)
    if version is None:
        hint = "write them in the Dashboard tab (Guidelines)" if role is Role.lead else "ask a lead to write them"
        return {"guidelines": None, "message": f"no labeling guidelines yet: {hint}"}
    blocks = [{"kind": b.kind, "spans": [[t, bold] for t, bold in b.spans]} for b in guideline_blocks(version.text)]
    about = f"version {version.id} · {version.author} · {version.created_at:{WHEN}}"
    return {"guidelines": {"blocks": blocks, "about": about, "version": version.id}}


def comment(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """Store the user's comment (`data["text"]`) on the open card's image; reply with the image's comments."""
    image_id, _ = parse_key(data)
    if not studio.may_open(user, image_id):
        raise NotFoundError(f"image {image_id} is not yours to open, so not yours to comment on")
    saved = add_comment(studio.engine, image_id=image_id, user=user, text=data.get("text"))
    card, _ = studio.open_card(user, image_id)
    return {
        "image_id": image_id,
        "comments": card_comments(studio, user, image_id, decided=card.own() is not None),
        "message": f"comment #{saved.id} saved on image {image_id}",
    }


def save_lead_guidelines(studio: Studio, user: str, text: str) -> str:
    """Save `text` as the guidelines for lead `user` (the role checked here, on the server); the message to show."""
    studio.require_lead(user)
    version, added = save_guidelines(studio.engine, text, author=user)
    if not added:
        return f"unchanged: this is the current version ({version.id})"
    return f"saved guidelines version {version.id} ({len(text.encode('utf-8')):,} bytes)"


def with_comments(handler: Handler) -> Handler:
    """`handler` whose reply's card (if any) carries the comments its viewer is shown."""

    def call(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
        reply = handler(studio, user, data)
        card = reply.get("card")
        if isinstance(card, dict) and isinstance(card.get("image_id"), int):
            own = card.get("own")
            decided = isinstance(own, dict) and not own.get("undone")
            card["comments"] = card_comments(studio, user, card["image_id"], decided=decided)
        return reply

    call.__name__ = getattr(handler, "__name__", "handler")
    return call


def extend(studio: Studio, mode: str, handlers: dict[str, Handler]) -> dict[str, Handler]:
    """`handlers` with comments on every card reply, and the `guidelines` and `comment` functions."""
    out = {name: with_comments(fn) if name in CARD_REPLIES else fn for name, fn in handlers.items()}
    return out | {"guidelines": guidelines, "comment": comment}
