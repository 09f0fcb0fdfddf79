"""Storing the rows of an imported label source or model run: one INSERT compiled once, values in the driver's terms.

SQLAlchemy's Core executemany passes every value through its column's bind processor and builds a parameter dict
per row: about 4 of the 6 CPU seconds a 50,000-row prediction file took to import. Here each row becomes a tuple of
plain values (`db.bulk.insert_plain`): a JSON column as the text its serializer writes (`json.dumps`, so the stored
text is the same), a status as the enum name the column stores, and the import's one timestamp as the dialect
stores it. The caller's session holds the transaction; all rows or nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from db.bulk import insert_plain, table_of
from db.models import Label, Prediction, utcnow

if TYPE_CHECKING:
    from sqlalchemy import Column
    from sqlalchemy.engine import Connection

    from relabel.sources.rows import LabelRow, PredictionRow

LABEL_COLUMNS = ("source_id", "image_id", "classes", "certainty", "category", "extra")
PREDICTION_COLUMNS = ("run_id", "image_id", "status", "reason", "raw_output", "classes", "scores", "created_at")


def store_labels(session: Session, source_id: int, rows: Iterable[tuple[LabelRow, int]]) -> int:
    """Insert a label source's rows, each with its image id; returns how many."""
    values = (
        (source_id, image_id, list_text(r.classes), list_text(r.certainty), r.category, json.dumps(r.extra))
        for r, image_id in rows
    )
    return insert_plain(session.connection(), table_of(Label), LABEL_COLUMNS, values)


def store_predictions(session: Session, run_id: int, rows: Iterable[tuple[PredictionRow, int]]) -> int:
    """Insert a model run's predictions, each with its image id, all stamped with the same creation time; returns
    how many. `details` stays NULL, as an imported prediction has none."""
    conn = session.connection()
    table = table_of(Prediction)
    created = _driver_value(conn, table.c.created_at, utcnow())
    values = (
        (run_id, image_id, r.status.name, r.reason, r.raw_output, list_text(r.classes), list_text(r.certainty), created)
        for r, image_id in rows
    )
    return insert_plain(conn, table, PREDICTION_COLUMNS, values)


def list_text(values: list[int] | list[float] | None) -> str:
    """`json.dumps(values)`, five times faster for the usual list of ints or finite floats: for those, Python's
    own list text is the same ("[3, 0.25]"). The text tells: anything else in the list (a bool, a NaN or an
    infinity, a numpy scalar, a string, a tuple, the list itself) puts a letter, a quote, a parenthesis or "..."
    into it, and then json.dumps writes it (or refuses it, as it refuses a numpy int)."""
    if type(values) is list:
        try:
            text = str(values)
        except ValueError:  # an int of more digits than Python writes as text: json.dumps says so
            return json.dumps(values)
        if not text.strip(_NUMBER_LIST_CHARACTERS) and "..." not in text:
            return text
    return json.dumps(values)


_NUMBER_LIST_CHARACTERS = "0123456789.e+-[], "  # the whole text of a list of plain ints and finite floats


def _driver_value(conn: Connection, column: Column[Any], value: Any) -> Any:
    """`value` as the driver takes it for `column` on this dialect (a datetime is text in SQLite)."""
    process = column.type.dialect_impl(conn.dialect).bind_processor(conn.dialect)
    return process(value) if process is not None else value
