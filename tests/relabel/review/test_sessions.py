"""Sign-in sessions in the database: shared by every process on it, kept across a restart, ended by sign-out,
expiry and disabling the user, and answered from a few seconds' cache at most."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db import create_db_engine, init_db
from db.enums import Role
from db.models import StudioSession
from relabel.decisions.annotations import add_user
from relabel.review.sessions import IDLE_S, REMEMBER_S, TOUCH_S, DbSessions, cookie_id, token_hash
from relabel.review.users import set_active

PASSWORD = "correct horse battery"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db_file(db_url: str) -> str:
    """A workspace database (a SQLite file, or a PostgreSQL schema) with users alice and lena."""
    url = db_url
    engine = create_db_engine(url)
    init_db(engine)
    for name, role in (("alice", Role.annotator), ("lena", Role.lead)):
        add_user(engine, name, role, PASSWORD)
    engine.dispose()
    return url


def process(url: str, **options: object) -> tuple[Engine, DbSessions]:
    """What one studio process holds: an engine of its own and its sessions (no cache unless asked)."""
    engine = create_db_engine(url)
    options.setdefault("cache_s", 0.0)
    return engine, DbSessions(engine, **options)  # type: ignore[arg-type]


def rows(engine: Engine) -> list[StudioSession]:
    with Session(engine) as s:
        return list(s.scalars(select(StudioSession)))


def test_a_session_made_by_one_process_is_accepted_by_another_and_after_a_restart(db_file: str) -> None:
    _, first = process(db_file)
    _, second = process(db_file)
    first.create("tok-alice", "alice")
    assert second.user_of("tok-alice") == "alice"
    assert second.user_of("tok-other") is None
    _, restarted = process(db_file)
    assert restarted.user_of("tok-alice") == "alice"


def test_the_database_holds_the_token_s_hash_never_the_token(db_file: str) -> None:
    engine, sessions = process(db_file)
    sessions.create("a-secret-token", "alice")
    (row,) = rows(engine)
    assert row.token_hash == token_hash("a-secret-token") != "a-secret-token"
    assert len(row.token_hash) == 64 and "a-secret-token" not in repr(row)


def test_signing_out_in_one_process_ends_every_session_of_the_user_in_the_others(db_file: str) -> None:
    _, first = process(db_file)
    _, second = process(db_file)
    first.create("laptop", "alice")
    first.create("desk", "alice")
    first.create("lead", "lena")
    assert second.end("desk") == "alice"
    assert [first.user_of(t) for t in ("laptop", "desk", "lead")] == [None, None, "lena"]
    assert second.end("desk") is None  # already ended


def test_disabling_a_user_ends_their_sessions_and_they_stay_refused(db_file: str) -> None:
    engine, sessions = process(db_file)
    sessions.create("tok", "alice")
    assert set_active(engine, "alice", False)
    assert rows(engine) == [] and sessions.user_of("tok") is None
    sessions.create("late", "alice")  # a sign-in that raced the disabling
    assert sessions.user_of("late") is None
    assert not set_active(engine, "alice", False) and rows(engine) == []  # disabling again ends that one too


def test_an_ordinary_session_ends_after_idle_time_and_use_moves_its_end_on(db_file: str) -> None:
    clock = Clock()
    _, sessions = process(db_file, clock=clock)
    sessions.create("tok", "alice")
    clock.now += IDLE_S - 10
    assert sessions.user_of("tok") == "alice"  # used: its end moves to IDLE_S from now
    clock.now += IDLE_S - 10
    assert sessions.user_of("tok") == "alice"
    clock.now += IDLE_S + 1
    assert sessions.user_of("tok") is None


def test_a_remembered_session_lasts_its_fixed_term_whatever_its_use(db_file: str) -> None:
    clock = Clock()
    engine, sessions = process(db_file, clock=clock)
    sessions.create("kept", "alice", remember=True)
    sessions.create("idle", "lena")
    (kept,) = [r for r in rows(engine) if r.remember]
    assert (kept.expires_at - kept.created_at).total_seconds() == REMEMBER_S
    clock.now += IDLE_S + 1
    assert (sessions.user_of("kept"), sessions.user_of("idle")) == ("alice", None)
    clock.now += REMEMBER_S - IDLE_S - 2 * TOUCH_S
    assert sessions.user_of("kept") == "alice"
    clock.now += 2 * TOUCH_S
    assert sessions.user_of("kept") is None
    sessions.create("new", "lena")  # a sign-in clears the expired rows
    assert [r.token_hash for r in rows(engine)] == [token_hash("new")]


def test_an_answer_is_cached_only_for_the_window(db_file: str) -> None:
    _, here = process(db_file, cache_s=0.3)
    _, there = process(db_file)
    here.create("tok", "alice")
    assert here.user_of("tok") == "alice"
    there.end("tok")
    assert here.user_of("tok") == "alice"  # within the window: the cached answer
    time.sleep(0.35)
    assert here.user_of("tok") is None


def test_every_process_on_a_database_names_the_cookie_alike(db_file: str, tmp_path: Path) -> None:
    first, _ = process(db_file)
    second, _ = process(db_file)
    other = create_db_engine(f"sqlite:///{tmp_path / 'other.db'}")
    init_db(other)
    assert cookie_id(first) == cookie_id(second) != cookie_id(other)
