"""The login page's "Keep me signed in" box in a real browser (Debian's headless chromium): ticked, the session's
cookies persist for REMEMBER_S and its row is remembered; unticked, the cookies end with the browser, and a
session made on one studio process works on another on the same database."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.models import StudioSession
from relabel.review.sessions import REMEMBER_S
from tests.studio_workspace import PASSWORD, build_workspace
from tests.ui.test_browser import CHROMIUM, WAIT_MS, require_browser, wait_for_card
from tests.ui.test_shared_sessions import process

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        yield chromium
        chromium.close()


def sign_in(browser: Any, url: str, user: str, *, keep: bool) -> Any:
    page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(url)
    page.get_by_label("username").fill(user)
    page.get_by_label("password").fill(PASSWORD)
    if keep:
        page.get_by_label("Keep me signed in").check()
    page.get_by_role("button", name="Login").click()
    wait_for_card(page)
    return page


def test_keep_me_signed_in_persists_the_cookie_and_another_process_accepts_it(browser: Any, tmp_path: Path) -> None:
    engine = build_workspace(tmp_path)
    with process(tmp_path, "a") as a, process(tmp_path, "b") as b:
        kept = sign_in(browser, a, "alice", keep=True)
        plain = sign_in(browser, a, "bob", keep=False)
        now = time.time()
        kept_cookies = [c for c in kept.context.cookies() if c["name"].startswith("access-token-")]
        plain_cookies = [c for c in plain.context.cookies() if c["name"].startswith("access-token-")]
        assert kept_cookies and all(abs(c["expires"] - (now + REMEMBER_S)) < 120 for c in kept_cookies)
        assert plain_cookies and all(c["expires"] == -1 for c in plain_cookies)  # ends with the browser
        with Session(engine) as s:
            assert sorted(r.remember for r in s.scalars(select(StudioSession))) == [False, True]
        kept.goto(b)  # the other process: no sign-in page, the card at once
        wait_for_card(kept)
        assert kept.get_by_label("password").count() == 0
        for page in (kept, plain):
            page.context.close()
