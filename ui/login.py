"""Sign-in for the studio: Gradio's `/login` route calls `LoginGuard.login` with the typed name and password.

A failed sign-in counts against the typed name and against the address it came from: in the database
(`relabel.review.sign_in_throttle.DbSignInThrottle`, what `relabel serve` uses), so every studio process on one database
shares the counts and a lockout outlives a restart, or in this process (`LoginThrottle`). After FREE_PER_USER failures
for a name (FREE_PER_ADDRESS from an address) it is locked out, for LOCK_S seconds and then twice as long after each
further failure (up to MAX_LOCK_S); a locked-out attempt is refused without hashing the password, even when it is the
right one, with the wait in the message and a Retry-After header. It is answered 400, like a wrong password: Gradio's
login page shows "incorrect credentials" for a 400 and nothing at all for any other refusal, and the page's sign-in
message states the lockout rule (`ui.app.AUTH_MESSAGE`). Unknown names count the same as real ones, and the password
check does the same scrypt work for them (`relabel.decisions.annotations.verify_password`), so neither the answer nor
its timing tells which names exist. The address is the one the request comes from; `X-Forwarded-For` replaces it only
for a proxy named with `relabel serve --trusted-proxy` (`ui.security`), so a client that rotates the header still counts
as one address.

Gradio's `/login` is an `async` route that calls a plain `auth` function on its event loop, where one scrypt hash
(~50 ms) stalls every other request; `login` is a coroutine, so Gradio awaits it, and the throttle's check and the
hash run on a small pool of its own threads, which also bounds how much CPU sign-ins can take.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from fastapi import HTTPException
from sqlalchemy.engine import Engine

from relabel.review.sign_in_throttle import (
    FORGET_S,
    FREE_PER_ADDRESS,
    FREE_PER_USER,
    LOCK_S,
    MAX_LOCK_S,
    DbSignInThrottle,
    Lockout,
)
from ui.security import client_address

__all__ = ["FREE_PER_ADDRESS", "FREE_PER_USER", "LOCK_S", "LOCKED_STATUS", "LoginGuard", "LoginThrottle", "Lockout"]

MAX_KEYS = 10_000  # keys remembered at most by a LoginThrottle; the stalest unlocked ones go first
HASH_WORKERS = 2  # password hashes at once
LOCKED_STATUS = 400  # what Gradio's login page shows as a failed sign-in (it ignores 429)


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0
    locked_until: float = 0.0


class Throttle(Protocol):
    """What `LoginGuard` asks before and after a password check (`LoginThrottle`, `DbSignInThrottle`)."""

    def begin(self, user: str, address: str) -> Lockout | None: ...

    def succeeded(self, user: str, address: str) -> None: ...


class LoginThrottle:
    """Failed sign-ins per name and per address in this process only, with an exponentially growing lockout (the
    same rule as `DbSignInThrottle`); for a studio without a shared database, and tests. Thread-safe; `clock` is in
    seconds (time.monotonic)."""

    def __init__(
        self,
        *,
        free_per_user: int = FREE_PER_USER,
        free_per_address: int = FREE_PER_ADDRESS,
        lock_s: float = LOCK_S,
        max_lock_s: float = MAX_LOCK_S,
        forget_s: float = FORGET_S,
        max_keys: int = MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free = {"user": free_per_user, "address": free_per_address}
        self.lock_s, self.max_lock_s, self.forget_s, self.max_keys = lock_s, max_lock_s, forget_s, max_keys
        self.clock = clock
        self._failures: OrderedDict[tuple[str, str], _Failures] = OrderedDict()
        self._lock = threading.Lock()

    def begin(self, user: str, address: str) -> Lockout | None:
        """Admit one sign-in attempt, or say why not. An admitted attempt counts as a failure until `succeeded`
        says otherwise, so a burst of parallel guesses is cut off after `free` of them, not after the first
        answers."""
        with self._lock:
            return self._begin(user, address)

    def _begin(self, user: str, address: str) -> Lockout | None:
        now = self.clock()
        keys = (("user", user), ("address", address))
        for key in keys:
            record = self._current(key, now)
            if record is not None and record.locked_until > now:
                who = f"{user!r}" if key[0] == "user" else "this address"
                return Lockout(who, record.locked_until - now)
        for key in keys:
            self._fail(key, now)
        return None

    def succeeded(self, user: str, address: str) -> None:
        """The admitted attempt was right: the name starts afresh, and the address's count takes the attempt
        back."""
        with self._lock:
            self._failures.pop(("user", user), None)
            record = self._failures.get(("address", address))
            if record is not None:
                record.count = max(0, record.count - 1)
                if record.count < self.free["address"]:
                    record.locked_until = 0.0

    def _current(self, key: tuple[str, str], now: float) -> _Failures | None:
        record = self._failures.get(key)
        if record is not None and now - record.last > self.forget_s and record.locked_until <= now:
            del self._failures[key]
            return None
        return record

    def _fail(self, key: tuple[str, str], now: float) -> None:
        record = self._current(key, now) or _Failures()
        record.count, record.last = record.count + 1, now
        over = record.count - self.free[key[0]]
        if over >= 0:
            record.locked_until = now + min(self.lock_s * 2**over, self.max_lock_s)
        self._failures[key] = record
        self._failures.move_to_end(key)
        self._forget_stalest(now)

    def _forget_stalest(self, now: float) -> None:
        """Keep at most `max_keys` records, forgetting the stalest that are not locked: a flood of failures under
        other names must never free a locked one (each lock costs its maker `free` hashed attempts)."""
        excess = len(self._failures) - self.max_keys
        if excess <= 0:
            return
        stale = [k for k, r in self._failures.items() if r.locked_until <= now][:excess]
        for key in stale:
            del self._failures[key]


class LoginGuard:
    """Gradio's `auth`: `check(name, password) -> bool` (the studio's password check), throttled and run off the
    event loop."""

    def __init__(self, check: Callable[[str, str], bool], throttle: Throttle | None = None) -> None:
        self.check = check
        self.throttle: Throttle = throttle or LoginThrottle()
        self._pool = ThreadPoolExecutor(max_workers=HASH_WORKERS, thread_name_prefix="login")

    @classmethod
    def shared(cls, check: Callable[[str, str], bool], engine: Engine) -> LoginGuard:
        """A guard whose failure counts are rows of `engine`'s database, shared by every studio process on it."""
        return cls(check, DbSignInThrottle(engine))

    async def login(self, name: str, password: str) -> bool:
        """True when the password is right; raises HTTP 400 with the wait while the name or address is locked."""
        address = client_address()
        loop = asyncio.get_running_loop()
        refused, ok = await loop.run_in_executor(self._pool, self._attempt, name, password, address)
        if refused is not None:
            headers = {"Retry-After": str(max(1, math.ceil(refused.seconds)))}
            raise HTTPException(status_code=LOCKED_STATUS, detail=refused.message, headers=headers)
        return ok

    def _attempt(self, name: str, password: str, address: str) -> tuple[Lockout | None, bool]:
        """Admit, check and count one attempt, off the event loop (the throttle may ask the database)."""
        refused = self.throttle.begin(name, address)
        if refused is not None:
            return refused, False
        ok = bool(self.check(name, password))
        if ok:
            self.throttle.succeeded(name, address)
        return None, ok
