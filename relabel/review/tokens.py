"""Card tokens: each card served gets a one-time token that its decision must carry.

The token ties a decision to the card as it was served: who saw which image, when (the server measures the time
on the item), what it suggested, and the newest decision of that user on the image at that moment, so a decision
made on a card that another tab has since answered is refused instead of silently replacing the other answer.
Only tokens the studio issued are accepted: a made-up token is refused (the page reloads the card), so a token can
never speak for an image that was not served to that user.

`DbCardTokens`, what the studio uses, keeps the tokens in the database (`card_tokens`), so a card served by one
studio process is answered on any other on the database, and still after a restart. `CardTokens` keeps them in
the process's memory (one process, tests).

Each user has a pool of their own, bounded by MAX_TOKENS_PER_USER, oldest dropped first: one user asking for cards
as fast as they can (a script, a stuck key) drops only their own old tokens, never a colleague's open card. Users
are added by leads, so the pools together stay bounded too. In the database a token beyond its user's newest
MAX_TOKENS_PER_USER is refused when it is checked, and the rows are deleted every PRUNE_EVERY cards a process
serves the user: serving a card is one statement.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import aliased
from sqlmodel import col

from db.models import CardToken
from relabel.common.errors import ConflictError, InputError, StaleCardError

MAX_TOKENS_PER_USER = 5_000  # a user's tokens kept; an evicted token is refused like an unknown one (card reloads)
MAX_TOKEN_LENGTH = 64
PRUNE_EVERY = 32  # cards a process serves a user between two deletions of their tokens beyond the pool


@dataclass(frozen=True)
class Shown:
    """A card as it was served: who saw which image when, and what it suggested."""

    user_id: int
    image_id: int
    at: float  # wall-clock seconds since 1970 when served (the same in every process)
    suggestion_id: int | None
    suggested_class: int | None
    original: tuple[int, ...]
    last_event: int | None  # id of the user's newest decision or undo on the image when served


def _checked(token: str, user_id: int, image_id: int, shown: Shown | None) -> Shown:
    """`shown`, the card `token` was issued for, when it is the card of `image_id` served to `user_id`."""
    if shown is None:
        raise StaleCardError(
            f"the card of image {image_id} was not served by this studio session (the card is too old, or its token "
            "is made up); the card has been reloaded: decide again"
        )
    if shown.user_id != user_id or shown.image_id != image_id:
        raise ConflictError(f"this token was issued for another card than image {image_id}; reload the card")
    return shown


def _well_formed(token: str) -> None:
    if not token or len(token) > MAX_TOKEN_LENGTH:
        raise InputError("a decision needs the token of the card it answers; reload the card")


class CardTokens:
    """Issued tokens in this process's memory, per user newest last, at most `limit` per user. Thread-safe."""

    def __init__(self, limit: int = MAX_TOKENS_PER_USER) -> None:
        self._shown: dict[str, Shown] = {}  # every user's tokens, so a token used by another user is named as such
        self._pools: dict[int, OrderedDict[str, None]] = {}  # each user's tokens, oldest first
        self._lock = threading.Lock()
        self._limit = limit

    def issue(
        self,
        user_id: int,
        image_id: int,
        *,
        suggestion_id: int | None,
        suggested_class: int | None,
        original: tuple[int, ...],
        last_event: int | None,
    ) -> str:
        token = secrets.token_hex(12)
        shown = Shown(user_id, image_id, time.time(), suggestion_id, suggested_class, original, last_event)
        with self._lock:
            self._shown[token] = shown
            pool = self._pools.setdefault(user_id, OrderedDict())
            pool[token] = None
            while len(pool) > self._limit:
                del self._shown[pool.popitem(last=False)[0]]
        return token

    def check(self, token: str, user_id: int, image_id: int) -> Shown:
        """The card `token` was issued for; refuses a token that is unknown or was issued for another card."""
        _well_formed(token)
        with self._lock:
            shown = self._shown.get(token)
        return _checked(token, user_id, image_id, shown)


class DbCardTokens:
    """Issued tokens as rows of `card_tokens`, shared by every studio process on the database, at most `limit` per
    user (the oldest rows go). `write_lock`: what the process holds around its SQLite writes (`Studio`)."""

    def __init__(
        self,
        engine: Engine,
        limit: int = MAX_TOKENS_PER_USER,
        *,
        write_lock: AbstractContextManager[object] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine, self._limit, self.clock = engine, limit, clock
        self._write_lock = write_lock if write_lock is not None else nullcontext()
        self._served: dict[int, int] = {}  # user -> cards this object served them
        self._lock = threading.Lock()
        # built once: making the statement (a correlated subquery) costs more than running it
        in_pool = col(CardToken.id) >= func.coalesce(self._oldest_kept(col(CardToken.user_id)), 0)
        self._check_query = select(CardToken).where(col(CardToken.token) == bindparam("token"), in_pool)

    def issue(
        self,
        user_id: int,
        image_id: int,
        *,
        suggestion_id: int | None,
        suggested_class: int | None,
        original: tuple[int, ...],
        last_event: int | None,
    ) -> str:
        token = secrets.token_hex(12)
        row = {
            "token": token,
            "user_id": user_id,
            "image_id": image_id,
            "served_at": datetime.fromtimestamp(self.clock(), timezone.utc),
            "suggestion_id": suggestion_id,
            "suggested_class": suggested_class,
            "original": list(original),
            "last_event": last_event,
        }
        with self._write_lock, self.engine.begin() as conn:
            conn.execute(insert(CardToken).values(**row))
            with self._lock:
                self._served[user_id] = served = self._served.get(user_id, 0) + 1
            if served % PRUNE_EVERY == 0:
                kept = col(CardToken.id) >= func.coalesce(self._oldest_kept(user_id), 0)
                conn.execute(delete(CardToken).where(col(CardToken.user_id) == user_id, ~kept))
        return token

    def _oldest_kept(self, user_id: Any) -> Any:
        """The id of the oldest token kept in `user_id`'s pool (a column or a value), as a scalar subquery; NULL
        while the pool is not full."""
        other = aliased(CardToken)
        return (
            select(col(other.id))
            .where(col(other.user_id) == user_id)
            .order_by(col(other.id).desc())
            .offset(self._limit - 1)
            .limit(1)
            .scalar_subquery()
        )

    def check(self, token: str, user_id: int, image_id: int) -> Shown:
        """The card `token` was issued for; refuses a token that is unknown or was issued for another card."""
        _well_formed(token)
        with self.engine.connect() as conn:
            row = conn.execute(self._check_query, {"token": token}).first()
        shown = None
        if row is not None:
            served = row.served_at if row.served_at.tzinfo else row.served_at.replace(tzinfo=timezone.utc)
            shown = Shown(
                row.user_id,
                row.image_id,
                served.timestamp(),
                row.suggestion_id,
                row.suggested_class,
                tuple(row.original),
                row.last_event,
            )
        return _checked(token, user_id, image_id, shown)
