"""A vote source read off SQLite's votes table in bulk (`relabel.vote_scan`) gives the very table that reading its
rows one by one gives: same items, workers, worker numbers and answers, in the same order."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import case
from sqlmodel import Session, col, select

from db.enums import Answer
from db.models import Image, Vote, VoteSource
from relabel import vote_scan
from relabel.votes import ANSWER_CODES, VoteTable, collect_votes
from tests.relabel.test_sources import val_dataset

WORKERS = ["107", "12", "5", "a,b", "Émile", "zed", "Zed", "b 2", ""]  # text order is not number order


def store_votes(engine, name: str, workers: list[str], seed: int, n_votes: int = 0) -> None:
    """A vote source as an importer stores it, its rows in (image, class) order but its workers shuffled."""
    rng = random.Random(seed)
    with Session(engine) as s:
        image_ids = s.exec(select(Image.id)).all()
        source = VoteSource(dataset_id=1, name=name, format="test", n_votes=n_votes)
        s.add(source)
        s.flush()
        for image_id in image_ids:
            for c in sorted(rng.sample(range(1000), 3)):
                for worker in rng.sample(workers, rng.randint(1, len(workers))):
                    answer = rng.choice(list(Answer))
                    s.add(Vote(source_id=source.id, image_id=image_id, class_index=c, worker=worker, answer=answer))
                    s.flush()  # one row at a time: the table's order is this order
        s.commit()


def read(engine, **kwargs) -> VoteTable:
    with engine.connect() as conn:
        return collect_votes(conn, 1, studio=False, **kwargs)


def assert_same(a: VoteTable, b: VoteTable) -> None:
    for name in ("item", "worker", "answer", "item_image"):
        assert np.array_equal(getattr(a.votes, name), getattr(b.votes, name)), name
    assert np.array_equal(a.pairs, b.pairs)
    assert (a.workers, a.worker_kinds, a.sources, a.votes.n_workers) == (
        b.workers,
        b.worker_kinds,
        b.sources,
        b.votes.n_workers,
    )


@pytest.fixture
def rated(sqlite_engine, vocab, tmp_path: Path):
    """Four val images; source "big" holds most of the votes (read off the table), "small" the rest."""
    val_dataset(sqlite_engine, vocab, tmp_path, [1, 2, 3, 4])
    store_votes(sqlite_engine, "big", WORKERS, seed=0, n_votes=10_000)
    store_votes(sqlite_engine, "small", ["x", "y"], seed=1, n_votes=10)
    return sqlite_engine


@pytest.mark.parametrize("span", [vote_scan.SPAN, 1, 7])
def test_the_table_read_in_bulk_equals_its_rows_read_one_by_one(
    rated, monkeypatch: pytest.MonkeyPatch, span: int
) -> None:
    calls = []
    scan = vote_scan.scan_votes

    def counted(*args):
        calls.append(args[1])
        return scan(*args)

    with monkeypatch.context() as m:
        m.setattr("relabel.votes.scan_votes", counted)
        m.setattr(vote_scan, "SPAN", span)  # many stretches, some without a vote of the source
        bulk = read(rated)
    assert calls == [1]  # only the source holding most of the table is read off it
    with monkeypatch.context() as m:
        m.setattr("relabel.votes.scan_votes", lambda *args: None)
        rows = read(rated)
    assert_same(bulk, rows)
    assert {w.split(":", 1)[1] for w in bulk.workers} == {*WORKERS, "x", "y"}
    with monkeypatch.context() as m:
        m.setattr(vote_scan, "SPAN", span)
        big = read(rated, sources=["big"]).votes
    key = np.lexsort((big.worker, big.item))  # in the primary key's order: (image, class, worker name)
    assert key.tolist() == list(range(len(key)))


def test_a_worker_name_holding_the_separator_is_read_row_by_row(rated) -> None:
    with Session(rated) as s:
        image_id = s.exec(select(Image.id)).first()
        s.add(Vote(source_id=1, image_id=image_id, class_index=999, worker="a\x1fb", answer=Answer.yes))
        s.commit()
    code = case(*((col(Vote.answer) == Answer(word), number) for word, number in ANSWER_CODES.items()))
    with rated.connect() as conn:
        assert vote_scan.scan_votes(conn, 1, code) is None
    t = read(rated, sources=["big"])
    assert "big:a\x1fb" in t.workers
    yes = t.votes.answer[t.votes.worker == t.workers.index("big:a\x1fb")]
    assert yes.tolist() == [ANSWER_CODES["yes"]]


def test_a_source_without_votes_reads_as_none(sqlite_engine, vocab, tmp_path: Path) -> None:
    val_dataset(sqlite_engine, vocab, tmp_path, [1])
    with Session(sqlite_engine) as s:
        s.add(VoteSource(dataset_id=1, name="empty", format="test"))
        s.commit()
    t = read(sqlite_engine)
    assert (len(t.pairs), t.workers, t.sources) == (0, (), ("empty",))
