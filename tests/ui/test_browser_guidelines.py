"""Labeling guidelines and comments in a real browser (Debian's headless chromium): a lead saves guidelines that
hold markup, an annotator reads them on the card with G (the tag shown as text, no element made from it) and
comments on the image with O, and the lead sees the comment on the adjudication card. The same without a
browser: tests/ui/test_card_comments.py. Every wait has a timeout and waits on the page's elements."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relabel.review.comments import list_comments
from relabel.review.guidelines import current_guidelines
from tests.ui.test_browser import ADJUDICATE, REVIEW, image_id_of, wait_for_card
from tests.ui.test_browser_flows import browser, launched, new_page, sign_in, wait_for_image, wait_for_text

pytestmark = pytest.mark.browser
__all__ = ["browser"]  # the module-scoped chromium fixture

TAG = "<img src=x onerror=alert(1)>"
GUIDELINES = f"# Heading\n{TAG}\n- **mouse** is the computer mouse\n"
COMMENT = "the mouse is cut off at the edge <b>here</b>"


def test_a_lead_writes_guidelines_an_annotator_reads_them_and_comments(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path, extra=0) as (studio, _, url):
        dialogs: list[str] = []
        lead = new_page(browser)
        lead.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        lead.goto(url)
        sign_in(lead, "lena")
        lead.get_by_role("tab", name="Dashboard").click()
        lead.get_by_text("Labeling guidelines (annotators read them on the card: G)").click()
        lead.locator("#guidelines-text textarea").fill(GUIDELINES)
        lead.click("#guidelines-save")
        lead.wait_for_function(
            "() => (document.querySelector('#guidelines-message textarea')?.value || '').startsWith('saved guidelines')"
        )
        assert lead.locator("#guidelines-preview h1").inner_text() == "Heading"
        assert lead.locator("#guidelines-preview img").count() == 0 and TAG in lead.inner_text("#guidelines-preview")
        saved = current_guidelines(studio.engine)
        assert saved is not None and saved.text == GUIDELINES and saved.author == "lena"

        page = new_page(browser)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        sign_in(page, "alice")
        wait_for_card(page)
        page.keyboard.press("g")
        sheet = page.locator(f"{REVIEW} .rg-guidelines")
        sheet.wait_for(state="visible")
        assert sheet.locator("h1").inner_text() == "Heading"
        assert TAG in sheet.inner_text() and sheet.locator("img").count() == 0
        assert sheet.locator("li strong").inner_text() == "mouse"
        page.keyboard.press("Escape")
        sheet.wait_for(state="hidden")

        image_id = image_id_of(page)
        page.keyboard.press("o")
        box = page.locator(f"{REVIEW} .rg-comment-input")
        box.wait_for(state="visible")
        box.type(COMMENT)
        page.keyboard.press("Enter")
        wait_for_text(page, f"{REVIEW} .rg-comments-items", COMMENT)
        assert page.locator(f"{REVIEW} .rg-comments-items b").count() == 0
        assert box.is_hidden() and image_id_of(page) == image_id  # saving a comment leaves the card as it was
        [stored] = list_comments(studio.engine, image_id=image_id)
        assert stored.user == "alice" and stored.text == COMMENT

        lead.goto(f"{url}?image={image_id}&tab=adjudicate")
        wait_for_image(lead, ADJUDICATE, image_id)
        wait_for_text(lead, f"{ADJUDICATE} .rg-comments-items", COMMENT)
        assert "alice" in lead.inner_text(f"{ADJUDICATE} .rg-comments-items")
        assert dialogs == []
        page.context.close()
        lead.context.close()
