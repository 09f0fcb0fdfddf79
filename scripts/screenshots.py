"""The README's screenshots of the studio at 1366×768: the review card and the adjudication card (`--only cards`),
the class picker with its descriptions and reference thumbnails (`--only picker`, img/picker.png), and the leads'
Images tab (`--only grid`, img/grid.png), on the offline demo's real photos.

Builds the demo workspace (`relabel demo --no-serve`) in a temporary folder, has two annotators disagree on one
photo, serves the studio on 127.0.0.1 and photographs it in Debian's headless chromium.

Example:
  HF_HUB_OFFLINE=1 python scripts/screenshots.py --out docs
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from db import create_db_engine
from relabel.review.studio import Studio

if TYPE_CHECKING:
    from playwright.sync_api import Page

DEMO_PASSWORD = "relabel-demo"  # the demo's users: annotators alice and bob, lead lena
VIEWPORT = {"width": 1366, "height": 768}
SIGNED_IN = "(selector) => (document.querySelector(`${selector} .rg-user`)?.textContent ?? '') !== ''"
CARD_SHOWN = """(selector) => {
  const root = document.querySelector(selector), img = root && root.querySelector('.rg-img');
  return !!(root && root.dataset.key && img && img.complete && img.naturalWidth > 0);
}"""


def build_demo(folder: Path) -> Studio:
    relabel = Path(sys.executable).with_name("relabel")
    subprocess.run([str(relabel), "--workspace", str(folder), "demo", "--no-serve", "--quiet"], check=True)
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    studio = Studio(engine, cache_dir=folder / "cache", overlap=2)
    image_id = studio.queue.order[1]  # a disagreement on the second photo; the first stays for the review shot
    for user, action in (("alice", "original"), ("bob", "suggestion")):
        _, token = studio.open_card(user, image_id)
        studio.decide(user, token, image_id, action, note="the suggestion fits better" if user == "bob" else "")
    return studio


@contextmanager
def signed_in(url: str, user: str) -> Iterator[Page]:
    """A 1366×768 page of Debian's headless chromium on the studio at `url`, signed in as `user`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(30_000)
        page.goto(url)
        page.get_by_label("username").fill(user)
        page.get_by_label("password").fill(DEMO_PASSWORD)
        page.get_by_role("button", name="Login").click()
        try:
            yield page
        finally:
            browser.close()


def photograph(url: str, out: Path) -> None:
    with signed_in(url, "lena") as page:
        # a lead's Review card takes no card unasked: N asks for one
        page.wait_for_function(SIGNED_IN, arg="[data-mode=review]")
        page.locator("[data-mode=review]").focus()
        page.keyboard.press("n")
        page.wait_for_function(CARD_SHOWN, arg="[data-mode=review]")
        page.keyboard.press("/")
        page.keyboard.type("espresso")
        page.wait_for_function("() => document.querySelector('[data-mode=review] .rg-preview').textContent"
                               ".startsWith('Enter adds')")  # fmt: skip
        page.wait_for_timeout(300)
        page.screenshot(path=out / "review-card.png")
        page.keyboard.press("Escape")
        page.get_by_role("tab", name="Adjudicate").click()
        page.wait_for_function(CARD_SHOWN, arg="[data-mode=adjudicate]")
        page.wait_for_timeout(300)
        page.screenshot(path=out / "adjudication-card.png")


def picker(url: str, out: Path, query: str = "cat") -> Path:
    """The review card with the class picker open on `query` at 1366×768, as an annotator (alice) sees it: each
    result with its description and a reference thumbnail (the demo has one photo per class, so "cat" shows one:
    the Egyptian cat), written to `out`/img/picker.png."""
    target = out / "img" / "picker.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    with signed_in(url, "alice") as page:
        page.wait_for_function(CARD_SHOWN, arg="[data-mode=review]")
        page.keyboard.press("/")
        page.keyboard.type(query)
        page.wait_for_function("() => document.querySelector('[data-mode=review] .rg-preview').textContent"
                               ".startsWith('Enter adds')")  # fmt: skip
        page.wait_for_function("() => Array.from(document.querySelectorAll('[data-mode=review] .rg-results img'))"
                               ".every((i) => !i.dataset.thumbClass && (!i.src || i.complete))")  # fmt: skip
        page.wait_for_timeout(300)
        page.screenshot(path=target)
    return target


THUMBS_SHOWN = """() => {
  const imgs = Array.from(document.querySelectorAll('#grid-gallery img'));
  return imgs.length > 0 && imgs.every((i) => i.complete && i.naturalWidth > 0);
}"""


def grid(url: str, out: Path) -> Path:
    """The leads' Images tab at 1366×768 as the lead (lena) opens it: the demo's photos as thumbnails with their
    status, decisions and ImGT class, written to `out`/img/grid.png."""
    target = out / "img" / "grid.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    with signed_in(url, "lena") as page:
        page.get_by_role("tab", name="Images").click()
        page.wait_for_function(THUMBS_SHOWN)
        page.wait_for_timeout(300)
        page.screenshot(path=target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder for the PNG files")
    parser.add_argument("--port", type=int, default=7896)
    shots = ["cards", "picker", "grid"]
    parser.add_argument("--only", choices=shots, help="take one screenshot set only (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from ui.app import launch_app

    with tempfile.TemporaryDirectory(prefix="regt-shots-") as tmp:
        folder = Path(tmp)
        studio = build_demo(folder)
        app = launch_app(studio, port=args.port, exports_dir=folder / "exports", block=False)
        try:
            if args.only in (None, "cards"):
                photograph(f"http://127.0.0.1:{args.port}/", args.out)
                print(f"wrote {args.out / 'review-card.png'} and {args.out / 'adjudication-card.png'}")
            if args.only in (None, "picker"):
                print(f"wrote {picker(f'http://127.0.0.1:{args.port}/', args.out)}")
            if args.only in (None, "grid"):
                print(f"wrote {grid(f'http://127.0.0.1:{args.port}/', args.out)}")
        finally:
            app.close()


if __name__ == "__main__":
    main()
