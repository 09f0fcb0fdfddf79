"""A PostgreSQL engine survives the server closing its pooled connections (a restart, a terminated backend)
without pinging the server on every checkout: a connection the server closed is noticed locally and replaced."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, event, text

from db import create_db_engine
from tests.conftest import PG_URL


@pytest.mark.postgres
def test_a_connection_closed_by_the_server_is_replaced_without_a_ping(postgres_reason: str | None) -> None:
    if postgres_reason:
        pytest.skip(f"PostgreSQL unreachable: {postgres_reason}")
    engine = create_db_engine(PG_URL)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    pinged = engine.dialect.do_ping

    def ping(dbapi_connection: object) -> bool:
        statements.append("ping")
        return bool(pinged(dbapi_connection))

    engine.dialect.do_ping = ping  # type: ignore[method-assign]
    admin = create_engine(PG_URL)
    try:
        with engine.connect() as conn:
            first = conn.execute(text("select pg_backend_pid()")).scalar()
        with admin.connect() as conn:
            conn.execute(text(f"select pg_terminate_backend({first})"))
            conn.commit()
        for _ in range(50):  # the server closes the socket a moment after it was told to
            with admin.connect() as conn:
                gone = not conn.execute(text(f"select count(*) from pg_stat_activity where pid = {first}")).scalar()
            if gone:
                break
            time.sleep(0.05)
        statements.clear()
        with engine.connect() as conn:
            second = conn.execute(text("select pg_backend_pid()")).scalar()
        assert second != first
        assert statements == ["select pg_backend_pid()"]  # no ping before it
    finally:
        engine.dispose()
        admin.dispose()
