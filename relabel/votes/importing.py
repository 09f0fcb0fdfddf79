"""Import a file of workers' answers as a vote source of a dataset: all or nothing, in one transaction.

The file is read by its format's reader (`relabel.votes.formats.VOTE_FORMATS`); then every image must be one of the
dataset's, no worker may answer the same (image, class) twice, and a stated original label (MTurk's given class)
must be the dataset's ImGT label. Votes are stored one row per (image, class) pair, the answers packed
(`db.models.VotePair`, `db.vote_packing`; the workers numbered in name order, `db.models.VoteWorker`), written through
the driver's executemany (`db.bulk.insert_plain`) in the order of the table's primary key, which SQLite then appends
to its index, with a progress bar of rate and ETA. Writing ReaL's 924,810 answers one row each was 2.9 CPU s of
executemany alone; as 184,962 packed pairs it is a fraction of that.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from itertools import islice, repeat
from pathlib import Path

import numpy as np
from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from db.bulk import insert_plain, table_of
from db.engine import session_scope
from db.models import Dataset, VotePair, VoteSource, VoteWorker, stored_id
from db.vote_packing import WORKER_DTYPE
from relabel.common.collector import cyclic_gc_paused
from relabel.common.errors import InputError, examples, unknown_name
from relabel.common.progress import progress_bar
from relabel.common.storable import one_line_name, storable_text
from relabel.common.workspace import ImageIndex, dataset_vocabulary, get_dataset, image_index
from relabel.sources.bulk import replace_existing
from relabel.sources.labels import check_stated_originals
from relabel.sources.rows import LabelRow, no_match_message
from relabel.votes.aggregation import ANSWERS
from relabel.votes.formats import VOTE_FORMATS, ParsedVotes

CHUNK = 20_000  # pairs per insert: large enough to be fast, small enough for a smooth progress bar
PAIR_COLUMNS = ("source_id", "image_id", "class_index", "workers", "answers")
WORKER_COLUMNS = ("source_id", "number", "name")


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
    # the 185,000 rows and keys built here hold no cycles: full collections over them found nothing (0.1 CPU s)
    with cyclic_gc_paused(), session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        parsed = VOTE_FORMATS[fmt].read(path, dataset_vocabulary(s, ds))
        if not len(parsed):
            raise InputError(f"{path}: holds no votes; nothing written")
        for worker in parsed.worker_names:
            storable_text(worker, f"{path}: worker name {worker[:40]!r}", max_length=200)
        key_ids = match_images(parsed, image_index(s, ds), path)
        image_ids = key_ids[parsed.key_of]
        order = storage_order(parsed, image_ids, path)
        if parsed.originals:
            check_stated_originals(s, ds, parsed.originals, key_ids.tolist(), str(path))
        source = _new_source(s, ds, name, fmt, path, parsed, replace)
        items = _insert_votes(s, stored_id(source), parsed, image_ids, order, show_progress)
        source.n_votes, source.n_workers = len(parsed), len(_answering(parsed.worker_of, len(parsed.worker_names)))
        source.n_images = len(np.unique(key_ids[_answering(parsed.key_of, len(parsed.keys))]))
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


def storage_order(parsed: ParsedVotes, image_ids: np.ndarray, path: Path) -> np.ndarray:
    """(N,) the answers in the order they are stored in: image, class, worker name (as SQLite and
    Python compare text). One sort of one int64 key serves the write and the check that no worker answers a pair
    twice; a repeat is refused by `refuse_duplicates`, which names the records."""
    names = parsed.worker_names
    rank = np.empty(len(names), dtype=np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    worker = rank[parsed.worker_of]
    spans = (int(image_ids.max()) + 1, int(parsed.classes.max()) + 1, len(names))
    if min(int(image_ids.min()), int(parsed.classes.min())) >= 0 and math.prod(spans) < 2**62:
        key = (image_ids * spans[1] + parsed.classes) * spans[2] + worker
        order = np.argsort(key, kind="stable")
        repeated = bool((key[order[1:]] == key[order[:-1]]).any())
    else:  # ids too large for one key
        order = np.lexsort((worker, parsed.classes, image_ids))
        repeated = bool(_repeats(order, (image_ids, parsed.classes, worker)).any())
    if repeated:
        refuse_duplicates(parsed, image_ids, path)
    return order


def _repeats(order: np.ndarray, columns: tuple[np.ndarray, ...]) -> np.ndarray:
    """(N - 1,) whether the answer at order[k + 1] has the same `columns` as the one at order[k]."""
    same = np.ones(max(len(order) - 1, 0), dtype=bool)
    for column in columns:
        same &= column[order[1:]] == column[order[:-1]]
    return same


def refuse_duplicates(parsed: ParsedVotes, image_ids: np.ndarray, path: Path) -> None:
    """One InputError naming both records when a worker answers the same (image, class) twice."""
    order = np.lexsort((parsed.worker_of, parsed.classes, image_ids))
    repeated = np.flatnonzero(_repeats(order, (image_ids, parsed.classes, parsed.worker_of)))
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
        if replace:  # before the source, which they refer to
            s.execute(delete(VoteWorker).where(col(VoteWorker.source_id) == old.id))
        replace_existing(s, old, delete(VotePair).where(col(VotePair.source_id) == old.id), conflict, replace)
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


def _answering(codes: np.ndarray, size: int) -> np.ndarray:
    """The distinct values of `codes` (N,) of 0..size - 1, ascending: np.unique's answer, counted instead of sorted
    (ReaL's 924,810 answers: 2-3 ms against numpy's 30-170 ms)."""
    return np.flatnonzero(np.bincount(codes, minlength=size))


def _insert_votes(
    s: Session, source_id: int, parsed: ParsedVotes, image_ids: np.ndarray, order: np.ndarray, show_progress: bool
) -> int:
    """Write the source's workers and its votes in `order` (the key order of `storage_order`), one packed row per
    (image, class) pair, with a progress bar of rate and ETA in votes. Returns the number of pairs."""
    conn = s.connection()
    # the workers who answered, numbered in the code point order of their names
    by_name = sorted(
        _answering(parsed.worker_of, len(parsed.worker_names)).tolist(), key=parsed.worker_names.__getitem__
    )
    number = np.zeros(len(parsed.worker_names), dtype=np.int64)
    number[by_name] = np.arange(len(by_name))
    names = [parsed.worker_names[w] for w in by_name]
    insert_plain(conn, table_of(VoteWorker), WORKER_COLUMNS, zip(repeat(source_id), range(len(names)), names))
    image, cls = image_ids[order], parsed.classes[order]
    starts = np.flatnonzero(np.r_[True, (image[1:] != image[:-1]) | (cls[1:] != cls[:-1])])
    ends = np.r_[starts[1:], len(order)]
    workers = number[parsed.worker_of[order]].astype(WORKER_DTYPE).tobytes()
    answers = parsed.answers[order].astype(np.uint8).tobytes()
    size = np.dtype(WORKER_DTYPE).itemsize
    bounds = list(zip(starts.tolist(), ends.tolist()))
    rows = zip(
        repeat(source_id),
        image[starts].tolist(),
        cls[starts].tolist(),
        [workers[a * size : b * size] for a, b in bounds],
        [answers[a:b] for a, b in bounds],
    )
    bar = progress_bar(len(parsed), "votes", enabled=show_progress, unit="vote")
    counts = iter((ends - starts).tolist())
    written = lambda n: bar.update(sum(islice(counts, n)))  # noqa: E731 - pairs written -> their votes
    pairs = insert_plain(conn, table_of(VotePair), PAIR_COLUMNS, rows, chunk=CHUNK, progress=written)
    bar.close()
    return pairs
