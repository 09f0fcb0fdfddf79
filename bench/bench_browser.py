"""The studio where an annotator meets it: key press to the next image on screen, in a real browser, against the
floor of its own stack measured in the same run.

Both apps run as servers on 127.0.0.1, each in its own process, and Debian's chromium (headless, driven by
Playwright) presses keys in them at 1366×768:

- the floor: a bare Gradio app that swaps photos on a key press (`bench/floor_app.py`), over the workspace's photos;
- the studio: `relabel serve` on a 50,000-image workspace with 150,000 decisions (`bench/studio_workspace.py`),
  one annotator pressing 1 ("original is right"): the decision is stored and the next card comes back.

Latency is measured in the page: from the key event's timestamp to the first animation frame in which the new
image is loaded (`complete`, `naturalWidth > 0`) in the card's <img>. Between key presses the script waits
`--dwell-ms` (an annotator looks at each card for at least that long; the same for both apps). Reported: p50 and
p95 over all cards, the medians of the first and the last third (flatness), the studio's p95 as a multiple of the
floor's, and what the page keeps (localStorage, DOM nodes) at the end.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_browser.py --cards 300 --write
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from benchlib import MET, REPO, SHARED, command_line, machine_line, write_section
from studio_workspace import N_IMAGES, PASSWORD, build

SECTION = "## Studio in the browser: key press to image on screen"
CHROMIUM = "/usr/bin/chromium"
OVERLAP = 5
VIEWPORT = {"width": 1366, "height": 768}
# Installed in the page before the first key press: records, for every key press, the time until a new card's
# image is loaded in the <img> under `image`, at the animation frame in which that is first true. A new card is a
# new `src` (the floor) or, given `card`, a new card key on that element (the studio: two cards may show the same
# file).
PROBE = """([image, card]) => {
  window.__latencies = [];
  let pressedAt = null, before = null;
  const state = () => {
    if (card) { const c = document.querySelector(card); return c ? c.dataset.key : null; }
    const img = document.querySelector(image);
    return img ? img.currentSrc || img.src : null;
  };
  document.addEventListener("keydown", (ev) => { pressedAt = ev.timeStamp; before = state(); }, true);
  const frame = () => {
    const img = document.querySelector(image);
    if (pressedAt !== null && img && img.src && state() && state() !== before && img.complete && img.naturalWidth > 0) {
      window.__latencies.push(performance.now() - pressedAt);
      pressedAt = null;
    }
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}"""
STORED = """() => Object.keys(localStorage)
  .reduce((n, k) => n + k.length + (localStorage.getItem(k) || "").length, 0)"""


def start(command: list[str], url: str, what: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"benchmark aborted: {what} exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"benchmark aborted: {what} did not start within 180 s")


def press_through(page: Any, image: str, key: str, cards: int, dwell_s: float, card: str | None = None) -> list[float]:
    """Press `key` `cards` times, each once the previous image is on screen and `dwell_s` has passed."""
    page.evaluate(PROBE, [image, card])
    for n in range(cards):
        time.sleep(dwell_s)
        page.keyboard.press(key)
        page.wait_for_function(f"window.__latencies.length > {n}", timeout=30_000)
    return [float(x) for x in page.evaluate("window.__latencies")]


def run_floor(browser: Any, url: str, cards: int, dwell_s: float) -> dict[str, Any]:
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.goto(url)
    page.wait_for_selector("#floor-next")
    page.keyboard.press("n")  # the first photo, not timed
    page.wait_for_function("() => { const i = document.querySelector('#floor-photo img'); return i && i.complete; }")
    latencies = press_through(page, "#floor-photo img", "n", cards, dwell_s)
    out = {"latencies": latencies, "stored": page.evaluate(STORED), "nodes": page.evaluate("document.all.length")}
    page.context.close()
    return out


def run_studio(browser: Any, url: str, cards: int, dwell_s: float) -> dict[str, Any]:
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(30_000)
    page.goto(url)
    page.get_by_label("username").fill("bench00")
    page.get_by_label("password").fill(PASSWORD)
    page.get_by_role("button", name="Login").click()
    page.wait_for_function(
        "() => { const r = document.querySelector('[data-mode=review]');"
        " const i = document.querySelector('#review-img');"
        " return r && r.dataset.key && i && i.complete && i.naturalWidth > 0; }"
    )
    latencies = press_through(page, "#review-img", "1", cards, dwell_s, card="[data-mode=review]")
    out = {"latencies": latencies, "stored": page.evaluate(STORED), "nodes": page.evaluate("document.all.length")}
    page.context.close()
    return out


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    third = len(latencies) // 3
    return {
        "p50": statistics.median(latencies),
        "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        "first": statistics.median(latencies[:third]),
        "last": statistics.median(latencies[-third:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cards", type=int, default=300, help="key presses per app (at least 30)")
    parser.add_argument("--dwell-ms", type=int, default=200, help="time on each card before the next key press")
    parser.add_argument("--port", type=int, default=7897)
    parser.add_argument("--keep", type=Path, help="build the workspace here and keep it (reused if present)")
    parser.add_argument("--write", action="store_true", help="write the section of BENCHMARKS.md")
    args = parser.parse_args()
    if args.cards < 30:
        raise SystemExit("--cards must be at least 30 (the report compares the first and the last third)")
    sample = SHARED / "imagenet-sample"
    if not sample.is_dir() or not Path(CHROMIUM).exists():
        raise SystemExit(f"benchmark aborted: needs {sample} and {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    machine = machine_line()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="browser-bench-"))
    procs: list[subprocess.Popen[str]] = []
    try:
        if not (folder / "relabel.db").exists():
            build(folder, sample, 1)
        relabel = str(Path(sys.executable).with_name("relabel"))
        studio_url, floor_url = f"http://127.0.0.1:{args.port}/", f"http://127.0.0.1:{args.port + 1}/"
        serve = [relabel, "--workspace", str(folder), "serve", "--overlap", str(OVERLAP), "--port", str(args.port)]
        procs.append(start(serve, studio_url, "the studio"))
        floor = [sys.executable, str(REPO / "bench" / "floor_app.py"), "--port", str(args.port + 1)]
        procs.append(start([*floor, "--photos", str(folder / "images" / "_src")], floor_url, "the floor app"))
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
                headless=True,
            )
            floor_run = run_floor(browser, floor_url, args.cards, args.dwell_ms / 1000)
            studio_run = run_studio(browser, studio_url, args.cards, args.dwell_ms / 1000)
            browser.close()
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    report(args, machine, floor_run, studio_run)


def report(args: argparse.Namespace, machine: str, floor: dict[str, Any], studio: dict[str, Any]) -> None:
    f, s = summary(floor["latencies"]), summary(studio["latencies"])
    ratio, flat = s["p95"] / f["p95"], s["last"] / s["first"]
    lines = [
        SECTION,
        "",
        f"- Command: `{command_line()}`",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine}; Debian chromium (headless) driven by Playwright at 1366×768, on the same 2 cores",
        f"- Studio: `relabel serve --overlap {OVERLAP}` on {N_IMAGES:,} images with 150,000 decisions (SQLite); one "
        f"annotator presses 1 on {len(studio['latencies'])} cards in a row, each decision stored and the next card "
        "returned in one request",
        f"- Floor: a bare Gradio app (`bench/floor_app.py`) that swaps the same photos on a key press, "
        f"{len(floor['latencies'])} presses; {args.dwell_ms} ms on each card before the next press, for both",
        "- Latency: from the key event to the first animation frame with the new image loaded in the card",
        "",
        "| app | p50 ms | p95 ms | first third (median) ms | last third (median) ms | last / first |",
        "|---|---:|---:|---:|---:|---:|",
        f"| floor (bare Gradio) | {f['p50']:.0f} | {f['p95']:.0f} | {f['first']:.0f} | {f['last']:.0f} | "
        f"{f['last'] / f['first']:.2f} |",
        f"| studio | {s['p50']:.0f} | {s['p95']:.0f} | {s['first']:.0f} | {s['last']:.0f} | {flat:.2f} |",
        "",
        "| measure | value | target | met |",
        "|---|---:|---|---|",
        f"| studio p95 / floor p95 | {ratio:.2f} | ≤ 1.5 | {MET[ratio <= 1.5]} |",
        f"| studio last third / first third | {flat:.2f} | ≤ 1.2 | {MET[flat <= 1.2]} |",
        f"| browser storage after the run (characters), studio / floor | {studio['stored']:,} / "
        f"{floor['stored']:,} | — | — |",
        f"| DOM elements after the run, studio / floor | {studio['nodes']:,} / {floor['nodes']:,} | — | — |",
    ]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
