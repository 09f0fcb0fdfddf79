"""`db.bulk.insert_plain` stores what SQLAlchemy's own executemany stores, on SQLite and PostgreSQL: a JSON column's
text, an enum column's name, floats and ints, columns given in any order, a datetime through `driver_value`."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from sqlalchemy import JSON, Column, DateTime, Enum, Float, Integer, MetaData, String, Table, cast, insert, select

from db.bulk import driver_value, insert_plain
from db.enums import Category


def probe_table() -> Table:
    return Table(
        "bulk_probe",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("classes", JSON, nullable=False),
        Column("category", Enum(Category), nullable=False),
        Column("p", Float, nullable=False),
        Column("origin", String, nullable=False),
    )


ROWS = [
    ([], Category.U, 0.0, "base"),
    ([207], Category.A, 0.123456789012345, "consensus"),
    ([3, 1, 999], Category.M, 1.0, "uncertain"),
    ([5], Category.Z, 1e-300, "votes (best estimate)"),
]


def test_insert_plain_stores_what_sqlalchemy_stores(engine) -> None:
    table = probe_table()
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(
            insert(table),
            [{"id": k, "classes": c, "category": g, "p": p, "origin": o} for k, (c, g, p, o) in enumerate(ROWS)],
        )
        # columns in another order than the table's, values as the driver takes them
        plain = [(o, p, k + 100, g.name, json.dumps(c)) for k, (c, g, p, o) in enumerate(ROWS)]
        assert insert_plain(conn, table, ("origin", "p", "id", "category", "classes"), plain, chunk=3) == len(ROWS)
    with engine.connect() as conn:
        query = select(table.c.id, cast(table.c.classes, String), table.c.category, table.c.p, table.c.origin)
        stored = {k: rest for k, *rest in conn.execute(query.order_by(table.c.id))}
    assert len(stored) == 2 * len(ROWS)
    for k in range(len(ROWS)):
        assert stored[k + 100] == stored[k]
        assert isinstance(stored[k][1], Category) and json.loads(stored[k][0]) == ROWS[k][0]


def test_nothing_to_insert_writes_nothing(engine) -> None:
    table = probe_table()
    table.create(engine)
    with engine.begin() as conn:
        assert insert_plain(conn, table, ("id", "classes", "category", "p", "origin"), []) == 0
        assert conn.execute(select(table.c.id)).all() == []


def test_a_converted_column_stores_what_sqlalchemy_stores(engine) -> None:
    """A datetime goes through `driver_value` once (SQLite stores it as text without the zone, as SQLAlchemy does)."""
    table = Table(
        "bulk_times", MetaData(), Column("id", Integer, primary_key=True), Column("at", DateTime, nullable=False)
    )
    table.create(engine)
    at = datetime(2026, 12, 3, 8, 25, 58, 381122, tzinfo=timezone.utc)
    with engine.begin() as conn:
        conn.execute(insert(table), [{"id": 1, "at": at}])
        insert_plain(conn, table, ("id", "at"), [(2, driver_value(conn, table.c.at, at))])
    with engine.connect() as conn:
        as_text = dict(conn.execute(select(table.c.id, cast(table.c.at, String))).all())
        read = dict(conn.execute(select(table.c.id, table.c.at)).all())
    assert as_text[1] == as_text[2] and read[1] == read[2] and read[1].replace(tzinfo=None) == at.replace(tzinfo=None)
