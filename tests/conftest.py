"""Shared fixtures. Tests are offline; DB tests run on SQLite and on the local PostgreSQL server."""

from __future__ import annotations

import functools
import gc
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from db import create_db_engine, init_db  # noqa: E402
from relabel.common.vocabulary import load_builtin  # noqa: E402
from tests.databases import PostgresSchemas, SqliteTemplate  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"
PG_URL = os.environ.get("RELABEL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def shared(*parts: str) -> Path:
    """A file of the shared real data set; skips the test when the folder is not beside the checkout."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data {path} not available")
    return path


EMBED_LIMIT = 2048  # texts a test outside `slow` may embed with a real text encoder (MiniLM: ~13 ms of CPU each)


@pytest.fixture(autouse=True)
def embedding_budget(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """Fails a test outside `slow` that embeds more than EMBED_LIMIT texts with a real encoder (one whose id does not
    start with "test:"), in this process: the built-in vocabulary's ~31,000 class texts cost MiniLM minutes of CPU.
    Such a test takes a small vocabulary or a stub encoder (tests/fakes.py's TrigramEncoder) instead."""
    import relabel.suggest.embedding_cache as embedding_cache

    embedded: dict[str, int] = {}
    embed = embedding_cache._embed

    def counted(encoder: embedding_cache.TextEncoder, texts: list[str], *args, **kwargs):
        if not encoder.id.startswith("test:"):
            embedded[encoder.id] = embedded.get(encoder.id, 0) + len(texts)
        return embed(encoder, texts, *args, **kwargs)

    monkeypatch.setattr(embedding_cache, "_embed", counted)
    yield
    over = ", ".join(f"{n} texts with {k}" for k, n in embedded.items() if n > EMBED_LIMIT)
    if over and request.node.get_closest_marker("slow") is None:
        pytest.fail(f"embedded {over} (more than {EMBED_LIMIT}): use a small vocabulary or a stub text encoder")


_MODULES_FROZEN = [0]  # len(sys.modules) when the collector last froze what this process held


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After a test that imported more modules (torch, transformers, gradio and their many submodules load as tests
    first need them), what the process holds is frozen (`gc.freeze`): the collector's full collections no longer
    walk these long-lived objects again and again. They cost a third of the CPU of a file of database tests (114
    full collections, 25.7 of 86 CPU s, in a process that had imported the studio's libraries). The first freeze
    collects first; later ones do not (a garbage cycle left at that moment stays in memory)."""
    if len(sys.modules) > _MODULES_FROZEN[0] + 20:
        if not _MODULES_FROZEN[0]:
            gc.collect()
        _MODULES_FROZEN[0] = len(sys.modules)
        gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user cache folder of every test and of the commands they start (`RELABEL_CACHE`): under the session's
    tmp, never the user's own; what one test embeds there (MiniLM's class texts) the next one reads back."""
    folder = tmp_path_factory.mktemp("user-cache")
    os.environ["RELABEL_CACHE"] = str(folder)
    return folder


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


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> SqliteTemplate:
    return SqliteTemplate(tmp_path_factory.mktemp("sqlite-template"))


@pytest.fixture(scope="session")
def postgres_schemas(postgres_reason: str | None):
    schemas = PostgresSchemas(PG_URL)
    yield schemas
    problems = schemas.close()
    if problems:
        warnings.warn(f"test schemas left on {PG_URL}: {'; '.join(problems)}", stacklevel=1)


def _skip_without_postgres(reason: str | None) -> None:
    if reason:
        if os.environ.get("RELABEL_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL required but unreachable: {reason}")
        pytest.skip(f"PostgreSQL unreachable: {reason}")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    postgres_reason: str | None,
    postgres_schemas: PostgresSchemas,
):
    """A workspace database without rows: the path of a SQLite file in tmp_path/ws that the first command (or the
    `engine` fixture) creates, or a schema on the PostgreSQL server already holding today's tables (a workspace
    command's first step), emptied and reused after the test (tests/databases.py). `empty_db_url`: no tables."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}"
        return
    _skip_without_postgres(postgres_reason)
    schema = postgres_schemas.take()
    yield postgres_schemas.url(schema)
    postgres_schemas.give_back(schema)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db_url(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_reason: str | None, postgres_schemas: PostgresSchemas
) -> str:
    """A database without tables (an older workspace to upgrade, a first `init_db`): a SQLite file not yet
    created, or a new schema on the PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}"
    _skip_without_postgres(postgres_reason)
    return postgres_schemas.url(postgres_schemas.empty())


@pytest.fixture
def engine(db_url: str, sqlite_template: SqliteTemplate):
    """An engine on `db_url` holding today's schema (a SQLite file copied from one built once per run)."""
    if db_url.startswith("sqlite:///") and not Path(db_url.removeprefix("sqlite:///")).exists():
        sqlite_template.copy_to(Path(db_url.removeprefix("sqlite:///")))
    eng = create_db_engine(db_url)
    init_db(eng)  # today's schema is in place already: this only reads its version
    yield eng
    eng.dispose()


@pytest.fixture(scope="session", autouse=True)
def scrypt_once_per_password():
    """Each password is put through scrypt about once per run. scrypt is slow on purpose (about 60 ms of CPU and
    16 MB a call, 0.3 s on a busy machine) and tests add many users with the same few passwords and sign them in
    again and again, which cost a studio test a quarter of its time. Here the first hash of a password is handed
    out again (one salt per password per run: a draw `os.urandom` could make) and each (password, salt) key is derived
    once; the key is the one scrypt gives, a wrong password or another salt is derived afresh, and processes a test
    starts hash and check as the product does."""
    import relabel.decisions.annotations as annotations
    import relabel.review.users as users

    hashes: dict[str, str] = {}
    hash_password = annotations.hash_password

    def hash_once(password: str) -> str:
        if password not in hashes:
            hashes[password] = hash_password(password)
        return hashes[password]

    patch = pytest.MonkeyPatch()
    patch.setattr(annotations, "_derive", functools.lru_cache(maxsize=None)(annotations._derive))
    patch.setattr(annotations, "hash_password", hash_once)
    patch.setattr(users, "hash_password", hash_once)
    yield
    patch.undo()


@pytest.fixture(scope="session")
def vocab():
    return load_builtin()


@pytest.fixture
def sqlite_engine(tmp_path: Path, sqlite_template: SqliteTemplate):
    path = tmp_path / "ws" / "relabel.db"
    sqlite_template.copy_to(path)
    eng = create_db_engine(f"sqlite:///{path}")
    init_db(eng)
    yield eng
    eng.dispose()
