"""Sign-in sessions served over HTTP from the database: two studio processes (two Studio objects with an engine
each, on one SQLite file) accept each other's sessions, a session outlives a restart, and signing out or disabling
the user ends it everywhere; "keep me signed in" gives a persistent cookie and a longer expiry."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlmodel import Session

from db import create_db_engine
from db.models import StudioSession
from relabel.review import sessions as db_sessions
from relabel.review.sessions import IDLE_S, REMEMBER_S
from relabel.review.studio import Studio
from relabel.review.users import set_active
from tests.studio_workspace import PASSWORD, build_workspace, serving
from ui.sessions import persistent_cookie, session_tokens

CACHE_S = 0.2  # the window a process answers from its cache, short in these tests


@pytest.fixture(autouse=True)
def short_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db_sessions, "CHECK_CACHE_S", CACHE_S)


@contextmanager
def process(folder: Path, name: str) -> Iterator[str]:
    """One studio process on the workspace's database: a Studio with an engine of its own, served; its URL."""
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    studio = Studio(engine, cache_dir=folder / f"cache-{name}", overlap=1)
    with serving(studio, folder / f"exports-{name}") as url:
        yield url


def sign_in(url: str, user: str, query: str = "") -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=60)
    client.post(f"/login{query}", data={"username": user, "password": PASSWORD}).raise_for_status()
    return client


def signed_in(url: str, client: httpx.Client) -> bool:
    """True when `client`'s cookies are a live session on the process at `url`."""
    status = httpx.get(f"{url}config", cookies=client.cookies, timeout=60).status_code
    assert status in (200, 401)
    return status == 200


def stored(folder: Path) -> list[StudioSession]:
    with Session(create_db_engine(f"sqlite:///{folder / 'relabel.db'}")) as s:
        return list(s.scalars(select(StudioSession)))


def wait_out_the_cache() -> None:
    import time

    time.sleep(CACHE_S + 0.1)


def test_two_processes_share_sessions_which_outlive_a_restart_and_end_at_sign_out(tmp_path: Path) -> None:
    build_workspace(tmp_path)
    with process(tmp_path, "a") as a, ExitStack() as stack:
        b = stack.enter_context(process(tmp_path, "b"))
        alice = sign_in(a, "alice")
        assert signed_in(a, alice) and signed_in(b, alice)
        assert not signed_in(b, httpx.Client(cookies={name: "made-up" for name in alice.cookies}))
        stack.close()  # b stops; a new process on the same database still knows alice
        with process(tmp_path, "b2") as b2:
            assert signed_in(b2, alice)
            bob = sign_in(b2, "bob")
            out = alice.post(f"{b2}logout", headers={"Origin": b2.rstrip("/")})
            assert out.status_code == 302
            wait_out_the_cache()
            assert not signed_in(a, alice) and not signed_in(b2, alice)
            assert signed_in(a, bob)  # another user's session goes on
            assert [r.remember for r in stored(tmp_path)] == [False]


def test_keep_me_signed_in_sets_a_persistent_cookie_and_disabling_ends_the_session(tmp_path: Path) -> None:
    engine = build_workspace(tmp_path)
    with process(tmp_path, "a") as a, process(tmp_path, "b") as b:
        page = httpx.get(a, timeout=60)
        assert page.status_code == 200 and "id = BOX" in page.text and "Keep me signed in (30 days" in page.text
        kept = httpx.post(f"{a}login?remember=1", data={"username": "bob", "password": PASSWORD}, timeout=60)
        plain = httpx.post(f"{a}login", data={"username": "alice", "password": PASSWORD}, timeout=60)
        assert kept.status_code == plain.status_code == 200
        kept_cookies = kept.headers.get_list("set-cookie")
        assert len(kept_cookies) == 2 and all(f"Max-Age={int(REMEMBER_S)}" in c for c in kept_cookies)
        assert not any("max-age" in c.lower() or "expires" in c.lower() for c in plain.headers.get_list("set-cookie"))
        terms = {r.remember: (r.expires_at - r.created_at).total_seconds() for r in stored(tmp_path)}
        assert terms == {True: REMEMBER_S, False: IDLE_S}
        bob = httpx.Client(cookies=kept.cookies)
        assert signed_in(b, bob)
        assert set_active(engine, "bob", False)
        wait_out_the_cache()
        assert not signed_in(a, bob) and not signed_in(b, bob)
        assert [r.remember for r in stored(tmp_path)] == [False]  # alice's session is left


def test_the_cookie_helpers() -> None:
    from starlette.datastructures import Headers

    headers = Headers({"cookie": "access-token-x=abc; access-token-unsecure-x=abc; other=1"})
    assert session_tokens(headers) == ["abc", "abc"]
    assert session_tokens(Headers({"cookie": "other=1"})) == []
    assert persistent_cookie("access-token-x=abc; HttpOnly", 60) == "access-token-x=abc; HttpOnly; Max-Age=60"
    assert persistent_cookie("other=1", 60) == "other=1"
    deleted = 'access-token-x=""; expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; Path=/'
    assert persistent_cookie(deleted, 60) == deleted
