"""Votes as data: every answer to "is class c in image i?" that a dataset holds, as one table for aggregation.

Three kinds of worker answer (`VoteTable.worker_kinds`):

* ``rater``: imported votes (`db.models.VotePair`, one `VoteSource` per imported file: ReaL's raters, MTurk's five
  ballots, a team's own round), named "SOURCE:WORKER";
* ``annotator``: the studio's standing annotator decisions (`relabel.decisions.log.current_decisions`), named
  "studio:USER". An annotator saw the image's *candidate classes*: its original (ImGT) labels, the suggestions
  of the stored runs (a generative run's classes, a scoring run's top-5) and anything any annotator picked. A
  ``labels`` decision is yes to the classes picked and no to the other candidates; ``none_fit`` (Z) is no to
  all candidates; ``unclear`` (X) abstains. A lead's adjudication is not a vote: it settles an image outright
  (`relabel.decisions.rules`);
* ``model``: with `with_model`, one stored run as a worker, named "model:RUN" (see `_model_votes`).

An *item* is one (image, class) pair that somebody answered; pairs nobody answered are not items.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import String, cast, select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.enums import PredictionStatus, SourceKind, Verdict
from db.models import Image, Label, LabelSource, ModelRun, Prediction, User, VoteSource, VoteWorker, pk, stored_id
from relabel.common.collector import cyclic_gc_paused
from relabel.common.errors import NotFoundError, unknown_name
from relabel.decisions.log import ParsedLists, current_decisions
from relabel.votes.aggregation import NO, YES, Votes, make_votes
from relabel.votes.scan import SourceVotes, scan_votes, source_key

STUDIO = "studio"  # the name `VoteTable.sources` gives the studio's decisions
ANSWER_CODES = {"no": NO, "maybe": 1, "yes": YES}
TOP_K = 5  # a scoring run's ranked classes that a card shows


@dataclass(frozen=True)
class VoteTable:
    """The answers of one dataset, ready for `relabel.votes.aggregation.aggregate`.

    `votes.item` i is the pair `pairs[i]` = (image id, class index), sorted by image then class; `votes.worker` w
    is `workers[w]`, of kind `worker_kinds[w]` ("rater", "annotator" or "model"); `votes.item_image` numbers the
    images 0.. in image-id order. `sources`: the vote sources read, "studio" and "model:RUN" among them when used.
    """

    votes: Votes
    pairs: np.ndarray  # (I, 2) int64
    workers: tuple[str, ...]
    worker_kinds: tuple[str, ...]
    sources: tuple[str, ...]

    @property
    def image_ids(self) -> np.ndarray:
        """(n_images,) the image id of each image number of `votes.item_image`."""
        return np.unique(self.pairs[:, 0])

    def items_of(self, image_id: int) -> np.ndarray:
        """The item numbers of one image (empty when nobody answered on it)."""
        lo, hi = np.searchsorted(self.pairs[:, 0], [image_id, image_id + 1])
        return np.arange(lo, hi)


class _Answers:
    """Answers gathered as (image id, class, worker number, answer code) columns, workers numbered as they come."""

    def __init__(self) -> None:
        self.columns: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.workers: dict[str, int] = {}
        self.kinds: list[str] = []

    def worker(self, name: str, kind: str) -> int:
        if name not in self.workers:
            self.workers[name] = len(self.workers)
            self.kinds.append(kind)
        return self.workers[name]

    def add(self, image: Iterable[int], cls: Iterable[int], worker: Iterable[int], answer: Iterable[int]) -> None:
        arrays = tuple(
            a.astype(np.int64) if isinstance(a, np.ndarray) else np.fromiter(a, dtype=np.int64)
            for a in (image, cls, worker, answer)
        )
        if len(arrays[0]):
            self.columns.append(arrays)  # type: ignore[arg-type]

    def add_rows(self, rows: Sequence[tuple[int, int, int, int]]) -> None:
        """Add (image id, class, worker number, answer code) rows."""
        if rows:
            self.add(*zip(*rows))

    def table(self, sources: Sequence[str]) -> VoteTable:
        image, cls, worker, answer = (
            np.concatenate([c[k] for c in self.columns]) if self.columns else np.zeros(0, np.int64) for k in range(4)
        )
        span = int(cls.max()) + 1 if len(cls) else 1
        keys, item = _unique_inverse(image * span + cls)
        pairs = np.stack([keys // span, keys % span], axis=1).astype(np.int64)
        item_image = np.unique(pairs[:, 0], return_inverse=True)[1].ravel()
        votes = make_votes(item.ravel(), worker, answer, item_image, n_workers=len(self.workers))
        names = tuple(self.workers)
        return VoteTable(votes, pairs, names, tuple(self.kinds), tuple(sources))


def _unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(keys, return_inverse=True)`, without its sort when `keys` already ascend (votes in key order)."""
    if len(keys) and bool(np.all(keys[1:] >= keys[:-1])):
        first = np.r_[True, keys[1:] != keys[:-1]]
        return keys[first], np.cumsum(first) - 1
    return np.unique(keys, return_inverse=True)


def collect_votes(
    conn: Connection,
    dataset_id: int,
    *,
    sources: Sequence[str] | None = None,
    studio: bool = True,
    with_model: str | None = None,
) -> VoteTable:
    """Every answer of the dataset as a `VoteTable`: the imported vote `sources` (None: all of them), the studio's
    standing annotator decisions when `studio`, and the stored run `with_model` as one more worker.

    Raises NotFoundError for a vote source or run the dataset does not have.
    """
    answers = _Answers()
    names = _imported_votes(conn, dataset_id, sources, answers)
    if studio:
        _studio_votes(conn, dataset_id, answers)
        names.append(STUDIO)
    if with_model is not None:
        _model_votes(conn, dataset_id, with_model, answers)
        names.append(f"model:{with_model}")
    return answers.table(names)


def vote_sources(conn: Connection, dataset_id: int) -> list[Any]:
    """The dataset's imported vote sources (rows of the `vote_sources` table), by name."""
    table = VoteSource.__table__  # type: ignore[attr-defined]
    return list(conn.execute(select(table).where(table.c.dataset_id == dataset_id).order_by(table.c.name)))


def _imported_votes(conn: Connection, dataset_id: int, wanted: Sequence[str] | None, answers: _Answers) -> list[str]:
    """Add the votes of the chosen sources; returns their names. The ballots of a source whose workers are not
    identified (MTurk's five anonymous votes per image) are workers of one image each: "SOURCE:IMAGE/BALLOT"."""
    known = {s.name: s for s in vote_sources(conn, dataset_id)}
    for name in wanted or ():
        if name not in known:
            raise unknown_name("vote source", name, list(known))
    chosen = [known[n] for n in (dict.fromkeys(wanted) if wanted is not None else known)]
    for source in chosen:
        scanned = scan_votes(conn, stored_id(source), source.name, key=source_key(source))
        if source.workers_identified:
            _identified_votes(conn, stored_id(source), source.name, scanned, answers)
        else:
            _ballot_votes(source.name, scanned, answers)
    return [s.name for s in chosen]


def _identified_votes(conn: Connection, source_id: int, source: str, scanned: SourceVotes, answers: _Answers) -> None:
    """Add the votes of a source whose workers are named, the workers numbered in the order the database sorts
    their names (on SQLite the code point order they are stored in, so the votes stay in (image, class, worker)
    order)."""
    number = np.zeros(len(scanned.names), np.int64)
    position = {name: k for k, name in enumerate(scanned.names)}
    for name in _name_order(conn, source_id, scanned.names):
        number[position[name]] = answers.worker(f"{source}:{name}", "rater")
    answers.add(scanned.image, scanned.cls, number[scanned.worker], scanned.answer)


def _ballot_votes(source: str, scanned: SourceVotes, answers: _Answers) -> None:
    """Add the votes of a source whose workers are ballots: each (image, ballot) is a worker of its own, numbered
    in the order first met in (image, class, ballot) order."""
    n = max(len(scanned.names), 1)
    key = scanned.image * n + scanned.worker
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    number = np.zeros(len(unique), np.int64)
    for k in np.argsort(first, kind="stable").tolist():
        image, ballot = divmod(int(unique[k]), n)
        number[k] = answers.worker(f"{source}:{image}/{scanned.names[ballot]}", "rater")
    answers.add(scanned.image, scanned.cls, number[inverse.ravel()], scanned.answer)


def _name_order(conn: Connection, source_id: int, names: list[str]) -> list[str]:
    """A source's worker `names` as the database orders them: SQLite compares text by its UTF-8 bytes, which is the
    code point order the workers are numbered in; another database may collate otherwise, and is asked."""
    if conn.dialect.name == "sqlite":
        return names
    query = select(col(VoteWorker.name)).where(col(VoteWorker.source_id) == source_id).order_by(col(VoteWorker.name))
    return list(conn.execute(query).scalars())


def _studio_votes(conn: Connection, dataset_id: int, answers: _Answers) -> None:
    """Add the standing annotator decisions as votes on each image's candidate classes (see the module docstring)."""
    with cyclic_gc_paused():
        decisions = current_decisions(conn, dataset_id)
        voting = {
            image_id: [d for d in ds if not d.is_adjudication and d.verdict in (Verdict.labels, Verdict.none_fit)]
            for image_id, ds in decisions.items()
        }
        voting = {i: ds for i, ds in voting.items() if ds}
        if not voting:
            return
        candidates = _candidates(conn, dataset_id, voting.keys())
        users: dict[int, str] = {i: name for i, name in conn.execute(select(pk(User.id), col(User.name)))}
        rows: list[tuple[int, int, int, int]] = []
        for image_id, ds in voting.items():
            shown = sorted(candidates.get(image_id, set()) | {c for d in ds for c in d.classes})
            for d in ds:
                w = answers.worker(f"{STUDIO}:{users.get(d.user_id, d.user_id)}", "annotator")
                picked = set(d.classes) if d.verdict == Verdict.labels else set()
                rows.extend((image_id, c, w, YES if c in picked else NO) for c in shown)
        answers.add_rows(rows)


def _candidates(conn: Connection, dataset_id: int, image_ids: Iterable[int]) -> dict[int, set[int]]:
    """The classes a card shows for each of `image_ids`: the original (ImGT) labels, every generative run's
    classes and every scoring run's top-5."""
    wanted = set(image_ids)
    out: dict[int, set[int]] = {}
    lists = ParsedLists()
    originals = (
        select(col(Label.image_id), cast(col(Label.classes), String))
        .join(LabelSource, col(LabelSource.id) == col(Label.source_id))
        .where(col(LabelSource.dataset_id) == dataset_id, col(LabelSource.kind) == SourceKind.original)
    )
    for image_id, classes in conn.execute(originals):
        if image_id in wanted:
            out.setdefault(image_id, set()).update(lists[classes])
    for image_id, ranked, _ in _ok_predictions(conn, dataset_id):
        if image_id in wanted:
            out.setdefault(image_id, set()).update(ranked)
    return out


def _ok_predictions(
    conn: Connection, dataset_id: int, run: str | None = None
) -> Iterable[tuple[int, tuple[int, ...], str]]:
    """(image id, the classes a card shows, protocol) of each answered prediction of the dataset's runs (or of
    the run named `run`): a scoring run's top-5, a generative run's classes."""
    query = (
        select(col(Prediction.image_id), cast(col(Prediction.classes), String), col(ModelRun.protocol))
        .join(ModelRun, col(ModelRun.id) == col(Prediction.run_id))
        .join(Image, col(Image.id) == col(Prediction.image_id))
        .where(col(ModelRun.dataset_id) == dataset_id, col(Prediction.status) == PredictionStatus.ok)
    )
    if run is not None:
        query = query.where(col(ModelRun.name) == run)
    from relabel.suggest.protocols import ranked_protocols  # the suggestion machinery: only for a model's votes

    lists, scoring = ParsedLists(), ranked_protocols()
    for image_id, classes, protocol in conn.execute(query):
        ranked = lists[classes]
        yield image_id, (ranked[:TOP_K] if protocol in scoring else ranked), protocol


def _model_votes(conn: Connection, dataset_id: int, run: str, answers: _Answers) -> None:
    """Add the stored run `run` as the worker "model:RUN", on the images other workers answered on: yes to its
    top-1 (a generative run: to its classes), no to the other classes it ranked (a scoring run's top-5) and to
    the other classes of the image that somebody was asked about."""
    runs = conn.execute(select(col(ModelRun.name)).where(col(ModelRun.dataset_id) == dataset_id)).scalars().all()
    if run not in runs:
        raise NotFoundError(f"unknown run {run!r} for --with-model; known runs: {', '.join(sorted(runs)) or 'none'}")
    asked: dict[int, set[int]] = {}
    for images, classes, _, _ in answers.columns:
        for i, c in zip(images.tolist(), classes.tolist()):
            asked.setdefault(i, set()).add(c)
    w = answers.worker(f"model:{run}", "model")
    rows: list[tuple[int, int, int, int]] = []
    from relabel.suggest.protocols import ranked_protocols

    scoring = ranked_protocols()
    for image_id, shown, protocol in _ok_predictions(conn, dataset_id, run):
        if image_id not in asked or not shown:
            continue
        yes = set(shown[:1]) if protocol in scoring else set(shown)
        rows.extend((image_id, c, w, YES if c in yes else NO) for c in sorted(asked[image_id] | set(shown)))
    answers.add_rows(rows)
