"""Reading user tables: CSV (with a header) or JSON Lines, one record per row, each tagged with file:line.

A `TableSchema` names the columns a table may have. A CSV header or a JSON object with an unknown column, without
a required one, or with two names for one column is refused, naming the columns found and those expected: a typo
such as `lables` must not read as "no labels". A CSV row with more or fewer fields than its header (a file cut
short, an unquoted comma) is refused too. Decoding and CSV quoting are `relabel.common.textfiles`' job.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relabel.common.errors import InputError, brief, examples
from relabel.common.textfiles import csv_rows, json_lines

JSONL_SUFFIXES = {".jsonl", ".ndjson"}


@dataclass(frozen=True)
class TableSchema:
    """The columns of one kind of table; each column is a group of alternative names, e.g. ("labels", "label")."""

    kind: str  # "a label table", for messages
    required: tuple[tuple[str, ...], ...]
    optional: tuple[tuple[str, ...], ...] = ()
    open: bool = False  # other columns are allowed and passed on (a manifest's notes)

    def expected(self) -> str:
        """The accepted columns, e.g. "image, labels|label [optional: category]"."""
        listed = ", ".join("|".join(g) for g in self.required)
        if self.optional:
            listed += f" [optional: {', '.join('|'.join(g) for g in self.optional)}]"
        return listed + (" and any other column" if self.open else "")

    def check(self, names: Sequence[str], where: str, what: str) -> None:
        """Raise one InputError unless the column `names` of a header or record (`what`) fit this schema."""
        present = set(names)
        groups = self.required + self.optional
        known = {n for g in groups for n in g}
        problems = []
        repeated = sorted(n for n, k in Counter(names).items() if k > 1)
        if repeated:
            problems.append(f"repeats {examples(repeated)}")
        unknown = [] if self.open else [n for n in names if n not in known]
        if unknown:
            problems.append(f"has unknown column(s) {examples(unknown)}")
        missing = [" or ".join(repr(n) for n in g) for g in self.required if not present & set(g)]
        if missing:
            problems.append(f"lacks {' and '.join(missing)}")
        twice = [" and ".join(repr(n) for n in g if n in present) for g in groups if len(present & set(g)) > 1]
        if twice:
            problems.append(f"gives both {'; '.join(twice)} (one column, two names)")
        if problems:
            found = ", ".join(brief(n, 40) for n in names[:12]) + (", …" if len(names) > 12 else "") or "(none)"
            raise InputError(
                f"{where}: the {what} {'; '.join(problems)}; found: {found}; {self.kind} has: {self.expected()}"
            )


def read_records(path: Path, schema: TableSchema, fmt: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ("name:line", record) for each row of a CSV or JSON Lines table whose columns fit `schema`.

    `fmt` is "csv" or "jsonl"; None decides by the file extension. CSV values are strings; JSONL values are
    whatever JSON gave (a record must be an object). Raises InputError naming the file and line.
    """
    if (fmt or ("jsonl" if path.suffix.lower() in JSONL_SUFFIXES else "csv")) == "jsonl":
        yield from _jsonl_records(path, schema)
    else:
        yield from _csv_records(path, schema)


def _jsonl_records(path: Path, schema: TableSchema) -> Iterator[tuple[str, dict[str, Any]]]:
    fitting: set[tuple[str, ...]] = set()  # column lists already checked: the records of a file mostly share one
    for lineno, record in json_lines(path):
        if not isinstance(record, dict):
            raise InputError(
                f"{path}:{lineno}: expected a JSON object, got {brief(record, 40)}; {schema.kind} has: "
                f"{schema.expected()}"
            )
        names = tuple(record)
        if names not in fitting:
            schema.check(list(names), f"{path}:{lineno}", "record")
            fitting.add(names)
        yield f"{path.name}:{lineno}", record


def _csv_records(path: Path, schema: TableSchema) -> Iterator[tuple[str, dict[str, Any]]]:
    rows = csv_rows(path)
    first = next(rows, None)
    if first is None:
        raise InputError(f"{path}: the file is empty; {schema.kind} starts with a header: {schema.expected()}")
    header_line, header = first
    names = [h.strip() for h in header]
    schema.check(names, f"{path}:{header_line}", "header")
    for lineno, fields in rows:
        if len(fields) != len(names):
            raise InputError(
                f"{path}:{lineno}: {len(fields)} field(s) where the header has {len(names)} ({', '.join(names)}): "
                f"the row is cut short or has an unquoted comma; got {brief(','.join(fields), 60)}"
            )
        yield f"{path.name}:{lineno}", dict(zip(names, fields))


LABEL_SEPARATORS = re.compile(r"[|;]")


def label_tokens(value: object, where: str) -> list[str]:
    """Class tokens (index, wnid or name) from a table cell: '|' or ';' between several, or a JSON list.

    None and "" give []. A JSON true/false, a fraction or an object is refused: none of them names a class.
    """
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [v.strip() for v in LABEL_SEPARATORS.split(value) if v.strip()]
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise InputError(
                f"{where}: label {brief(item, 40)} is not a class; give an index (integer), a wnid or a name"
            )
    return [str(item).strip() for item in items if str(item).strip()]


def check_label_count(count: int, n_classes: int, where: str) -> None:
    """Refuse a label set of more entries than the vocabulary has classes: a set names each class at most once,
    so such a cell (43,000 copies of one class) is a broken file, not labels to shrink."""
    if count > n_classes:
        raise InputError(
            f"{where}: a label set of {count:,} entries, more than the {n_classes:,} classes of the vocabulary; "
            "a set lists each class at most once"
        )
