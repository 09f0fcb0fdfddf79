"""Sign-in sessions in the database, so that any number of studio processes on one database share them and a
session outlives a restart.

A session is a row of `studio_sessions` keyed by the sha256 of its token: the browser's cookie holds the token, the
database never does, so a copy of the database signs no one in. A session ends at its `expires_at` (wall-clock
UTC): an ordinary one IDLE_S after it was last used (each use moves the expiry on, written at most every TOUCH_S),
a remembered one ("keep me signed in") REMEMBER_S after sign-in, however it is used. Signing out ends the user's
sessions; disabling a user ends theirs too (`end_user_sessions`), and a disabled user's session is refused
anyway.

Every request asks who its token belongs to (`DbSessions.user_of`). The answer is kept in the process for at most
CHECK_CACHE_S seconds, so a page's burst of requests costs one query, and a session ended in another process (or
by `relabel users disable`) stops working here within that window; one ended in this process stops at once.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from db.models import SchemaVersion, StudioSession, User, pk

IDLE_S = 8 * 3600.0  # an ordinary session ends this long after its last use
REMEMBER_S = 30 * 86400.0  # a remembered session ends this long after sign-in
CHECK_CACHE_S = 5.0  # how long a process trusts its last answer for a token
TOUCH_S = 60.0  # an ordinary session's expiry is moved on at most this often
MAX_CACHED = 10_000  # answers kept at most; the cache is emptied when it grows past this


def token_hash(token: str) -> str:
    """What the database stores of a session token: its sha256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def cookie_id(engine: Engine) -> str:
    """A name for the studio's session cookies that every process on this database shares and another workspace's
    studio on the same host does not: derived from when the database's schema was first stamped."""
    with engine.connect() as conn:
        first = conn.execute(select(col(SchemaVersion.applied_at)).order_by(col(SchemaVersion.version))).scalar()
    return hashlib.sha256(f"regt-studio {first}".encode()).hexdigest()[:24]


def end_user_sessions(conn: Connection, user_id: int) -> int:
    """Delete every session of user `user_id` (in the caller's transaction); returns how many there were."""
    result = conn.execute(delete(StudioSession).where(col(StudioSession.user_id) == user_id))
    return int(result.rowcount or 0)


def _utc(value: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite gives them back without a zone)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class _Answer:
    user: str | None  # None: no such session, expired, or its user disabled
    until: float  # monotonic time after which the database is asked again


class DbSessions:
    """The sessions of every studio process on `engine`'s database (the module docstring). Thread-safe.

    `clock`: wall-clock seconds since 1970 (tests move it); `idle_s`, `remember_s`, `cache_s` in seconds (`cache_s`
    by default CHECK_CACHE_S)."""

    def __init__(
        self,
        engine: Engine,
        *,
        idle_s: float = IDLE_S,
        remember_s: float = REMEMBER_S,
        cache_s: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine, self.clock = engine, clock
        self.idle_s, self.remember_s = idle_s, remember_s
        self.cache_s = CHECK_CACHE_S if cache_s is None else cache_s
        self._cache: dict[str, _Answer] = {}  # token hash -> the last answer
        self._lock = threading.Lock()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), timezone.utc)

    def create(self, token: str, user: str, *, remember: bool = False) -> None:
        """Store a new session of user `user` (already signed in) under `token`; expired sessions go too."""
        now = self._now()
        expires = now + timedelta(seconds=self.remember_s if remember else self.idle_s)
        with self.engine.begin() as conn:
            user_id = conn.execute(select(pk(User.id)).where(col(User.name) == user)).scalar_one()
            conn.execute(delete(StudioSession).where(col(StudioSession.expires_at) <= now))
            conn.execute(
                insert(StudioSession).values(
                    token_hash=token_hash(token),
                    user_id=user_id,
                    created_at=now,
                    expires_at=expires,
                    last_seen=now,
                    remember=remember,
                )
            )
        self._remember(token_hash(token), user)

    def user_of(self, token: str) -> str | None:
        """The name of the user whose live session `token` is, or None."""
        key = token_hash(token)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached.until > time.monotonic():
            return cached.user
        user = self._look_up(key)
        self._remember(key, user)
        return user

    def end(self, token: str) -> str | None:
        """End every session of the user whose session `token` is (signing out); returns their name, or None when
        `token` is no live session."""
        key = token_hash(token)
        with self.engine.begin() as conn:
            row = conn.execute(
                select(col(StudioSession.user_id), col(User.name))
                .join(User, col(User.id) == col(StudioSession.user_id))
                .where(col(StudioSession.token_hash) == key)
            ).first()
            if row is None:
                return None
            end_user_sessions(conn, row[0])
        with self._lock:  # this process forgets the user's other sessions at once, not after the cache window
            self._cache = {k: a for k, a in self._cache.items() if a.user != row[1]}
        self._remember(key, None)
        return str(row[1])

    def end_all(self) -> None:
        """End every session of every user: everyone signs in again."""
        with self.engine.begin() as conn:
            conn.execute(delete(StudioSession))
        with self._lock:
            self._cache.clear()

    def _look_up(self, key: str) -> str | None:
        now = self._now()
        with self.engine.connect() as conn:
            row = conn.execute(
                select(col(User.name), col(StudioSession.last_seen), col(StudioSession.remember))
                .join(User, col(User.id) == col(StudioSession.user_id))
                .where(col(StudioSession.token_hash) == key, col(StudioSession.expires_at) > now, col(User.active))
            ).first()
        if row is None:
            return None
        name, last_seen, remember = row
        if not remember and (now - _utc(last_seen)).total_seconds() >= TOUCH_S:
            with self.engine.begin() as conn:
                conn.execute(
                    update(StudioSession)
                    .where(col(StudioSession.token_hash) == key)
                    .values(last_seen=now, expires_at=now + timedelta(seconds=self.idle_s))
                )
        return str(name)

    def _remember(self, key: str, user: str | None) -> None:
        with self._lock:
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            self._cache[key] = _Answer(user, time.monotonic() + self.cache_s)
