"""Card tokens: each card served gets a one-time token that its decision must carry.

The token ties a decision to the card as it was served: who saw which image, when (the server measures the time
on the item), what it suggested, and the newest decision of that user on the image at that moment, so a decision
made on a card that another tab has since answered is refused instead of silently replacing the other answer.
Only tokens this process issued are accepted: a made-up or pre-restart token is refused (the page reloads the
card), so a token can never speak for an image that was not served to that user.

Each user has a pool of their own, bounded by MAX_TOKENS_PER_USER, oldest dropped first: one user asking for cards
as fast as they can (a script, a stuck key) drops only their own old tokens, never a colleague's open card. Users
are added by leads, so the pools together stay bounded too.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from relabel.errors import ConflictError, InputError, StaleCardError

MAX_TOKENS_PER_USER = 5_000  # a user's tokens kept; an evicted token is refused like an unknown one (card reloads)
MAX_TOKEN_LENGTH = 64


@dataclass(frozen=True)
class Shown:
    """A card as it was served: who saw which image when, and what it suggested."""

    user_id: int
    image_id: int
    at: float  # time.monotonic() when served
    suggestion_id: int | None
    suggested_class: int | None
    original: tuple[int, ...]
    last_event: int | None  # id of the user's newest decision or undo on the image when served


class CardTokens:
    """Issued tokens, per user newest last, at most `limit` per user. Thread-safe."""

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
        shown = Shown(user_id, image_id, time.monotonic(), suggestion_id, suggested_class, original, last_event)
        with self._lock:
            self._shown[token] = shown
            pool = self._pools.setdefault(user_id, OrderedDict())
            pool[token] = None
            while len(pool) > self._limit:
                del self._shown[pool.popitem(last=False)[0]]
        return token

    def check(self, token: str, user_id: int, image_id: int) -> Shown:
        """The card `token` was issued for; refuses a token that is unknown or was issued for another card."""
        if not token or len(token) > MAX_TOKEN_LENGTH:
            raise InputError("a decision needs the token of the card it answers; reload the card")
        with self._lock:
            shown = self._shown.get(token)
        if shown is None:
            raise StaleCardError(
                f"the card of image {image_id} was not served by this studio session (it restarted, or the card is "
                "too old); the card has been reloaded: decide again"
            )
        if shown.user_id != user_id or shown.image_id != image_id:
            raise ConflictError(f"this token was issued for another card than image {image_id}; reload the card")
        return shown
