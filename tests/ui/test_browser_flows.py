"""The flows between leads and annotators in a real browser (Debian's headless chromium), and the card's layout on
small screens: a lead holds no Review card until they review, the adjudication link opens its image and keeps the
address, a key pressed after the server lost its sessions says "signed out: sign in again" with a way to sign in
and sends that decision again after sign-in (answered "already saved" when it had been stored before the restart),
messages are said once and errors clear, the zoom view's Close button is readable, sign-out posts a form, and
every control of a fresh, a decided and an adjudication card is on screen at 1280×720 and 1366×768.

Each test serves a studio of its own (overlap 2), so the queue's leases of one test never reach another. The
same flows without a browser: tests/ui/test_card_flows.py. Every wait has a timeout and waits on the page's
elements; nothing waits on network idle (Gradio keeps a connection open) and nothing is timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from db.enums import Role
from relabel.decisions.annotations import add_user
from relabel.review.studio import Studio
from relabel.review.tokens import CardTokens
from tests.studio_workspace import PASSWORD, build_workspace, free_port
from tests.ui.test_browser import (
    ADJUDICATE,
    CHROMIUM,
    REVIEW,
    WAIT_MS,
    decisions,
    image_id_of,
    key_of,
    press_and_wait,
    require_browser,
    toast,
    wait_for_card,
)
from ui import card_api

pytestmark = pytest.mark.browser

SIZES = [(1280, 720), (1366, 768)]
LONG_NOTE = "the animal is partly hidden behind a fence, and the sign in the corner may be the real subject " * 2
# every control a card shows, and the parts of it a person reads to decide
CONTROLS = (
    ".rg-bar button, .rg-bar a, .rg-controls button, .rg-controls input, .rg-topk-items li, .rg-others-items li, "
    ".rg-img, .rg-original-name, .rg-suggestion-name, .rg-list-items li.rg-current"
)
OFF_SCREEN = """([sel, controls]) => {
  const root = document.querySelector(sel);
  const shown = Array.from(root.querySelectorAll(controls)).filter((e) => e.getClientRects().length > 0);
  const W = window.innerWidth, H = window.innerHeight;
  const inside = (r, box) => r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5;  // a scrolling box clips
  const box = (e) => e.closest('.rg-info, .rg-list-items');
  const off = shown.map((e) => [e.className || e.tagName, e.getBoundingClientRect(), box(e)])
    .filter(([, r, clip]) => r.top < 0 || r.left < 0 || r.bottom > H + 0.5 || r.right > W + 0.5 || r.height <= 0 ||
      (clip && !inside(r, clip.getBoundingClientRect())))
    .map(([name, r]) => `${name} ${Math.round(r.top)}..${Math.round(r.bottom)}`);
  const info = root.querySelector('.rg-info');
  return { shown: shown.length, off, info: [info.scrollHeight, info.clientHeight],
           pageScrolls: document.documentElement.scrollHeight > H + 1 };
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            headless=True,
        )
        yield chromium
        chromium.close()


@contextmanager
def launched(folder: Path, extra: int = 12) -> Iterator[tuple[Studio, Any, str]]:
    """A studio of its own (overlap 2, users alice, bob, carol, dave and the lead lena) served on 127.0.0.1:
    (studio, Gradio app, URL)."""
    from ui.app import launch_app

    require_browser()
    engine = build_workspace(folder, extra=extra)
    for name in ("carol", "dave"):
        add_user(engine, name, Role.annotator, PASSWORD)
    studio = Studio(engine, cache_dir=folder / "cache", overlap=2)
    port = free_port()
    app = launch_app(studio, port=port, exports_dir=folder / "exports", block=False)
    try:
        yield studio, app, f"http://127.0.0.1:{port}/"
    finally:
        app.close()


def new_page(browser: Any, width: int = 1366, height: int = 768) -> Any:
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.set_default_timeout(WAIT_MS)
    return page


def sign_in(page: Any, user: str) -> None:
    page.get_by_label("username").fill(user)
    page.get_by_label("password").fill(PASSWORD)
    page.get_by_role("button", name="Login").click()


def wait_for_image(page: Any, root: str, image_id: int) -> None:
    page.wait_for_function(
        "([sel, id]) => document.querySelector(sel)?.dataset.imageId === String(id)", arg=[root, image_id]
    )
    wait_for_card(page, root)


def wait_for_text(page: Any, selector: str, text: str) -> None:
    page.wait_for_function(
        "([sel, text]) => (document.querySelector(sel)?.textContent || '').includes(text)", arg=[selector, text]
    )


def served(studio: Studio, user: str) -> int:
    """The image the user's page would be served by N now."""
    reply = card_api.next_card(studio, user, {})
    assert reply.get("card"), reply
    return int(reply["card"]["image_id"])


def dispute(studio: Studio, image_id: int, note: str = "") -> None:
    for user, action in (("alice", "original"), ("bob", "none_fit")):
        _, token = studio.open_card(user, image_id)
        studio.decide(user, token, image_id, action, note=note)


def contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two CSS `rgb(...)`/`rgba(...)` colours (opaque)."""

    def luminance(css: str) -> float:
        r, g, b = (int(float(v)) / 255 for v in css[css.index("(") + 1 : css.index(")")].split(",")[:3])
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_a_lead_holds_no_review_card_until_they_review(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path) as (studio, _, url):
        first = studio.queue.order[0]  # the image the queue serves first
        page = new_page(browser)
        page.goto(f"{url}?image={first}&tab=adjudicate")  # the lead looks at it, in adjudication only
        sign_in(page, "lena")
        wait_for_image(page, ADJUDICATE, first)
        assert f"image={first}" in page.url and "tab=adjudicate" in page.url  # the address is kept
        assert "is not disputed" in toast(page, ADJUDICATE)
        for tab in ("Dashboard", "Snapshots", "Review"):
            page.get_by_role("tab", name=tab).click()
        wait_for_text(page, f"{REVIEW} .rg-noimg", "press N")  # the Review tab offers cards, takes none
        assert key_of(page) == ""
        # overlap 2: both annotators are served the image the lead has looked at
        assert served(studio, "alice") == first and served(studio, "bob") == first
        page.keyboard.press("n")  # the lead reviews: the card is held like an annotator's
        wait_for_card(page)
        taken = image_id_of(page)
        assert taken != first and served(studio, "carol") == taken
        assert served(studio, "dave") not in (first, taken)  # the lead and carol hold `taken`: overlap reached
        page.context.close()


def test_the_adjudication_link_opens_its_image(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path) as (studio, _, url):
        early, late = studio.queue.order[-2:]
        dispute(studio, early)
        dispute(studio, late)
        assert studio.queue.disputed()[0] != late  # the link names one that is not the first disputed image
        page = new_page(browser)
        page.goto(f"{url}?image={late}&tab=adjudicate")
        sign_in(page, "lena")
        wait_for_image(page, ADJUDICATE, late)
        assert page.url.endswith(f"?image={late}&tab=adjudicate")
        assert page.locator(f"{ADJUDICATE} .rg-list-items li.rg-current").get_attribute("data-image-id") == str(late)
        page.goto(f"{url}?image=999999&tab=adjudicate")  # not an image of the dataset
        wait_for_text(page, f"{ADJUDICATE} .rg-toast", "999999")
        message = toast(page, ADJUDICATE)
        assert "not an image of dataset 'photos'" in message and "\n" not in message
        wait_for_image(page, ADJUDICATE, studio.queue.disputed()[0])
        assert decisions(studio.engine, "lena") == []
        page.context.close()


def test_a_key_after_a_restart_says_signed_out_and_offers_to_sign_in(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path) as (studio, app, url):
        page = new_page(browser)
        page.goto(url)
        sign_in(page, "alice")
        wait_for_card(page)
        held = image_id_of(page)
        # what a restart loses, the card tokens in the server's memory; and every session ends (as when signed out)
        app.server_app.tokens.clear()
        studio.tokens = CardTokens()
        page.keyboard.press("1")
        wait_for_text(page, f"{REVIEW} .rg-toast", "signed out: sign in again")
        assert page.is_visible(f"{REVIEW} .rg-signin") and "empty answer" not in toast(page)
        assert image_id_of(page) == held and decisions(studio.engine, "alice") == []
        page.click(f"{REVIEW} .rg-signin")
        sign_in(page, "alice")
        wait_for_image(page, REVIEW, held)  # back on the same image
        # the decision made while signed out is sent again; the studio never stored it, so it asks again
        wait_for_text(page, f"{REVIEW} .rg-toast", "decide again")
        assert decisions(studio.engine, "alice") == []
        press_and_wait(page, "1")
        assert "saved #" in toast(page) and page.is_hidden(f"{REVIEW} .rg-signin")
        assert [r.image_id for r in decisions(studio.engine, "alice")] == [held]
        page.context.close()


def test_a_decision_stored_before_a_restart_is_answered_already_saved(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path) as (studio, app, url):
        page = new_page(browser)
        page.goto(url)
        sign_in(page, "alice")
        wait_for_card(page)
        held = image_id_of(page)

        def lose_answer(route: Any) -> None:
            route.fetch()  # the studio stores the decision...
            route.abort()  # ...and its answer never reaches the page

        page.route(lambda address: "component_server" in address, lose_answer, times=1)
        page.keyboard.press("1")
        wait_for_text(page, f"{REVIEW} .rg-toast", "no answer from the studio: press the key again")
        assert [r.image_id for r in decisions(studio.engine, "alice")] == [held] and image_id_of(page) == held
        app.server_app.tokens.clear()  # the studio restarts: sessions and card tokens are gone
        studio.tokens = CardTokens()
        page.keyboard.press("1")  # the same decision, sent again
        wait_for_text(page, f"{REVIEW} .rg-toast", "signed out: sign in again")
        page.click(f"{REVIEW} .rg-signin")
        sign_in(page, "alice")
        wait_for_text(page, f"{REVIEW} .rg-toast", "(already saved)")  # sent once more after sign-in: stored
        wait_for_card(page)
        assert [r.image_id for r in decisions(studio.engine, "alice")] == [held] and image_id_of(page) != held
        page.context.close()


def test_messages_once_errors_clear_zoom_close_reads_and_sign_out_posts(browser: Any, tmp_path: Path) -> None:
    with launched(tmp_path) as (studio, _, url):
        page = new_page(browser)
        page.goto(url)
        sign_in(page, "alice")
        wait_for_card(page)
        page.keyboard.press("Enter")  # nothing picked: refused, in red
        wait_for_text(page, f"{REVIEW} .rg-toast", "pick a class")
        assert "rg-error" in (page.get_attribute(f"{REVIEW} .rg-toast", "class") or "")
        press_and_wait(page, "1")  # the next action succeeds: the error goes
        assert "pick a class" not in toast(page)
        assert "rg-error" not in (page.get_attribute(f"{REVIEW} .rg-toast", "class") or "")
        text = page.inner_text(REVIEW)
        assert text.count("saved #") == 1  # said once, not in the progress line as well
        page.keyboard.press("u")
        wait_for_text(page, f"{REVIEW} .rg-toast", "undid")
        assert page.inner_text(REVIEW).count("undid your decision") == 1
        # the zoom view's Close button: dark text on a light button, readable over the dark view
        page.keyboard.press("f")
        close = page.locator(f"{REVIEW} .rg-zoom-close")
        close.wait_for(state="visible")
        colors = close.evaluate("b => { const s = getComputedStyle(b); return [s.color, s.backgroundColor]; }")
        assert contrast(*colors) >= 4.5, colors
        close.click()
        assert page.is_hidden(f"{REVIEW} .rg-zoom")
        # sign-out is a form that posts; the server signs out only on a same-origin POST
        form = page.locator(f"{REVIEW} form.rg-logout-form")
        assert form.get_attribute("method") == "post" and form.get_attribute("action") == "logout"
        assert page.locator(f"{REVIEW} a[href*=logout]").count() == 0
        page.click(f"{REVIEW} .rg-logout")
        page.get_by_label("username").wait_for(state="visible")  # back on the sign-in page
        assert page.request.get(f"{url}gradio_api/token").json()["user"] is None
        page.context.close()


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_control_is_on_screen_on_fresh_decided_and_adjudication_cards(
    browser: Any, tmp_path: Path, size: tuple[int, int]
) -> None:
    with launched(tmp_path) as (studio, _, url):
        head = studio.queue.order[:3]
        for image_id in head:  # others' answers, with long notes, on the cards carol is served
            _, token = studio.open_card("dave", image_id)
            studio.decide("dave", token, image_id, "none_fit", note=LONG_NOTE)
        disputed = studio.queue.order[-1]
        dispute(studio, disputed, note=LONG_NOTE)

        def check(page: Any, root: str, what: str) -> None:
            found = page.evaluate(OFF_SCREEN, [root, CONTROLS])
            assert found["shown"] >= 20, (what, found)  # the check saw the card's controls
            content, height = found["info"]  # what is known of the image fits too: its box need not scroll
            assert found["off"] == [] and content <= height + 1 and not found["pageScrolls"], (what, found)

        page = new_page(browser, *size)
        page.goto(url)
        sign_in(page, "carol")
        wait_for_card(page)
        check(page, REVIEW, "fresh card")
        decided = image_id_of(page)
        page.click(f"{REVIEW} .rg-topk-items li >> nth=1")  # a second class picked beside the original
        page.click(f"{REVIEW} .rg-topk-items li >> nth=0")
        press_and_wait(page, "Enter")
        page.go_back()  # the decided card: own answer pre-filled, the others' answers shown
        wait_for_image(page, REVIEW, decided)
        wait_for_text(page, f"{REVIEW} .rg-own", "Your answer")
        assert "dave" in page.inner_text(f"{REVIEW} .rg-others-items")
        check(page, REVIEW, "decided card")
        page.context.close()

        page = new_page(browser, *size)
        page.goto(f"{url}?image={disputed}&tab=adjudicate")
        sign_in(page, "lena")
        wait_for_image(page, ADJUDICATE, disputed)
        assert page.locator(f"{ADJUDICATE} .rg-take").count() == 2
        check(page, ADJUDICATE, "adjudication card")
        page.context.close()
