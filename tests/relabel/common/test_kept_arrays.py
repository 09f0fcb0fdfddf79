"""Where a workspace keeps the arrays its commands derive (`relabel.common.kept_arrays.cache_dir_of`): beside a
SQLite file's relabel.db, in the user's cache folder for a database server (one folder per database, its password
left out), nowhere for an in-memory database; and an evaluation on either keeps its resamples there."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
from sqlalchemy import make_url

from relabel.common.kept_arrays import CACHE_ENV, DATABASES, cache_dir_of
from relabel.evaluation import evaluate
from relabel.snapshots.freeze import create_snapshot
from tests import evaluation_workspace as ws


def test_a_sqlite_file_keeps_them_beside_it(tmp_path: Path) -> None:
    assert cache_dir_of(make_url(f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}")) == tmp_path / "ws" / "cache"


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_database_keeps_nothing(url: str) -> None:
    assert cache_dir_of(make_url(url)) is None


def test_a_database_server_keeps_them_in_the_users_cache_one_folder_per_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    lead = cache_dir_of(make_url("postgresql+psycopg://lead:secret@db.lab:5432/regt"))
    again = cache_dir_of(make_url("postgresql+psycopg://lead:changed@db.lab:5432/regt"))
    other_db = cache_dir_of(make_url("postgresql+psycopg://lead:secret@db.lab:5432/other"))
    other_host = cache_dir_of(make_url("postgresql+psycopg://lead:secret@db2.lab:5432/regt"))
    assert lead is not None and lead == again  # the password is no part of the address
    assert lead.parent == tmp_path / "mine" / DATABASES and lead.name.startswith("postgresql-")
    assert "secret" not in str(lead) and len({lead, other_db, other_host}) == 3


def test_an_evaluation_keeps_its_resamples_in_the_workspaces_cache(engine, tmp_path: Path) -> None:
    """On SQLite and on PostgreSQL alike: the second evaluation reads what the first kept, the same numbers."""
    ws.build(engine, tmp_path)
    folder = cache_dir_of(engine.url)
    assert folder is not None
    first = evaluate(engine, references=["imgt", "team"], n_boot=200, store=False)
    assert [p.name for p in folder.glob("resamples-*")]
    again = evaluate(engine, references=["imgt", "team"], n_boot=200, store=False)
    assert [asdict(s) for s in again.scores] == [asdict(s) for s in first.scores]


def test_a_snapshot_keeps_its_arrays_in_a_cache_folder_not_made_yet(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first file a workspace keeps makes its folder, parents and all (a database server's folder lies three
    levels under the user's cache folder)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "fresh-user-cache"))
    ws.build(engine, tmp_path)
    folder = cache_dir_of(engine.url)
    assert folder is not None
    shutil.rmtree(folder, ignore_errors=True)
    create_snapshot(engine, "first", dataset="five")
    assert len(list(folder.glob("snapshot-arrays-*.npz"))) == 1
