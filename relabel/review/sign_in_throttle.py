"""Failed sign-ins counted in the database, so that every studio process on one database shares them and a lockout
outlives a restart.

A failed sign-in counts against the typed name and against the address it came from, each a row of
`sign_in_failures` keyed by (kind, key). After FREE_PER_USER failures for a name (FREE_PER_ADDRESS from an address)
it is locked out, for LOCK_S seconds and then twice as long after each further failure (up to MAX_LOCK_S). An
attempt counts as a failure from the moment it is admitted (`DbSignInThrottle.begin`) until `succeeded` takes it
back, so a burst of parallel guesses, spread over any number of processes, is cut off after `free` of them.

Admitting an attempt is one transaction over the two rows: each is created if missing, then locked (PostgreSQL:
`SELECT ... FOR UPDATE`, always the name's row first, so two processes never wait on each other in a circle;
SQLite: `BEGIN IMMEDIATE`, the database's write lock), checked and counted. Failures older than FORGET_S no longer
count; rows that old and no longer locked are deleted now and then (every PURGE_EVERY admitted attempts of a
process), so the table holds at most the names and addresses that failed within the last FORGET_S.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from db.models import SignInFailure

FREE_PER_USER = 5  # failed sign-ins for one name before it is locked out
FREE_PER_ADDRESS = 20  # from one address: higher, since a lab behind one address shares it
LOCK_S = 30.0  # the first lockout; it doubles with each further failure
MAX_LOCK_S = 900.0
FORGET_S = 3600.0  # failures this long ago no longer count
PURGE_EVERY = 200  # admitted attempts of a process between two deletions of forgotten rows


@dataclass(frozen=True)
class Lockout:
    """Why a sign-in is refused: `who` ("'alice'" or "this address") may try again in `seconds`."""

    who: str
    seconds: float

    @property
    def message(self) -> str:
        wait = max(1, math.ceil(self.seconds))
        return f"too many failed sign-ins for {self.who}; try again in {wait} s"


def _utc(value: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite gives them back without a zone)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


class DbSignInThrottle:
    """Failed sign-ins per name and per address of every studio process on `engine`'s database (the module
    docstring), with the same rule and messages as `ui.login.LoginThrottle`. Thread-safe.

    `write_lock`: what the process holds around its SQLite writes (`relabel.review.studio.Studio`). `clock`:
    wall-clock seconds since 1970 (tests move it); the other numbers in seconds or attempts."""

    def __init__(
        self,
        engine: Engine,
        *,
        free_per_user: int = FREE_PER_USER,
        free_per_address: int = FREE_PER_ADDRESS,
        lock_s: float = LOCK_S,
        max_lock_s: float = MAX_LOCK_S,
        forget_s: float = FORGET_S,
        write_lock: AbstractContextManager[object] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine, self.clock = engine, clock
        self.free = {"user": free_per_user, "address": free_per_address}
        self.lock_s, self.max_lock_s, self.forget_s = lock_s, max_lock_s, forget_s
        self.sqlite = engine.dialect.name == "sqlite"
        self._write_lock = write_lock if write_lock is not None else nullcontext()
        self._admitted = 0

    def begin(self, user: str, address: str) -> Lockout | None:
        """Admit one sign-in attempt, or say why not; an admitted attempt counts as a failure until `succeeded`."""
        keys = (("user", user), ("address", address))
        now = datetime.fromtimestamp(self.clock(), timezone.utc)
        with self._write_lock, self.engine.begin() as conn:
            rows = self._locked_rows(conn, keys, now)
            for kind, key in keys:
                _, locked_until = rows[(kind, key)]
                if locked_until is not None and locked_until > now:
                    who = f"{user!r}" if kind == "user" else "this address"
                    return Lockout(who, (locked_until - now).total_seconds())
            for kind, key in keys:
                failures = rows[(kind, key)][0] + 1
                over = failures - self.free[kind]
                locked = now + timedelta(seconds=min(self.lock_s * 2**over, self.max_lock_s)) if over >= 0 else None
                conn.execute(
                    update(SignInFailure)
                    .where(col(SignInFailure.kind) == kind, col(SignInFailure.key) == key)
                    .values(failures=failures, last_failed=now, locked_until=locked)
                )
            self._admitted += 1
            if self._admitted % PURGE_EVERY == 1:
                self._purge(conn, now)
        return None

    def succeeded(self, user: str, address: str) -> None:
        """The admitted attempt was right: the name starts afresh, and the address's count takes the attempt
        back (its lockout ends when the count falls below the free attempts)."""
        with self._write_lock, self.engine.begin() as conn:
            conn.execute(delete(SignInFailure).where(col(SignInFailure.kind) == "user", col(SignInFailure.key) == user))
            row = conn.execute(
                select(col(SignInFailure.failures))
                .where(col(SignInFailure.kind) == "address", col(SignInFailure.key) == address)
                .with_for_update()
            ).first()
            if row is None:
                return
            failures = max(0, int(row[0]) - 1)
            values: dict[str, object] = {"failures": failures}
            if failures < self.free["address"]:
                values["locked_until"] = None
            conn.execute(
                update(SignInFailure)
                .where(col(SignInFailure.kind) == "address", col(SignInFailure.key) == address)
                .values(**values)
            )

    def _locked_rows(
        self, conn: Connection, keys: Iterable[tuple[str, str]], now: datetime
    ) -> dict[tuple[str, str], tuple[int, datetime | None]]:
        """Each key's (failures that still count, locked until), its row created if missing and locked for the
        rest of the transaction."""
        if self.sqlite:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        insert = sqlite.insert if self.sqlite else postgresql.insert
        out: dict[tuple[str, str], tuple[int, datetime | None]] = {}
        for kind, key in keys:
            conn.execute(
                insert(SignInFailure)
                .values(kind=kind, key=key, failures=0, last_failed=now, locked_until=None)
                .on_conflict_do_nothing()
            )
            failures, last, locked = conn.execute(
                select(col(SignInFailure.failures), col(SignInFailure.last_failed), col(SignInFailure.locked_until))
                .where(col(SignInFailure.kind) == kind, col(SignInFailure.key) == key)
                .with_for_update()
            ).one()
            locked = None if locked is None else _utc(locked)
            forgotten = (now - _utc(last)).total_seconds() > self.forget_s and (locked is None or locked <= now)
            out[(kind, key)] = (0, None) if forgotten else (int(failures), locked)
        return out

    def _purge(self, conn: Connection, now: datetime) -> None:
        """Delete the rows whose failures no longer count and whose lockout is over."""
        conn.execute(
            delete(SignInFailure).where(
                col(SignInFailure.last_failed) < now - timedelta(seconds=self.forget_s),
                or_(col(SignInFailure.locked_until).is_(None), col(SignInFailure.locked_until) <= now),
            )
        )
