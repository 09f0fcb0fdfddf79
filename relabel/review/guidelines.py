"""The labeling guidelines a lead writes for the annotators: Markdown text, versioned, shown on the review card.

Saving guidelines adds a row (`db.models.Guidelines`); the newest row is the current text and the older ones are
the history, so a decision can always be read against the guidelines in force when it was made. Only an active
lead saves guidelines; everyone signed in reads them.

The text is untrusted: the studio never renders it as HTML. `guideline_blocks` reads the small Markdown subset the
card and the lead's preview show (headings, bullet lists, bold, paragraphs); everything else stays plain text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.engine import session_scope
from db.enums import Role
from db.models import Guidelines, User, pk, stored_id
from relabel.common.errors import ConflictError, InputError
from relabel.common.storable import storable_text
from relabel.decisions.annotations import get_user

MAX_GUIDELINES_BYTES = 64 * 1024  # of UTF-8: a long handbook fits, a pasted data file does not


@dataclass(frozen=True)
class GuidelinesVersion:
    """One saved version of the guidelines."""

    id: int
    text: str
    author: str
    created_at: datetime  # UTC


def check_guidelines(text: str) -> str:
    """`text` when it can be saved as the guidelines; raises InputError naming the reason otherwise."""
    if not isinstance(text, str):
        raise InputError(f"the guidelines must be text, not {type(text).__name__}")
    if len(text) > MAX_GUIDELINES_BYTES:  # more characters than bytes allowed: too long whatever they are
        raise InputError(f"the guidelines have {len(text):,} characters; at most {MAX_GUIDELINES_BYTES:,} bytes "
                         "(64 KiB of UTF-8) are kept")  # fmt: skip
    storable_text(text, "the guidelines", max_length=MAX_GUIDELINES_BYTES)
    size = len(text.encode("utf-8"))
    if size > MAX_GUIDELINES_BYTES:
        raise InputError(f"the guidelines have {size:,} bytes of UTF-8; at most {MAX_GUIDELINES_BYTES:,} (64 KiB) "
                         "are kept")  # fmt: skip
    if not text.strip():
        raise InputError("the guidelines are empty: write what annotators should know before saving")
    return text


def save_guidelines(engine: Engine, text: str, *, author: str) -> tuple[GuidelinesVersion, bool]:
    """Save `text` as the current guidelines, written by lead `author`. Returns (the current version, whether a new
    one was added): text equal to the current guidelines adds nothing. Raises InputError for unusable text,
    NotFoundError for an unknown author, ConflictError for an annotator or a disabled user."""
    check_guidelines(text)
    with session_scope(engine) as s:
        user = get_user(s, author)
        if user.role is not Role.lead:
            raise ConflictError(f"user {author!r} is an annotator; only a lead saves the guidelines")
        if not user.active:
            raise ConflictError(f"user {author!r} is disabled; only an active lead saves the guidelines")
        current = s.scalars(select(Guidelines).order_by(col(Guidelines.id).desc()).limit(1)).first()
        if current is not None and current.text == text:
            return _version(current, _author_name(s, current.author_id)), False
        row = Guidelines(text=text, author_id=stored_id(user))
        s.add(row)
        s.flush()
        return _version(row, user.name), True


def current_guidelines(engine: Engine) -> GuidelinesVersion | None:
    """The guidelines in force (the newest version), or None when no lead has written any."""
    history = guidelines_history(engine, limit=1)
    return history[0] if history else None


def guidelines_history(engine: Engine, *, limit: int | None = None) -> list[GuidelinesVersion]:
    """Saved versions, newest first (at most `limit`)."""
    query = (
        select(pk(Guidelines.id), col(Guidelines.text), col(User.name), col(Guidelines.created_at))
        .join(User, col(User.id) == col(Guidelines.author_id))
        .order_by(col(Guidelines.id).desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        return [GuidelinesVersion(int(i), text, name, created) for i, text, name, created in conn.execute(query)]


def _author_name(session: Session, user_id: int) -> str:
    return str(session.scalars(select(col(User.name)).where(col(User.id) == user_id)).one())


def _version(row: Guidelines, author: str) -> GuidelinesVersion:
    return GuidelinesVersion(stored_id(row), row.text, author, row.created_at)


# -- the Markdown subset the studio shows -------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One block of the guidelines as the studio shows it: `kind` is "h1", "h2", "h3", "li" or "p"; `spans` are
    (text, bold) pieces, shown as text."""

    kind: str
    spans: tuple[tuple[str, bool], ...]


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def inline_spans(text: str) -> tuple[tuple[str, bool], ...]:
    """`text` cut into (piece, bold) spans at `**bold**` markers; nothing else is markup."""
    spans: list[tuple[str, bool]] = []
    at = 0
    for m in _BOLD.finditer(text):
        if m.start() > at:
            spans.append((text[at : m.start()], False))
        spans.append((m.group(1), True))
        at = m.end()
    if at < len(text):
        spans.append((text[at:], False))
    return tuple(spans)


def guideline_blocks(text: str) -> list[Block]:
    """The blocks of `text`: a `#`-line is a heading (levels past 3 read as 3), a `-`, `*` or `+` line a bullet,
    and other consecutive lines one paragraph (their line breaks kept)."""
    blocks: list[Block] = []
    paragraph: list[str] = []

    def close_paragraph() -> None:
        if paragraph:
            blocks.append(Block("p", inline_spans("\n".join(paragraph))))
            paragraph.clear()

    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        heading, bullet = _HEADING.match(line), _BULLET.match(line)
        if heading:
            close_paragraph()
            blocks.append(Block(f"h{min(3, len(heading.group(1)))}", inline_spans(heading.group(2))))
        elif bullet:
            close_paragraph()
            blocks.append(Block("li", inline_spans(bullet.group(1))))
        elif not line.strip():
            close_paragraph()
        else:
            paragraph.append(line)
    close_paragraph()
    return blocks
