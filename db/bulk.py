"""Many rows written through the database driver's own executemany: the large immutable tables a snapshot fills.

SQLAlchemy's Core executemany builds a parameter dict for every row and passes each value through its column's bind
processor, about 7 µs a row: 1.7 s of the 2.7 s that a 50,000-image snapshot with 184,962 posteriors spent storing
its rows. `insert_plain` takes rows already in the driver's terms (int, float, str; a JSON column as its text, an
enum column as the name it stores) and compiles the INSERT once for the connection's dialect, so one call serves
SQLite (qmark: tuples in the statement's column order) and PostgreSQL (psycopg's pyformat: dicts by column name),
inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from sqlalchemy import Column, Table, insert
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ClauseElement

CHUNK = 20_000  # rows per executemany: few round trips, modest memory


def insert_plain(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    chunk: int = CHUNK,
    progress: Callable[[int], object] | None = None,
) -> int:
    """Insert `rows` (sequences of plain values in the order of `columns`) into `table`; returns how many.
    `progress`, when given, is called with the number of rows of each chunk once it is written."""
    compiled = insert(table).compile(dialect=conn.dialect, column_keys=list(columns))
    shape = _row_shape(list(columns), compiled.positiontup if compiled.positional else None)
    sql, source, written = str(compiled), iter(rows), 0
    while part := list(map(shape, islice(source, chunk))):
        conn.exec_driver_sql(sql, part)
        written += len(part)
        if progress is not None:
            progress(len(part))
    return written


def driver_value(conn: Connection, column: Column[Any], value: Any) -> Any:
    """`value` as the driver takes it for `column` on this connection's dialect: for the odd column whose type
    converts (a datetime, which SQLite stores as text), processed once rather than for every row."""
    process = column.type.dialect_impl(conn.dialect).bind_processor(conn.dialect)
    return process(value) if process is not None else value


def plain_rows(conn: Connection, query: ClauseElement, size: int = 100_000) -> Iterator[Sequence[Any]]:
    """The rows of `query` as the database driver returns them, `size` at a time: plain tuples, without the result
    rows SQLAlchemy wraps them in (a fifth of the time of reading ReaL's 924,810 votes). `query` must hold only
    literal values (ids, enum words) and columns whose driver values are what the caller wants (JSON as text, no
    enum type to apply), since it is rendered with its values inline and run on the driver's cursor."""
    sql = str(query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql)
        while rows := cursor.fetchmany(size):
            yield rows
    finally:
        cursor.close()


def all_plain_rows(conn: Connection, query: ClauseElement) -> list[tuple[Any, ...]]:
    """Every row of `query` as a plain tuple (`plain_rows`, the same conditions on `query`)."""
    return [row for rows in plain_rows(conn, query) for row in rows]


def table_of(model: type) -> Table:
    """The `Table` of a SQLModel table class."""
    return model.__table__  # type: ignore[attr-defined]


def _row_shape(columns: list[str], positions: Sequence[str] | None) -> Callable[[Sequence[Any]], Any]:
    """How one row becomes the driver's parameters: a tuple in the statement's order, or a dict by column name."""
    if positions is None:
        return lambda row: dict(zip(columns, row))
    order = [columns.index(name) for name in positions]
    if order == list(range(len(columns))):
        return tuple
    return lambda row: tuple(row[i] for i in order)
