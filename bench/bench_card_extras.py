"""What the card's reference thumbnails and the user's day cost per reply, on the 50,000-image studio workspace.

Builds the workspace of bench/bench_studio.py (50,000 images, 150,000 decisions, SQLite) and calls the review
card's server functions in-process, as the page does: "next" plain (`ui.card_component.card_handlers`) and as the
studio serves it (`ui.card_component.handlers`: the top-5's thumbnail addresses, the "left for you · decided
today" counts and the image's comments), alternating, one annotator deciding as they go ("decide" answers with
the next card; the SQL statements it runs are counted, from SQLAlchemy's `before_cursor_execute`, with those of
the background prefetch it starts); the picker's search with its thumbnail addresses; `thumbs` for a search's 12
classes cold (resized now) and warm; and `recent`.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_card_extras.py --rounds 200 --write
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import event, update

from bench.benchlib import SHARED, command_line, machine_line, write_section
from bench.studio_workspace import N_IMAGES, build
from db.models import Annotation
from relabel.review.studio import Studio
from ui.card_component import card_handlers, handlers

SECTION = "## Studio: the card's reference thumbnails and the user's day"
QUERIES = ("cat", "dog", "mouse", "car", "cup", "bird", "fish", "tiger", "boxer", "notebook")


def timed(samples: list[float], fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), its time in milliseconds appended to `samples`."""
    t = time.perf_counter()
    result = fn(*args)
    samples.append((time.perf_counter() - t) * 1000)
    return result


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(samples):.1f} | {p95:.1f} | {len(samples)}"


def run(folder: Path, rounds: int) -> dict[str, list[float]]:
    engine = build(folder, SHARED / "imagenet-sample", 2)
    with engine.begin() as conn:  # the past decisions were made before today: today's are the benchmark's own
        conn.execute(update(Annotation).values(created_at=datetime.now(timezone.utc) - timedelta(days=1)))
    studio = Studio(engine, cache_dir=folder / "cache", overlap=5)
    plain = card_handlers(studio, "review")
    full = handlers(studio, "review")  # as the studio serves them
    names = ("plain", "full", "decide", "statements", "search", "cold", "warm", "recent")
    out: dict[str, list[float]] = {k: [] for k in names}
    statements = [0]
    event.listen(engine, "before_cursor_execute", lambda *_: statements.__setitem__(0, statements[0] + 1))
    user = "bench00"
    for k in range(rounds):
        timed(out["plain"], plain["next"], studio, user, {})
        card = timed(out["full"], full["next"], studio, user, {})["card"]
        studio._prefetch.submit(lambda: None).result()  # the prefetch of the card before is done
        statements[0] = 0
        timed(out["decide"], full["decide"], studio, user, {"key": card["key"], "action": "original"})
        studio._prefetch.submit(lambda: None).result()  # and the one this decision started
        out["statements"].append(statements[0])
        found = timed(out["search"], full["search"], studio, user, {"query": QUERIES[k % len(QUERIES)]})
        ask = {"classes": [m["index"] for m in found["matches"]], "exclude": card["image_id"]}
        if k < len(QUERIES):  # the first time a query's classes are asked for: resized now
            timed(out["cold"], full["thumbs"], studio, user, ask)
        timed(out["warm"], full["thumbs"], studio, user, ask)
        timed(out["recent"], full["recent"], studio, user, {})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--write", action="store_true", help="write the section of BENCHMARKS.md")
    args = parser.parse_args()
    if not (SHARED / "imagenet-sample").is_dir():
        raise SystemExit(f"benchmark aborted: {SHARED / 'imagenet-sample'} not found")
    machine = machine_line()
    folder = Path(tempfile.mkdtemp(prefix="card-extras-bench-"))
    try:
        out = run(folder, args.rounds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = [
        ("next card, plain", out["plain"]),
        ("next card as served: top-5 thumbnail addresses, day counts, comments", out["full"]),
        ("decision, answered with the next card as served", out["decide"]),
        ("picker search (12 results) with thumbnail addresses", out["search"]),
        ("thumbs for a search's classes, cold (resized now)", out["cold"]),
        ("thumbs for a search's classes, warm", out["warm"]),
        ("recent decisions (last 20)", out["recent"]),
    ]
    section = "\n".join(
        [
            SECTION,
            "",
            f"- Command: `{command_line()}`",
            f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
            f"- Machine: {machine}",
            f"- Workspace: bench/bench_studio.py's {N_IMAGES:,} images and 150,000 decisions on SQLite, overlap 5; "
            "the past decisions dated yesterday; one annotator, in-process, plain and full next card alternating, "
            "deciding each card",
            "",
            "| operation | p50 ms | p95 ms | n |",
            "|---|---:|---:|---:|",
            *[f"| {name} | {ms(samples)} |" for name, samples in rows],
            "",
            f"SQL statements per decision (with the next card as served): median {statistics.median(out['statements'])}"
            f", max {max(out['statements'])} over {len(out['statements'])} decisions.",
            "",
        ]
    )
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
