"""One decision as a file states it, and the CSV / JSONL tables of decisions.

A table has the columns image (a path, file name or stem as the studio shows it, or an image id), user, classes
(names, wnids or indices, `;`-separated; a JSON list in JSONL) and an optional note. The user column may be left
out when `relabel decisions import --user NAME` names the annotator.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from relabel.common.errors import InputError, brief
from relabel.common.tables import TableSchema, read_records
from relabel.sources.rows import is_integer

DECISION_TABLE = TableSchema("a decision table", required=(("image",), ("classes",)), optional=(("user",), ("note",)))


@dataclass
class DecisionRow:
    """One decision as a file states it, before its image, user and classes are looked up."""

    where: str  # "file:line" or "file: task N, annotation M", for error messages
    image: str | int  # a path, file name or stem; an int (or a string of digits) may be an image id
    user: str | None  # None: the file names nobody (`--user NAME` names them)
    classes: object  # a table cell ("a;b"), a list of tokens, or None / "" (an empty set)
    note: str = ""
    seconds: float | None = None  # time on the item, when the tool measured it


def read_table(path: Path, fmt: str) -> Iterator[DecisionRow]:
    """The rows of a CSV (`fmt` "csv") or JSON Lines ("jsonl") decision table."""
    for where, record in read_records(path, DECISION_TABLE, fmt):
        image = record.get("image")
        if not (is_integer(image) or (isinstance(image, str) and image.strip())):
            raise InputError(f"{where}: image is {brief(image, 40)}; expected an image path, file name or id")
        user, note = record.get("user"), record.get("note")
        for column, value in (("user", user), ("note", note)):
            if value is not None and not isinstance(value, str):
                raise InputError(f"{where}: {column} is {brief(value, 40)}; expected text")
        key: str | int = image if is_integer(image) else str(image).strip()
        yield DecisionRow(where, key, (user or "").strip() or None, record.get("classes"), (note or "").strip())


def read_csv(path: Path) -> Iterator[DecisionRow]:
    return read_table(path, "csv")


def read_jsonl(path: Path) -> Iterator[DecisionRow]:
    return read_table(path, "jsonl")
