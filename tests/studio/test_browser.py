"""The review tab in a real browser (Debian's headless chromium): log in through Gradio's form, label three images
with keyboard shortcuts (one quick action, two classes through the picker, no class fits; flags set by key and by
mouse), and check what reached the database; model output shown on a card stays text.

Skipped when /usr/bin/chromium or the playwright package is missing, unless RELABEL_REQUIRE_BROWSER=1 (CI), which
turns the skip into a failure. Every wait has a timeout; nothing waits on network idle, since Gradio keeps a
connection open.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlmodel import Session

from db.enums import PredictionStatus, Verdict
from db.models import Annotation, Image, ModelRun, Prediction, User
from relabel.review.studio import Studio
from relabel.vocabulary import load_builtin
from relabel.workspace import get_dataset
from tests.studio.workspace import PASSWORD, build_workspace, serving

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
WAIT_MS = 15_000  # every wait in the page, in milliseconds
XSS = '<img src=x onerror="window.__xss=1">'
VOCAB = load_builtin()
CARD_KEY = "#card-key textarea, #card-key input"
# the hidden card-key box holds "IMAGE_ID:TOKEN"; a decision's answer replaces it with the next card's key
KEY_CHANGED = """([selector, previous]) => {
  const box = document.querySelector(selector);
  return box !== null && box.value !== "" && box.value !== previous;
}"""


def require_browser() -> None:
    """Skip (or, under RELABEL_REQUIRE_BROWSER=1, fail) when the browser or its driver is not installed."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package (pip install -e '.[dev]')")
    if missing:
        reason = "browser test needs " + " and ".join(missing)
        if os.environ.get("RELABEL_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + "; RELABEL_REQUIRE_BROWSER=1 makes this a failure")
        pytest.skip(reason)


def add_untrusted_suggestions(engine: Any) -> None:
    """A generative (OW) run whose answer on every image is HTML that would run script if rendered as markup."""
    with Session(engine) as s:
        ds = get_dataset(s, "photos")
        ids = s.scalars(select(Image.id).where(Image.dataset_id == ds.id)).all()
        run = ModelRun(dataset_id=ds.id, name="tiny-vlm@ow", model="tiny-vlm", protocol="ow", params={})
        s.add(run)
        s.flush()
        s.execute(
            insert(Prediction),
            [
                {
                    "run_id": run.id,
                    "image_id": image_id,
                    "classes": [VOCAB.resolve("n02123159")],  # tiger cat
                    "scores": None,
                    "status": PredictionStatus.ok,
                    "raw_output": XSS,
                    "reason": "",
                }
                for image_id in ids
            ],
        )
        s.commit()


def card_key(page: Any) -> str:
    return str(page.eval_on_selector(CARD_KEY, "box => box.value"))


def press_and_wait_for_next_card(page: Any, key: str) -> str:
    """Press `key` outside any text field and wait until the answer has replaced the card; returns the new key."""
    before = card_key(page)
    page.keyboard.press(key)
    page.wait_for_function(KEY_CHANGED, arg=[CARD_KEY, before], timeout=WAIT_MS)
    return card_key(page)


def pick_class(page: Any, typed: str, label: str) -> None:
    """Type into the focused class picker, take the highlighted option with Enter (as the dropdown wants) and wait
    until the class shows among the picked ones."""
    picked = page.locator("#act-picker .token")
    before = picked.count()
    page.keyboard.type(typed)
    option = page.locator("#act-picker [role=option]", has_text=label).first
    option.wait_for(timeout=WAIT_MS)
    if "active" not in (option.get_attribute("class") or ""):
        page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "n => document.querySelectorAll('#act-picker .token').length === n", arg=before + 1, timeout=WAIT_MS
    )
    assert label in picked.nth(before).inner_text()


def log_in(page: Any, url: str, user: str) -> None:
    page.goto(url, timeout=WAIT_MS)
    page.get_by_label("username").fill(user)
    page.get_by_label("password").fill(PASSWORD)
    page.get_by_role("button", name="Login").click()
    page.wait_for_function(
        "name => (document.querySelector('#whoami textarea, #whoami input')?.value || '').includes(name)",
        arg=f"signed in as {user}",
        timeout=WAIT_MS,
    )


def annotations_of(engine: Any, user: str) -> list[Annotation]:
    with Session(engine) as s:
        query = (
            select(Annotation)
            .join(User, User.id == Annotation.user_id)
            .where(User.name == user)
            .order_by(Annotation.id)
        )
        return list(s.scalars(query))


def test_an_annotator_labels_three_images_with_the_keyboard(tmp_path: Path) -> None:
    require_browser()
    from playwright.sync_api import sync_playwright

    engine = build_workspace(tmp_path)
    add_untrusted_suggestions(engine)
    studio = Studio(engine, cache_dir=tmp_path / "cache", overlap=1)
    with serving(studio, tmp_path / "exports") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(WAIT_MS)
            log_in(page, url, "alice")
            page.get_by_role("button", name="Next card").click()
            page.wait_for_function(KEY_CHANGED, arg=[CARD_KEY, ""], timeout=WAIT_MS)
            page.locator("#card-image img").wait_for(timeout=WAIT_MS)
            # the photo really loads: served from where it lies, to this signed-in session only
            page.wait_for_function(
                "() => { const i = document.querySelector('#card-image img'); return i && i.complete && "
                "i.naturalWidth > 0; }",
                timeout=WAIT_MS,
            )
            src = page.locator("#card-image img").get_attribute("src") or ""
            assert "/file=" in src
            assert page.request.get(src).status == 200
            assert page.context.browser is not None
            stranger = page.context.browser.new_context()
            assert stranger.request.get(src).status in (401, 403)
            stranger.close()

            # untrusted model output is shown as text, never parsed as markup
            suggestion = page.locator("#card-suggestion textarea").input_value()
            assert XSS in suggestion
            assert page.evaluate("typeof window.__xss") == "undefined"
            assert page.locator("img[src=x]").count() == 0
            original = page.locator("#card-original textarea").input_value()
            page.screenshot(path=tmp_path / "review.png", full_page=True)
            if target := os.environ.get("RELABEL_BROWSER_SCREENSHOT"):
                shutil.copy(tmp_path / "review.png", target)

            # 1: the original label is right
            first = card_key(page)
            second = press_and_wait_for_next_card(page, "1")

            # several classes: "/" focuses the picker, two classes by type-ahead, Esc leaves it, Enter saves
            page.keyboard.press("/")
            assert page.evaluate("document.activeElement.closest('#act-picker') !== null")
            pick_class(page, "tabby", "tabby")
            pick_class(page, "Egyptian", "Egyptian cat")
            page.keyboard.press("Escape")
            assert page.evaluate("document.activeElement.closest('#act-picker') === null")
            page.keyboard.press("d")  # flag: drawing or render
            assert page.get_by_label("drawing or render").is_checked()
            third = press_and_wait_for_next_card(page, "Enter")

            # Z: no class fits, right after a flag was clicked with the mouse (the focused checkbox is no text field)
            page.get_by_label("multiple objects").click()
            before_status = page.locator("#card-status textarea").input_value()
            press_and_wait_for_next_card(page, "z")
            status = page.locator("#card-status textarea").input_value()
            assert status != before_status and "saved" in status
        finally:
            browser.close()

    rows = annotations_of(engine, "alice")
    assert [(r.verdict, len(r.classes)) for r in rows] == [
        (Verdict.labels, 1),
        (Verdict.labels, 2),
        (Verdict.none_fit, 0),
    ]
    assert [r.image_id for r in rows] == [int(k.split(":")[0]) for k in (first, second, third)]
    assert len({r.image_id for r in rows}) == 3
    assert VOCAB.classes[rows[0].classes[0]].wnid in original
    assert set(rows[1].classes) == {VOCAB.resolve("n02123045"), VOCAB.resolve("n02124075")}
    assert [r.flags for r in rows] == [[], ["drawing"], ["multiple_objects"]]
    assert all(r.seconds_on_item is not None and r.seconds_on_item >= 0 for r in rows)
