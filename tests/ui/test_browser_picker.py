"""The picker's and the card's reference thumbnails, the "left for you · decided today" count and the recent
decisions panel (key R) in a real browser (Debian's headless chromium), and every card control on screen at 1280×720
with them shown.

Each test serves a studio of its own (`tests.ui.test_browser_flows.launched`), whose photos include two of the
computer mouse, so "mouse" has a reference photo whichever card is open. Every wait has a timeout and waits on the
page's elements; nothing is timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relabel.common.vocabulary import load_builtin
from tests import images
from tests.ui.test_browser import REVIEW, press_and_wait, wait_for_card
from tests.ui.test_browser_flows import CONTROLS, OFF_SCREEN, browser, launched, new_page, sign_in

pytestmark = pytest.mark.browser
__all__ = ["browser"]  # the module's chromium, shared by these tests

MOUSE = load_builtin().resolve("n03793489")  # the computer mouse
THUMBS_LOADED = """(sel) => {
  const imgs = Array.from(document.querySelectorAll(sel));
  return imgs.length > 0 && imgs.every((i) => i.complete && i.naturalWidth > 0);
}"""


def with_mouse_photos(folder: Path) -> Path:
    """Two photos labelled with the computer mouse in the workspace's photo folder, before it is built."""
    for i in range(2):
        images.photo(folder / "photos" / f"n03793489_mouse{i}.jpg", (90 + i, 70), (200, 200 - 40 * i, 60))
    return folder


def test_the_picker_shows_each_result_with_its_description_and_a_reference_thumbnail(
    browser: Any, tmp_path: Path
) -> None:
    with launched(with_mouse_photos(tmp_path)) as (_, _, url):
        page = new_page(browser)
        page.goto(url)
        sign_in(page, "alice")
        wait_for_card(page)
        page.keyboard.press("/")
        page.keyboard.type("mouse")
        page.wait_for_function(
            "sel => document.querySelector(sel).textContent.startsWith('Enter adds')", arg=f"{REVIEW} .rg-preview"
        )
        first = page.locator(f"{REVIEW} .rg-picker .rg-results li").first
        assert first.locator(".rg-what").inner_text().startswith("mouse (n03793489)")
        assert "computer" in first.locator(".rg-gloss").inner_text()  # the pointing device, not the animal
        page.wait_for_function(THUMBS_LOADED, arg=f"{REVIEW} .rg-picker .rg-results li:first-child img.rg-thumb")
        thumb = first.locator("img.rg-thumb")
        assert thumb.get_attribute("loading") == "lazy"
        assert "gradio_api/file=" in (thumb.get_attribute("src") or "")
        assert thumb.get_attribute("title") == "reference photo: mouse (n03793489)"
        page.context.close()


def test_the_top5_shows_reference_photos(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path) as (_, _, url):
        page = new_page(browser)
        page.goto(url)
        sign_in(page, "alice")
        wait_for_card(page)
        refs = f"{REVIEW} .rg-topk-items img.rg-topk-ref:not(.rg-noref)"
        page.wait_for_function(THUMBS_LOADED, arg=refs)  # the classes with reference photos show one
        assert page.locator(refs).count() >= 1
        assert (
            page.locator(f"{REVIEW} .rg-topk-items li").count()
            == page.locator(f"{REVIEW} .rg-topk-items img.rg-topk-ref").count()
        )  # one place for a photo per row
        page.context.close()


def test_today_counts_and_the_recent_panel_list_the_decision_just_made(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path) as (_, _, url):
        page = new_page(browser)
        page.goto(url)
        sign_in(page, "alice")
        wait_for_card(page)
        today = page.locator(f"{REVIEW} .rg-today")
        assert today.get_attribute("data-today") == "0"
        left = int(today.get_attribute("data-left") or -1)
        assert left > 0 and today.inner_text() == f"{left} left for you · 0 decided today"
        decided = page.eval_on_selector(REVIEW, "r => r.dataset.imageId")
        press_and_wait(page, "1")
        page.wait_for_function("sel => document.querySelector(sel).dataset.today === '1'", arg=f"{REVIEW} .rg-today")
        assert int(today.get_attribute("data-left") or -1) == left - 1

        page.keyboard.press("r")
        page.wait_for_selector(f"{REVIEW} .rg-recent:not([hidden])")
        rows = page.locator(f"{REVIEW} .rg-recent-items li")
        assert rows.count() == 1 and rows.first.get_attribute("data-image-id") == decided
        assert "UTC" in rows.first.inner_text()
        rows.first.click()  # opens that image on the card, the answer pre-filled to change it
        page.wait_for_function(
            "([sel, id]) => document.querySelector(sel).dataset.imageId === id", arg=[REVIEW, decided]
        )
        page.wait_for_function("sel => (document.querySelector(sel).textContent || '').includes('Your answer')",
                               arg=f"{REVIEW} .rg-own")  # fmt: skip
        assert page.is_hidden(f"{REVIEW} .rg-recent")
        page.keyboard.press("?")
        assert "my recent decisions" in page.inner_text(f"{REVIEW} .rg-help-table")
        page.context.close()


def test_every_control_is_on_screen_at_1280x720_with_the_thumbnails_and_the_day(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path) as (_, _, url):
        page = new_page(browser, 1280, 720)
        page.goto(url)
        sign_in(page, "alice")
        wait_for_card(page)
        page.wait_for_function(THUMBS_LOADED, arg=f"{REVIEW} .rg-topk-items img.rg-topk-ref:not(.rg-noref)")
        press_and_wait(page, "1")
        controls = f"{CONTROLS}, .rg-topk-ref, .rg-today"
        found = page.evaluate(OFF_SCREEN, [REVIEW, controls])
        content, height = found["info"]
        assert found["shown"] >= 20 and page.is_visible(f"{REVIEW} .rg-today"), found
        assert found["off"] == [] and content <= height + 1 and not found["pageScrolls"], found
        page.context.close()
