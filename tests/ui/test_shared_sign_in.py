"""The sign-in limit over HTTP with two studio processes on one database: wrong passwords sent to one lock the name
on the other, and the lockout outlives a restart."""

from __future__ import annotations

from pathlib import Path

import httpx

from db import create_db_engine
from relabel.review.studio import Studio
from tests.studio_workspace import PASSWORD, build_workspace, serving
from ui.login import FREE_PER_USER, LOCKED_STATUS


def login(url: str, user: str, password: str = PASSWORD) -> httpx.Response:
    return httpx.post(f"{url}login", data={"username": user, "password": password}, timeout=60)


def studio(folder: Path, name: str) -> Studio:
    """One studio process's Studio: an engine of its own on the workspace's database."""
    return Studio(create_db_engine(f"sqlite:///{folder / 'relabel.db'}"), cache_dir=folder / f"cache-{name}", overlap=1)


def test_wrong_passwords_sent_to_one_process_lock_the_name_on_another_and_after_a_restart(tmp_path: Path) -> None:
    build_workspace(tmp_path)
    with (
        serving(studio(tmp_path, "a"), tmp_path / "exports-a") as a,
        serving(studio(tmp_path, "b"), tmp_path / "x") as b,
    ):
        for _ in range(FREE_PER_USER):
            assert login(a, "alice", "wrong-password").status_code == 400
        refused = login(b, "alice")  # the right password, on the other process
        assert refused.status_code == LOCKED_STATUS
        assert "too many failed sign-ins for 'alice'" in refused.json()["detail"]
        assert int(refused.headers["retry-after"]) > 0 and "set-cookie" not in refused.headers
        assert login(b, "bob").status_code == 200
    with serving(studio(tmp_path, "c"), tmp_path / "exports-c") as c:  # both stopped; a new process
        assert login(c, "alice").status_code == LOCKED_STATUS
        assert login(c, "bob").status_code == 200
