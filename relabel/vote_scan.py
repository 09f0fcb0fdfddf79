"""A vote source read off SQLite's votes table in bulk, as numpy columns.

`relabel.votes.collect_votes` reads a source that holds most of the table by walking the table itself. Fetched
row by row, ReaL's 924,810 votes are 3.7 million Python objects, made by the driver and then taken apart again
into columns. Here SQLite joins each column of a stretch of the table into one text (`group_concat`: the ids
and answer codes with commas, the worker names with a control character), numpy parses the numbers and Python
splits the names: a third of the time. The caller puts the votes in key order, as for the rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import ColumnClause, ColumnElement, Integer, func, literal_column, select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.models import Vote

SEPARATOR = "\x1f"  # between worker names: the unit separator, which no name imported from a file is expected to hold
SPAN = 1 << 21  # rowids per query: one text of a column stays far below SQLite's limit of 10^9 bytes
ROWID: ColumnClause[int] = literal_column("votes.rowid", Integer)

IntColumn = np.ndarray | Sequence[int]
# parts of (image ids, class indices, worker numbers, answer codes), and worker name -> its number (in order met)
Columns = tuple[list[tuple[IntColumn, IntColumn, np.ndarray, IntColumn]], dict[str, int]]


def scan_votes(conn: Connection, source_id: int, code: ColumnElement[Any]) -> Columns | None:
    """The votes of source `source_id` in table order, `code` the answer code of a vote (SQL); None when a column
    does not come back whole (a worker name holding `SEPARATOR`, a value that is not an integer): the caller
    then reads the rows one by one. SQLite only: it names the table's rowid."""
    lo, hi = conn.execute(select(func.min(ROWID), func.max(ROWID)).select_from(Vote)).one()
    parts: list[tuple[IntColumn, IntColumn, np.ndarray, IntColumn]] = []
    seen: dict[str, int] = {}
    for start in range(lo or 0, (hi or -1) + 1, SPAN):
        query = select(
            func.group_concat(col(Vote.image_id)),
            func.group_concat(col(Vote.class_index)),
            func.group_concat(code),
            func.group_concat(col(Vote.worker), SEPARATOR),
        ).where(col(Vote.source_id) + 0 == source_id, ROWID.between(start, start + SPAN - 1))
        *numbers, names = conn.execute(query).one()
        if names is None:
            continue  # no vote of the source in this stretch
        workers = names.split(SEPARATOR)
        image, cls, answer = (_integers(text, len(workers)) for text in numbers)
        if image is None or cls is None or answer is None:
            return None
        for name in dict.fromkeys(workers).keys() - seen.keys():
            seen[name] = len(seen)
        parts.append((image, cls, np.fromiter(map(seen.__getitem__, workers), np.int64, len(workers)), answer))
    return parts, seen


def _integers(text: str | None, n: int) -> np.ndarray | None:
    """The `n` comma-separated integers of `text`, or None when it holds anything else or another count."""
    if text is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # numpy warns, and stops, at text it cannot parse
        try:
            values = np.fromstring(text, dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning):
            return None
    return values if len(values) == n else None
