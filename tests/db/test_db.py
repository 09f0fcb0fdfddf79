"""The workspace database: idempotent init, per-connection SQLite settings, migrations, immutable snapshots."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Column, Enum, Integer, MetaData, String, Table, inspect, text
from sqlalchemy.exc import DatabaseError
from sqlmodel import Session, select

from db import SCHEMA_VERSION, create_db_engine, init_db
from db.enums import Answer
from db.migrations import MIGRATIONS, Migration, SchemaError, current_version
from db.models import Image, VoteSource
from relabel.votes.table import ANSWER_CODES, VoteTable, collect_votes
from tests.relabel.sources.test_sources import val_dataset


def test_init_is_idempotent(engine) -> None:
    assert init_db(engine) == SCHEMA_VERSION
    assert init_db(engine) == SCHEMA_VERSION
    with engine.connect() as conn:
        assert current_version(conn) == SCHEMA_VERSION
        rows = conn.execute(text("select count(*) from schema_version")).scalar_one()
    assert rows == len(MIGRATIONS)
    tables = set(inspect(engine).get_table_names())
    assert {
        "datasets",
        "images",
        "labels",
        "label_sources",
        "predictions",
        "model_runs",
        "annotations",
        "snapshots",
        "snapshot_labels",
        "users",
        "vocabularies",
        "vocab_classes",
    } <= tables


def test_sqlite_settings_hold_on_every_connection(sqlite_engine) -> None:
    for _ in range(3):  # several pooled and fresh connections
        with sqlite_engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
    sqlite_engine.dispose()


def test_foreign_keys_are_enforced(engine) -> None:
    with pytest.raises(DatabaseError), engine.begin() as conn:
        conn.execute(text("insert into labels (source_id, image_id, classes) values (999, 999, '[1]')"))


def test_migrations_apply_in_order_to_an_older_workspace(tmp_path: Path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'old.db'}")
    init_db(engine)
    applied = []

    def add_column(conn) -> None:
        applied.append(2)
        conn.execute(text("alter table images add column quality real"))

    newer = [*MIGRATIONS, Migration(SCHEMA_VERSION + 1, "image quality", add_column)]
    assert init_db(engine, newer) == SCHEMA_VERSION + 1
    assert init_db(engine, newer) == SCHEMA_VERSION + 1  # applied once only
    assert applied == [2]
    assert "quality" in {c["name"] for c in inspect(engine).get_columns("images")}


def test_a_newer_workspace_is_refused(tmp_path: Path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'new.db'}")
    init_db(engine, [*MIGRATIONS, Migration(SCHEMA_VERSION + 1, "future", lambda conn: None)])
    with pytest.raises(SchemaError, match="newer than this relabel knows"):
        init_db(engine)


def test_snapshot_tables_refuse_update_and_delete(engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into vocabularies (name, content_hash, n_classes, created_at)"
                " values ('v', 'h', 1, CURRENT_TIMESTAMP)"
            )
        )
        conn.execute(text("insert into datasets (name, vocabulary_id, created_at) values ('d', 1, CURRENT_TIMESTAMP)"))
        conn.execute(
            text(
                "insert into snapshots (dataset_id, name, content_hash, base_source, undecided_policy, n_images,"
                " counts, created_by, tool_version, created_at)"
                " values (1, 's', 'h', 'imgt', 'keep', 0, '{}', '', '', CURRENT_TIMESTAMP)"
            )
        )
    for statement in ("update snapshots set name = 'x'", "delete from snapshots"):
        with pytest.raises(DatabaseError, match="immutable"), engine.begin() as conn:
            conn.execute(text(statement))
    with engine.connect() as conn:
        assert conn.execute(text("select name from snapshots")).scalar_one() == "s"


def test_a_version_1_workspace_is_upgraded(tmp_path: Path) -> None:
    """Rebuild what schema 1 had (no response cache, no prediction details), then upgrade it."""
    engine = create_db_engine(f"sqlite:///{tmp_path / 'v1.db'}")
    init_db(engine, MIGRATIONS[:1])
    with engine.begin() as conn:
        conn.execute(text("drop table response_cache"))
        conn.execute(text("alter table predictions drop column details"))
    assert init_db(engine) == SCHEMA_VERSION
    assert "response_cache" in inspect(engine).get_table_names()
    assert "details" in {c["name"] for c in inspect(engine).get_columns("predictions")}


# The one-row-per-answer votes table of schema versions 4 to 11, as those versions created it.
_OLD_VOTES = Table(
    "votes",
    MetaData(),
    Column("source_id", Integer, primary_key=True),
    Column("image_id", Integer, primary_key=True),
    Column("class_index", Integer, primary_key=True),
    Column("worker", String, primary_key=True),
    Column("answer", Enum(Answer), nullable=False),
)


def test_an_old_workspace_s_votes_are_packed_losslessly(db_url: str, vocab, tmp_path: Path) -> None:
    """A schema-11 workspace with the one-row-per-answer votes table: migration 12 moves every answer to the packed
    pair rows (read back the same by `collect_votes`, workers in the database's name order) and drops the table."""
    engine = create_db_engine(db_url)
    init_db(engine)
    val_dataset(engine, vocab, tmp_path, [1, 2, 3, 4, 5])
    with Session(engine) as s:  # back to schema 11: the old votes table in place of the packed ones
        image_ids = s.exec(select(Image.id)).all()
        s.add_all(
            [VoteSource(dataset_id=1, name="a", format="long"), VoteSource(dataset_id=1, name="b", format="mturk")]
        )
        s.exec(select(VoteSource).where(VoteSource.name == "b")).one().workers_identified = False
        s.commit()
    with engine.begin() as conn:
        conn.execute(text("drop table vote_pairs"))
        conn.execute(text("drop table vote_workers"))
        conn.execute(text("delete from schema_version where version = 12"))
        _OLD_VOTES.create(conn)
        rng = random.Random(3)
        rows = [
            {"source_id": source, "image_id": i, "class_index": c, "worker": w, "answer": rng.choice(list(Answer))}
            for source in (1, 2)
            for i in image_ids
            for c in rng.sample(range(1000), 4)
            for w in rng.sample(_NAMES, 4)
        ]
        conn.execute(_OLD_VOTES.insert(), rows)
    assert init_db(engine) == SCHEMA_VERSION
    assert "votes" not in inspect(engine).get_table_names()
    with engine.connect() as conn:
        named = collect_votes(conn, 1, sources=["a"], studio=False)
        ballots = collect_votes(conn, 1, sources=["b"], studio=False)
        collated = conn.execute(text("select name from vote_workers where source_id = 1 order by name")).scalars()
        assert named.workers == tuple(f"a:{w}" for w in collated)
    engine.dispose()
    expected = {
        (r["image_id"], r["class_index"], r["worker"]): ANSWER_CODES[r["answer"].value]
        for r in rows
        if r["source_id"] == 1
    }
    assert _answers(named, lambda w: w.removeprefix("a:")) == expected
    expected = {
        (r["image_id"], r["class_index"], r["worker"]): ANSWER_CODES[r["answer"].value]
        for r in rows
        if r["source_id"] == 2
    }
    assert _answers(ballots, lambda w: w.split("/")[1]) == expected  # "b:IMAGE/BALLOT"
    assert all(
        w.startswith(f"b:{i}/")
        for i, w in zip(ballots.pairs[ballots.votes.item, 0], np.array(ballots.workers)[ballots.votes.worker])
    )


_NAMES = ["zed", "Ann", "bob", "ann", "_x", "Émile", "b-2", "b10", "b9", "10", "9"]  # text order is not number order


def _answers(t: VoteTable, name: Callable[[str], str]) -> dict[tuple[int, int, str], int]:
    """(image id, class, `name` of the worker) -> answer code, of every answer in `t`."""
    v = t.votes
    return {
        (int(t.pairs[i, 0]), int(t.pairs[i, 1]), name(t.workers[w])): int(a)
        for i, w, a in zip(v.item, v.worker, v.answer)
    }
