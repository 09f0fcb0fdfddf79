"""The leads' Images tab in a real browser (Debian's headless chromium): a lead opens it, sees thumbnails, filters
them, and a click on a thumbnail gives the adjudication link; an annotator has no Images tab. Every wait has a
timeout and waits on the page's elements; nothing is timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.ui.test_browser import WAIT_MS
from tests.ui.test_browser_flows import browser, dispute, launched, new_page, sign_in, wait_for_text

pytestmark = pytest.mark.browser
__all__ = ["browser"]  # the module's chromium fixture, shared

SUMMARY_SAYS = """(text) => (document.querySelector('#grid-summary textarea')?.value || '').includes(text)"""
THUMBS_SHOWN = """(n) => {
  const imgs = Array.from(document.querySelectorAll('#grid-gallery img'));
  return imgs.length === n && imgs.every((i) => i.complete && i.naturalWidth > 0);
}"""


def test_a_lead_filters_the_grid_and_gets_an_adjudication_link(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path, extra=6) as (studio, _, url):
        disputed = studio.queue.order[0]
        dispute(studio, disputed)
        page = new_page(browser)
        page.goto(url)
        sign_in(page, "lena")
        page.get_by_role("tab", name="Images").click()
        page.wait_for_function(THUMBS_SHOWN, arg=12, timeout=WAIT_MS)  # 6 photos + 6 extra, one page
        page.wait_for_function(SUMMARY_SAYS, arg="12 image(s) match", timeout=WAIT_MS)
        page.locator("#grid-status input").click()
        page.get_by_role("option", name="disputed", exact=True).click()
        page.locator("#grid-show").click()
        page.wait_for_function(SUMMARY_SAYS, arg="1 image(s) match;", timeout=WAIT_MS)
        page.wait_for_function(THUMBS_SHOWN, arg=1, timeout=WAIT_MS)
        assert "disputed, 2 dec." in page.locator("#grid-gallery").inner_text()
        page.locator("#grid-gallery img").first.click()
        wait_for_text(page, "#grid-link", f"Image {disputed}")
        href = page.locator("#grid-link a").get_attribute("href")
        assert href == f"?image={disputed}&tab=adjudicate"
        page.context.close()


def test_an_annotator_has_no_images_tab(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path, extra=0) as (_, _, url):
        page = new_page(browser)
        page.goto(url)
        sign_in(page, "alice")
        page.wait_for_selector("#review-card", timeout=WAIT_MS)
        page.get_by_role("tab", name="Review").wait_for(timeout=WAIT_MS)
        assert page.get_by_role("tab", name="Images").count() == 0
        page.context.close()
