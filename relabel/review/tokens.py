"""Card tokens: each card served gets a one-time token that its decision must carry.

The token ties a decision to the card as it was served: who saw which image, when (the server measures the time
on the item), what it suggested, and the newest decision of that user on the image at that moment, so a decision
made on a card that another tab has since answered is refused instead of silently replacing the other answer.
Only tokens this process issued are accepted: a made-up or pre-restart token is refused (the page reloads the
card), so a token can never speak for an image that was not served to that user.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from relabel.errors import ConflictError, InputError, StaleCardError

MAX_TOKENS = 200_000  # tokens kept in memory; an evicted token is refused like an unknown one (the card reloads)
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
    """Issued tokens, newest last, bounded by MAX_TOKENS. Thread-safe."""

    def __init__(self, limit: int = MAX_TOKENS) -> None:
        self._shown: OrderedDict[str, Shown] = OrderedDict()
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
            while len(self._shown) > self._limit:
                self._shown.popitem(last=False)
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
