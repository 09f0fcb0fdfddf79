"""Import a file of workers' answers as a vote source of a dataset: all or nothing, in one transaction.

The file is read by its format's reader (`relabel.vote_formats.VOTE_FORMATS`); then every image must be one of the
dataset's, no worker may answer the same (image, class) twice, and a stated original label (MTurk's given class)
must be the dataset's ImGT label. Votes are written in chunks of plain multi-row inserts, which SQLite and
PostgreSQL both take fast (ReaL's 924,810 answers in seconds), with a progress bar of rate and ETA.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from db.engine import session_scope
from db.enums import Answer
from db.models import Dataset, Vote, VoteSource, stored_id
from relabel.aggregation import ANSWERS
from relabel.bulk_import import insert_chunks, replace_existing
from relabel.errors import InputError, examples, unknown_name
from relabel.import_rows import LabelRow, no_match_message
from relabel.progress import progress_bar
from relabel.sources import check_stated_originals
from relabel.storable import one_line_name, storable_text
from relabel.vote_formats import VOTE_FORMATS, ParsedVotes
from relabel.workspace import ImageIndex, dataset_vocabulary, get_dataset, image_index

CHUNK = 20_000  # votes per insert: large enough to be fast, small enough for a smooth progress bar
_ANSWER_NAMES = [Answer(a).name for a in ANSWERS]


@dataclass
class VoteImportReport:
    source: str
    votes: int
    workers: int
    images: int
    items: int  # distinct (image, class) pairs
    answers: dict[str, int] = field(default_factory=dict)  # votes per answer word
    seconds: float = 0.0  # reading, checking and writing

    @property
    def rate(self) -> float:
        """Votes written per second."""
        return self.votes / self.seconds if self.seconds > 0 else float("inf")


def import_votes(
    engine: Engine,
    path: Path,
    *,
    fmt: str,
    name: str | None = None,
    dataset: str | None = None,
    replace: bool = False,
    show_progress: bool = False,
) -> VoteImportReport:
    """Import the vote file `path` in format `fmt` as the vote source `name` (default: the format's name).

    A source of that name is refused unless `replace`. Nothing is written when any check fails.
    """
    if fmt not in VOTE_FORMATS:
        raise unknown_name("vote format", fmt, list(VOTE_FORMATS))
    if not path.is_file():
        raise InputError(f"vote file {str(path)!r} does not exist")
    name = one_line_name(name or fmt, "vote source name", max_length=64)
    started = time.perf_counter()
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        parsed = VOTE_FORMATS[fmt](path, dataset_vocabulary(s, ds))
        if not len(parsed):
            raise InputError(f"{path}: holds no votes; nothing written")
        for worker in parsed.worker_names:
            storable_text(worker, f"{path}: worker name {worker[:40]!r}", max_length=200)
        key_ids = match_images(parsed, image_index(s, ds), path)
        image_ids = key_ids[parsed.key_of]
        refuse_duplicates(parsed, image_ids, path)
        if parsed.originals:
            check_stated_originals(s, ds, parsed.originals, key_ids.tolist(), str(path))
        source = _new_source(s, ds, name, fmt, path, parsed, replace)
        _insert_votes(s, stored_id(source), parsed, image_ids, show_progress)
        source.n_votes, source.n_workers = len(parsed), len(np.unique(parsed.worker_of))
        source.n_images = len(np.unique(image_ids))
        items = len(np.unique(image_ids * (int(parsed.classes.max()) + 1) + parsed.classes))
        counts = np.bincount(parsed.answers, minlength=3)
        report = VoteImportReport(
            name, source.n_votes, source.n_workers, source.n_images, items, dict(zip(ANSWERS, counts.tolist()))
        )
    report.seconds = time.perf_counter() - started
    return report


def match_images(parsed: ParsedVotes, index: ImageIndex, path: Path) -> np.ndarray:
    """(len(parsed.keys),) the image id of each key; an unknown image is one InputError naming the first few."""
    found = [index.lookup(k) for k in parsed.keys]
    unknown = [k for k, i in zip(parsed.keys, found) if i is None]
    if unknown and len(unknown) == len(found):
        raise InputError(no_match_message([LabelRow(k, []) for k in parsed.keys], index, str(path)))
    if unknown:
        first = int(np.flatnonzero(parsed.key_of == parsed.keys.index(unknown[0]))[0])
        raise InputError(
            f"{parsed.where(first)}: image {unknown[0]!r} is not in the dataset ({len(unknown)} of {len(found)} "
            f"images are not: {examples(unknown)}); nothing written (ingest them first)"
        )
    return np.array(found, dtype=np.int64)


def refuse_duplicates(parsed: ParsedVotes, image_ids: np.ndarray, path: Path) -> None:
    """One InputError naming both records when a worker answers the same (image, class) twice."""
    order = np.lexsort((parsed.worker_of, parsed.classes, image_ids))
    same = np.ones(max(len(order) - 1, 0), dtype=bool)
    for column in (image_ids, parsed.classes, parsed.worker_of):
        same &= column[order[1:]] == column[order[:-1]]
    repeated = np.flatnonzero(same)
    if len(repeated):
        a, b = sorted((int(order[repeated[0]]), int(order[repeated[0] + 1])))
        worker, key = parsed.worker_names[parsed.worker_of[b]], parsed.keys[parsed.key_of[b]]
        raise InputError(
            f"{parsed.where(b)}: worker {worker!r} answers image {key!r} class {parsed.classes[b]} again (first at "
            f"{parsed.where(a)}; {len(repeated)} repeated answers); a worker answers a pair once; nothing written"
        )


def _new_source(
    s: Session, ds: Dataset, name: str, fmt: str, path: Path, parsed: ParsedVotes, replace: bool
) -> VoteSource:
    old = s.exec(select(VoteSource).where(col(VoteSource.dataset_id) == ds.id, col(VoteSource.name) == name)).first()
    if old is not None:
        conflict = f"dataset {ds.name!r} already has a vote source {name!r}"
        replace_existing(s, old, delete(Vote).where(col(Vote.source_id) == old.id), conflict, replace)
    source = VoteSource(
        dataset_id=stored_id(ds),
        name=name,
        format=fmt,
        origin=str(path.resolve()),
        sha256=_sha256(path),
        workers_identified=parsed.workers_identified,
    )
    s.add(source)
    s.flush()
    return source


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _insert_votes(s: Session, source_id: int, parsed: ParsedVotes, image_ids: np.ndarray, show_progress: bool) -> None:
    """Write the votes in chunks, with a progress bar of rate and ETA."""
    bar = progress_bar(len(parsed), "votes", enabled=show_progress, unit="vote")
    workers = parsed.worker_names
    rows = (
        {"source_id": source_id, "image_id": i, "class_index": c, "worker": workers[w], "answer": _ANSWER_NAMES[a]}
        for i, c, w, a in zip(
            image_ids.tolist(), parsed.classes.tolist(), parsed.worker_of.tolist(), parsed.answers.tolist()
        )
    )
    insert_chunks(s, Vote, rows, chunk=CHUNK, progress=bar)
    bar.close()
