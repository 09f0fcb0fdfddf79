"""Sign-in for the studio: Gradio's `/login` route calls `LoginGuard.login` with the typed name and password.

A failed sign-in counts against the typed name and against the address it came from (`LoginThrottle`). After
FREE_PER_USER failures for a name (FREE_PER_ADDRESS from an address) it is locked out, for LOCK_S seconds and then
twice as long after each further failure (up to MAX_LOCK_S); a locked-out attempt is refused without hashing the
password, even when it is the right one, with the wait in the message and a Retry-After header. It is answered
400, like a wrong password: Gradio's login page shows "incorrect credentials" for a 400 and nothing at all for any
other refusal, and the page's sign-in message states the lockout rule (`ui.app.AUTH_MESSAGE`). Unknown names count
the same as real ones, and the password check does the same scrypt work for them
(`relabel.annotations.verify_password`), so neither the answer nor its timing tells which names exist. The address
is the one the request comes from; `X-Forwarded-For` replaces it only for a proxy named with `relabel serve
--trusted-proxy` (`ui.security`), so a client that rotates the header still counts as one address.

Gradio's `/login` is an `async` route that calls a plain `auth` function on its event loop, where one scrypt hash
(~50 ms) stalls every other request; `login` is a coroutine, so Gradio awaits it, and the hash runs on a small
pool of its own threads, which also bounds how much CPU sign-ins can take.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from fastapi import HTTPException

from ui.security import client_address

FREE_PER_USER = 5  # failed sign-ins for one name before it is locked out
FREE_PER_ADDRESS = 20  # from one address: higher, since a lab behind one address shares it
LOCK_S = 30.0  # the first lockout; it doubles with each further failure
MAX_LOCK_S = 900.0
FORGET_S = 3600.0  # failures this long ago no longer count
MAX_KEYS = 10_000  # keys remembered at most; the stalest unlocked ones go first
HASH_WORKERS = 2  # password hashes at once
LOCKED_STATUS = 400  # what Gradio's login page shows as a failed sign-in (it ignores 429)


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0
    locked_until: float = 0.0


@dataclass(frozen=True)
class Lockout:
    """Why a sign-in is refused: `who` ("'alice'" or "this address") may try again in `seconds`."""

    who: str
    seconds: float

    @property
    def message(self) -> str:
        wait = max(1, math.ceil(self.seconds))
        return f"too many failed sign-ins for {self.who}; try again in {wait} s"


class LoginThrottle:
    """Failed sign-ins per name and per address, with an exponentially growing lockout. Thread-safe by being
    called from the event loop only (`LoginGuard`); `clock` is in seconds (time.monotonic)."""

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

    def begin(self, user: str, address: str) -> Lockout | None:
        """Admit one sign-in attempt, or say why not. An admitted attempt counts as a failure until `succeeded`
        says otherwise, so a burst of parallel guesses is cut off after `free` of them, not after the first
        answers."""
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

    def __init__(self, check: Callable[[str, str], bool], throttle: LoginThrottle | None = None) -> None:
        self.check = check
        self.throttle = throttle or LoginThrottle()
        self._pool = ThreadPoolExecutor(max_workers=HASH_WORKERS, thread_name_prefix="login")

    async def login(self, name: str, password: str) -> bool:
        """True when the password is right; raises HTTP 400 with the wait while the name or address is locked."""
        address = client_address()
        refused = self.throttle.begin(name, address)
        if refused is not None:
            headers = {"Retry-After": str(max(1, math.ceil(refused.seconds)))}
            raise HTTPException(status_code=LOCKED_STATUS, detail=refused.message, headers=headers)
        loop = asyncio.get_running_loop()
        ok = await loop.run_in_executor(self._pool, self.check, name, password)
        if ok:
            self.throttle.succeeded(name, address)
        return bool(ok)
