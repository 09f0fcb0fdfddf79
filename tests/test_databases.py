"""The test databases of tests/databases.py: a reused PostgreSQL schema starts like a new one (no rows, ids from 1),
one whose structure a test changed is not reused, and a studio workspace copied between schemas reads the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from db import SCHEMA_VERSION, create_db_engine, init_db, session_scope
from db.enums import Role
from db.migrations import current_version
from db.models import Dataset, Snapshot, Vocabulary
from relabel.decisions.annotations import add_user
from relabel.review.users import list_users
from tests.conftest import PG_URL
from tests.databases import PostgresSchemas, SqliteTemplate, copy_rows, schema_of


@pytest.fixture
def schemas(postgres_reason: str | None):
    if postgres_reason:
        pytest.skip(f"PostgreSQL unreachable: {postgres_reason}")
    pool = PostgresSchemas(PG_URL)
    yield pool
    assert pool.close() == []


def user_ids(url: str) -> list[int]:
    engine = create_db_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text("SELECT id FROM users ORDER BY id")).scalars())
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_schema_given_back_is_reused_empty_with_ids_from_one(schemas: PostgresSchemas) -> None:
    first = schemas.take()
    engine = create_db_engine(schemas.url(first))
    for name in ("alice", "bob"):
        add_user(engine, name, Role.annotator)
    with session_scope(engine) as s:  # a frozen snapshot too, whose table refuses DELETE to any other client
        vocabulary = Vocabulary(name="v", n_classes=1, content_hash="v")
        s.add(vocabulary)
        s.flush()
        dataset = Dataset(name="d", vocabulary_id=vocabulary.id)
        s.add(dataset)
        s.flush()
        s.add(
            Snapshot(
                dataset_id=dataset.id,
                name="s",
                content_hash="h",
                base_source="imgt",
                undecided_policy="keep",
                n_images=0,
                counts={},
            )
        )
    engine.dispose()
    schemas.give_back(first)

    again = schemas.take()
    assert again == first
    assert user_ids(schemas.url(again)) == []
    engine = create_db_engine(schemas.url(again))
    add_user(engine, "carol", Role.lead)
    with engine.connect() as conn:
        assert current_version(conn) == SCHEMA_VERSION
        assert conn.execute(text("SELECT count(*) FROM snapshots")).scalar() == 0
    engine.dispose()
    assert user_ids(schemas.url(again)) == [1]


@pytest.mark.postgres
def test_a_schema_whose_structure_a_test_changed_is_not_reused(schemas: PostgresSchemas) -> None:
    changed = schemas.take()
    engine = create_db_engine(schemas.url(changed))
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE users DROP COLUMN active"))
    engine.dispose()
    schemas.give_back(changed)

    versions = schemas.take()
    assert versions != changed
    engine = create_db_engine(schemas.url(versions))
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM schema_version WHERE version = :v"), {"v": SCHEMA_VERSION})
    engine.dispose()
    schemas.give_back(versions)
    assert schemas.take() not in (changed, versions)


@pytest.mark.postgres
def test_rows_copied_between_schemas_read_the_same_and_fill_only_an_empty_schema(schemas: PostgresSchemas) -> None:
    source, target = schemas.take(), schemas.take()
    engine = create_db_engine(schemas.url(source))
    add_user(engine, "alice", Role.annotator)
    add_user(engine, "lena", Role.lead)  # an enum column, whose type is the schema's own
    engine.dispose()

    assert copy_rows(PG_URL, source, target)
    copied = create_db_engine(schemas.url(target))
    assert [(u.name, u.role) for u in list_users(copied)] == [("alice", Role.annotator), ("lena", Role.lead)]
    add_user(copied, "bob", Role.annotator)  # the sequence goes on from the source's
    assert user_ids(schemas.url(target)) == [1, 2, 3]
    copied.dispose()
    assert not copy_rows(PG_URL, source, target)  # the target holds rows now
    assert schema_of(schemas.url(target)) == (PG_URL, target)


def test_the_sqlite_template_holds_todays_schema(tmp_path: Path) -> None:
    template = SqliteTemplate(tmp_path / "template")
    (tmp_path / "template").mkdir()
    for name in ("a", "b"):
        template.copy_to(tmp_path / name / "relabel.db")
    first = create_db_engine(f"sqlite:///{tmp_path / 'a' / 'relabel.db'}")
    add_user(first, "alice", Role.annotator)
    first.dispose()
    second = create_db_engine(f"sqlite:///{tmp_path / 'b' / 'relabel.db'}")
    with second.connect() as conn:
        assert current_version(conn) == SCHEMA_VERSION
    assert list_users(second) == []
    assert init_db(second) == SCHEMA_VERSION
    second.dispose()
