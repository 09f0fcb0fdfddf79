"""Shared fixtures. Tests are offline; DB tests run on SQLite and on the local PostgreSQL server."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from db import create_db_engine, init_db  # noqa: E402
from relabel.vocabulary import load_builtin  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"
PG_URL = os.environ.get("RELABEL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def shared(*parts: str) -> Path:
    """A file of the shared real data set; skips the test when the folder is not beside the checkout."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data {path} not available")
    return path


def _postgres_available() -> str | None:
    try:
        with create_engine(PG_URL, connect_args={"connect_timeout": 3}).connect() as conn:
            conn.execute(text("select 1"))
        return None
    except Exception as exc:  # any failure to connect means "no server here"
        return str(exc).splitlines()[0]


@pytest.fixture(scope="session")
def postgres_reason() -> str | None:
    return _postgres_available()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, postgres_reason: str | None):
    """An empty database: a SQLite file, or a fresh schema on the PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}"
        return
    if postgres_reason:
        if os.environ.get("RELABEL_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL required but unreachable: {postgres_reason}")
        pytest.skip(f"PostgreSQL unreachable: {postgres_reason}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


@pytest.fixture
def engine(db_url: str):
    eng = create_db_engine(db_url)
    init_db(eng)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def vocab():
    return load_builtin()


@pytest.fixture
def sqlite_engine(tmp_path: Path):
    eng = create_db_engine(f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}")
    init_db(eng)
    yield eng
    eng.dispose()
