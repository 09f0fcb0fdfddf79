"""Reading user tables: CSV (with a header) or JSON Lines, one record per row, each tagged with file:line."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from relabel.errors import InputError

JSONL_SUFFIXES = {".jsonl", ".ndjson"}


def read_records(
    path: Path, *, required: str, hint: str, fmt: str | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ("name:line", record) for each row; `required` is the column every record must name.

    `hint` completes the error message for a file without that column ("and 'label' or 'labels'").
    `fmt` is "csv" or "jsonl"; None decides by the file extension.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc
    if (fmt or ("jsonl" if path.suffix.lower() in JSONL_SUFFIXES else "csv")) == "jsonl":
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise InputError(f"{path}:{lineno}: expected a JSON object with {required!r} {hint}")
            yield f"{path.name}:{lineno}", record
        return
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames or required not in reader.fieldnames:
        raise InputError(f"{path}: expected a {required!r} column {hint}; got {reader.fieldnames}")
    for lineno, row in enumerate(reader, start=2):
        yield f"{path.name}:{lineno}", row
