"""The workspace database: idempotent init, per-connection SQLite settings, migrations, immutable snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import DatabaseError

from db import SCHEMA_VERSION, create_db_engine, init_db
from db.migrations import MIGRATIONS, Migration, SchemaError, current_version


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
