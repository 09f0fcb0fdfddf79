"""Engine factory: SQLite by default (WAL, busy timeout, foreign keys), PostgreSQL or anything else by URL."""

from __future__ import annotations

import select
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DisconnectionError
from sqlmodel import Session, create_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000


def default_db_url(workspace: str | Path) -> str:
    """The SQLite file inside a workspace directory."""
    return f"sqlite:///{Path(workspace).resolve() / 'relabel.db'}"


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Every connection, not only the first: these settings are per connection in SQLite.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def create_db_engine(url: str) -> Engine:
    """Create an engine for `url` (an SQLAlchemy URL); for SQLite, create the parent directory."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # A pool as large as the studio's handler threads: a handler never waits for a free connection.
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=16, max_overflow=16
        )
        event.listen(engine, "connect", _set_sqlite_pragmas)
        return engine
    if parsed.get_driver_name() != "psycopg":
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url)
    event.listen(engine, "checkout", _drop_if_closed_by_server)
    return engine


def _drop_if_closed_by_server(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Refuse a pooled psycopg connection the server has closed (a restart, an idle timeout, a terminated backend):
    the pool then opens a fresh one. An idle connection's socket has nothing to read unless the server said
    goodbye or hung up, so one local `select` tells, where a ping would cost a round trip on every checkout."""
    pgconn = getattr(dbapi_connection, "pgconn", None)
    try:
        fd = pgconn.socket if pgconn is not None else -1
        readable = fd >= 0 and _readable(fd)
    except Exception as exc:  # a connection closed on this side has no socket to look at
        raise DisconnectionError("the connection is closed") from exc
    if fd < 0 or readable or dbapi_connection.closed:
        raise DisconnectionError("the server closed the connection")


def _readable(fd: int) -> bool:
    """Whether socket `fd` has something to read (or was hung up) now, without waiting; `poll` takes any fd
    number, where `select` stops at 1024."""
    if not hasattr(select, "poll"):
        return bool(select.select([fd], [], [], 0)[0])
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on any exception, so a failed call writes nothing."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
