"""Engine factory: SQLite by default (WAL, busy timeout, foreign keys), PostgreSQL or anything else by URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
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
    return create_engine(url, pool_pre_ping=True)


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
