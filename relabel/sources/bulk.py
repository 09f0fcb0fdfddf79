"""Writing many rows at once: the one loop behind label sources, prediction runs, votes and snapshots.

An importer validates a whole file first (`relabel.sources.rows`), then comes here: `replace_existing` drops an
earlier import of the same name when asked to (else refuses), `matched_rows` pairs each row with its image and
refuses an image named twice, and `insert_chunks` writes the rows as Core executemany calls in chunks, with an
optional progress bar. `store_run` writes a model run and its predictions: the prediction importer stores a file
through it, and tests use it as the factory of model runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar

from sqlalchemy import insert
from sqlmodel import Session

from db.enums import PredictionStatus
from db.models import ModelRun, Prediction
from relabel.common.errors import ConflictError, InputError
from relabel.common.progress import Progress
from relabel.sources.rows import LabelRow

CHUNK = 5000  # rows per executemany: few round trips, modest memory
PREDICTION_DEFAULTS: dict[str, Any] = {"status": PredictionStatus.ok, "reason": "", "raw_output": ""}


def replace_existing(session: Session, old: Any, children: Any, conflict: str, replace: bool) -> None:
    """Delete `old` (an imported source or run) and its rows (the `children` DELETE) before it is imported again;
    without `replace`, refuse with the one-line `conflict` and the flag that allows it."""
    if not replace:
        raise ConflictError(f"{conflict}; pass --replace to re-import")
    session.execute(children)
    session.delete(old)
    session.flush()


Row = TypeVar("Row", bound=LabelRow)  # a label row, or a prediction row with its status


def matched_rows(rows: Sequence[Row], ids: Sequence[int], file_name: str) -> Iterator[tuple[Row, int]]:
    """Each row with its image id, in file order; rows of unknown images (id < 0, skipped on request) are left
    out, and a second row for one image is an InputError naming both the row and the file."""
    if len(rows) == len(ids) and len(set(ids)) == len(ids) and (not ids or min(ids) >= 0):
        yield from zip(rows, ids)  # the usual file: every row an image of its own
        return
    seen: set[int] = set()
    for row, image_id in zip(rows, ids):
        if image_id < 0:
            continue
        if image_id in seen:
            raise InputError(f"{row.where}: image {row.key!r} appears twice in {file_name}; nothing written")
        seen.add(image_id)
        yield row, image_id


def insert_chunks(
    session: Session,
    table: type,
    values: Iterable[dict[str, Any]],
    *,
    chunk: int = CHUNK,
    progress: Progress | None = None,
) -> int:
    """Insert `values` (dicts of column values, all with the same keys) into `table` in chunks of `chunk` rows;
    returns the number of rows written. A Core executemany on the table: the ORM's bulk path takes a third longer
    (185,000 snapshot posteriors). `progress`, when given, advances by each chunk's rows."""
    statement, conn = insert(table.__table__), session.connection()  # type: ignore[attr-defined]
    rows = iter(values)
    written = 0
    while part := list(islice(rows, chunk)):
        conn.execute(statement, part)
        written += len(part)
        if progress is not None:
            progress.update(len(part))
    return written


def store_run(
    session: Session,
    *,
    dataset_id: int,
    name: str,
    predictions: Iterable[dict[str, Any]],
    model: str | None = None,
    protocol: str = "imported",
    params: dict[str, Any] | None = None,
    origin: str = "",
    tool_version: str = "",
) -> ModelRun:
    """Add model run `name` of dataset `dataset_id` and its predictions; returns the run (flushed: it has its id).

    Each prediction is a dict of `Prediction` columns: `image_id` and `classes` at least; `status` (ok),
    `reason` and `raw_output` (empty) default, `scores` and `details` are stored as given. `model` defaults to
    the run's name. The caller's session commits (or, on an error, writes nothing).
    """
    run = ModelRun(
        dataset_id=dataset_id,
        name=name,
        model=model or name,
        protocol=protocol,
        params=params if params is not None else {},
        origin=origin,
        tool_version=tool_version,
    )
    session.add(run)
    session.flush()
    insert_chunks(session, Prediction, ({**PREDICTION_DEFAULTS, **p, "run_id": run.id} for p in predictions))
    return run
