"""A vote source stored one row per (image, class) pair with its answers packed (`db.vote_packing`) reads back
(`relabel.votes.scan`, `relabel.votes.table.collect_votes`) as exactly the answers written, in (image, class, worker)
order; a row that does not unpack is a one-line error naming the pair."""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
from sqlmodel import Session, select

from db.models import Image, VotePair, VoteSource, VoteWorker, stored_id
from db.vote_packing import ANSWER_BYTES, pack_pair, unpack_pair
from relabel.common.errors import InputError
from relabel.votes.aggregation import ANSWERS
from relabel.votes.importing import import_votes
from relabel.votes.scan import scan_votes
from relabel.votes.table import ANSWER_CODES, VoteTable, collect_votes
from tests.relabel.sources.test_sources import val_dataset

WORKERS = ["107", "12", "5", "a,b", "Émile", "zed", "Zed", "b 2", "b-1"]  # text order is not number order


def store_votes(session: Session, source_id: int, votes: Iterable[tuple[int, int, str, str]]) -> None:
    """Store (image id, class, worker name, answer word) votes of one source as an import does: its answering
    workers numbered in code point order, one packed row per (image, class) pair."""
    votes = list(votes)
    number = {name: k for k, name in enumerate(sorted({w for _, _, w, _ in votes}))}
    session.add_all(VoteWorker(source_id=source_id, number=k, name=name) for name, k in number.items())
    pairs: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for image_id, c, worker, answer in votes:
        pairs.setdefault((image_id, c), []).append((number[worker], ANSWER_BYTES[answer]))
    for (image_id, c), given in sorted(pairs.items()):
        workers, answers = pack_pair(*zip(*sorted(given)))  # type: ignore[arg-type]
        session.add(VotePair(source_id=source_id, image_id=image_id, class_index=c, workers=workers, answers=answers))
    session.flush()


def read(engine, **kwargs) -> VoteTable:
    with engine.connect() as conn:
        return collect_votes(conn, 1, studio=False, **kwargs)


def answers_of(t: VoteTable) -> dict[tuple[int, int, str], int]:
    """(image id, class, worker name) -> answer code."""
    v = t.votes
    return {
        (int(t.pairs[i, 0]), int(t.pairs[i, 1]), t.workers[w]): int(a) for i, w, a in zip(v.item, v.worker, v.answer)
    }


@pytest.fixture
def written(engine, vocab, tmp_path: Path):
    """Four val images and a long-table file of random answers by `WORKERS` (shuffled), imported as "round";
    returns the engine and {(image id, class, "round:WORKER"): answer code} of the file."""
    val_dataset(engine, vocab, tmp_path, [1, 2, 3, 4])
    return engine, import_round(engine, tmp_path, seed=0)


def import_round(engine, tmp_path: Path, seed: int, replace: bool = False) -> dict[tuple[int, int, str], int]:
    rng = random.Random(seed)
    with Session(engine) as s:
        ids = {int(p.split("_")[-1].split(".")[0]): i for p, i in s.exec(select(Image.path, Image.id))}
    lines, expected = ["worker,image,label,answer"], {}
    for number, image_id in ids.items():
        for c in rng.sample(range(1000), 3):
            for worker in rng.sample(WORKERS, rng.randint(1, len(WORKERS))):
                answer = rng.choice(ANSWERS)
                lines.append(f'"{worker}",{number},{c},{answer}')
                expected[(image_id, c, f"round:{worker}")] = ANSWER_CODES[answer]
    rng.shuffle(lines[1:])
    (tmp_path / "round.csv").write_text("\n".join(lines) + "\n")
    import_votes(engine, tmp_path / "round.csv", fmt="long", name="round", replace=replace)
    return expected


def test_imported_answers_read_back_exactly_in_key_order(written) -> None:
    engine, expected = written
    t = read(engine)
    assert answers_of(t) == expected and len(t.votes.item) == len(expected)
    key = np.lexsort((t.votes.worker, t.votes.item))  # items in (image, class) order, workers ascending in each
    assert key.tolist() == list(range(len(key)))
    with engine.connect() as conn:
        rows = conn.execute(select(VotePair.workers)).scalars().all()
        names = conn.execute(select(VoteWorker.name).order_by(VoteWorker.number)).scalars().all()
    assert len(rows) == len({(i, c) for i, c, _ in expected})  # one row per pair
    assert names == sorted(names) == sorted({w.split(":", 1)[1] for _, _, w in expected})


def test_a_stored_pair_that_does_not_unpack_is_refused_by_name(written) -> None:
    engine, _ = written
    with Session(engine) as s:
        row = s.exec(select(VotePair).order_by(VotePair.image_id, VotePair.class_index)).first()
        assert row is not None
        row.workers = row.workers[:-1]
        where = f"image {row.image_id} class {row.class_index}"
        s.commit()
    with pytest.raises(InputError, match=f"vote source 'round': the stored answers on {where} do not unpack"):
        read(engine)


def test_a_worker_number_without_a_name_is_refused(written) -> None:
    engine, _ = written
    with Session(engine) as s:
        row = s.exec(select(VotePair)).first()
        assert row is not None
        row.workers = pack_pair([len(WORKERS)] * len(row.answers), list(row.answers))[0]
        s.commit()
    with pytest.raises(InputError, match=f"worker number {len(WORKERS)}, which it has no name for"):
        read(engine)


def test_a_source_without_votes_reads_as_empty(sqlite_engine, vocab, tmp_path: Path) -> None:
    val_dataset(sqlite_engine, vocab, tmp_path, [1])
    with Session(sqlite_engine) as s:
        source = VoteSource(dataset_id=1, name="empty", format="test")
        s.add(source)
        s.commit()
        with sqlite_engine.connect() as conn:
            assert len(scan_votes(conn, stored_id(source), "empty").image) == 0
    t = read(sqlite_engine)
    assert (len(t.pairs), t.workers, t.sources) == (0, (), ("empty",))


def kept_files(engine) -> list[Path]:
    return sorted((Path(engine.url.database).parent / "cache").glob("votes-*.npz"))


def test_a_source_read_again_comes_from_the_workspace_cache(sqlite_engine, vocab, tmp_path, monkeypatch) -> None:
    """The first read keeps the source's columns in the workspace's cache; the next reads them from there, the same
    answers in the same order; a source imported again is read from its rows."""
    val_dataset(sqlite_engine, vocab, tmp_path, [1, 2, 3, 4])
    expected = import_round(sqlite_engine, tmp_path, seed=0)
    first = read(sqlite_engine)
    (kept,) = kept_files(sqlite_engine)
    assert answers_of(first) == expected

    def no_rows(*args: object) -> None:
        raise AssertionError("read from the rows")

    with monkeypatch.context() as m:
        m.setattr("relabel.votes.scan._scan", no_rows)
        again = read(sqlite_engine)
    assert answers_of(again) == expected and again.workers == first.workers
    for name in ("item", "worker", "answer", "item_image"):
        assert np.array_equal(getattr(again.votes, name), getattr(first.votes, name))
    assert np.array_equal(again.pairs, first.pairs)
    replaced = import_round(sqlite_engine, tmp_path, seed=1, replace=True)
    assert replaced != expected and answers_of(read(sqlite_engine)) == replaced
    assert kept_files(sqlite_engine) not in ([], [kept])  # the source's new import in a file of its own


def test_a_damaged_kept_source_is_read_from_its_rows_and_kept_again(sqlite_engine, vocab, tmp_path) -> None:
    val_dataset(sqlite_engine, vocab, tmp_path, [1, 2, 3, 4])
    expected = import_round(sqlite_engine, tmp_path, seed=0)
    read(sqlite_engine)
    (kept,) = kept_files(sqlite_engine)
    kept.write_bytes(kept.read_bytes()[:100])
    assert answers_of(read(sqlite_engine)) == expected
    assert kept_files(sqlite_engine) == [kept] and kept.stat().st_size > 100


def test_packing_round_trips_and_uses_the_aggregation_codes() -> None:
    assert ANSWER_BYTES == ANSWER_CODES == {word: code for code, word in enumerate(ANSWERS)}
    workers, answers = pack_pair([0, 7, 2**31 - 1], [2, 0, 1])
    assert (len(workers), answers) == (12, b"\x02\x00\x01")
    assert unpack_pair(workers, answers) == ([0, 7, 2**31 - 1], [2, 0, 1])
    with pytest.raises(ValueError, match="2 workers but 1 answers"):
        pack_pair([0, 1], [2])
    with pytest.raises(ValueError, match="5 worker bytes for 1 answers"):
        unpack_pair(b"\x00" * 5, b"\x02")
