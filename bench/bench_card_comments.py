"""What the comments on every card reply, the comment key (O) and the guidelines key (G) cost, on the 50,000-image
studio workspace.

Builds the workspace of bench/bench_studio.py (50,000 images, 150,000 decisions, SQLite), adds 20,000 comments on
random images and guidelines of about 20 KiB, and calls the review card's server functions in-process, as the page
does: "next" without the comments (`ui.card_extras.extend` over `ui.card_component.card_handlers`) and with them
(`ui.card_component.handlers`), alternating, one annotator deciding as they go; "comment" on the open card; and
"guidelines".

Example:
  HF_HUB_OFFLINE=1 python bench/bench_card_comments.py --rounds 200 --write
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: the repository's packages

from sqlalchemy import insert, select  # noqa: E402
from sqlmodel import col  # noqa: E402

from bench.benchlib import SHARED, command_line, machine_line, write_section  # noqa: E402
from bench.studio_workspace import N_IMAGES, build  # noqa: E402
from db.models import Image, ImageComment, User, utcnow  # noqa: E402
from relabel.review.guidelines import save_guidelines  # noqa: E402
from relabel.review.studio import Studio  # noqa: E402
from ui import card_extras  # noqa: E402
from ui.card_component import card_handlers, handlers  # noqa: E402

SECTION = "## Studio: comments on the card and the guidelines"
N_COMMENTS = 20_000
GUIDELINE_LINES = 400  # about 20 KiB of Markdown


def timed(samples: list[float], fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), its time in milliseconds appended to `samples`."""
    t = time.perf_counter()
    result = fn(*args)
    samples.append((time.perf_counter() - t) * 1000)
    return result


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(samples):.2f} | {p95:.2f} | {len(samples)}"


def add_comments(studio: Studio, n: int) -> None:
    rng = random.Random(0)
    with studio.engine.begin() as conn:
        images = list(conn.execute(select(col(Image.id))).scalars())
        users = list(conn.execute(select(col(User.id))).scalars())
        rows = [{"image_id": rng.choice(images), "user_id": rng.choice(users), "text": f"comment {k}: cut off?",
                 "created_at": utcnow()} for k in range(n)]  # fmt: skip
        conn.execute(insert(ImageComment), rows)
    lines = [f"## Rule {k}\n- **class {k}**: what counts and what does not, with an example" for k in range(400)]
    save_guidelines(studio.engine, "\n".join(lines), author="lead")


def run(folder: Path, rounds: int) -> dict[str, list[float]]:
    studio = Studio(build(folder, SHARED / "imagenet-sample", 2), cache_dir=folder / "cache", overlap=5)
    add_comments(studio, N_COMMENTS)
    plain = card_extras.extend(studio, "review", card_handlers(studio, "review"))
    full = handlers(studio, "review")
    out: dict[str, list[float]] = {k: [] for k in ("plain", "full", "comment", "guidelines")}
    user = "bench00"
    for k in range(rounds):
        timed(out["plain"], plain["next"], studio, user, {})
        card = timed(out["full"], full["next"], studio, user, {})["card"]
        timed(out["comment"], full["comment"], studio, user, {"key": card["key"], "text": f"bench comment {k}"})
        timed(out["guidelines"], full["guidelines"], studio, user, {})
        full["decide"](studio, user, {"key": card["key"], "action": "original"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--write", action="store_true", help="write the section of BENCHMARKS.md")
    args = parser.parse_args()
    if not (SHARED / "imagenet-sample").is_dir():
        raise SystemExit(f"benchmark aborted: {SHARED / 'imagenet-sample'} not found")
    machine = machine_line()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    folder = Path(tempfile.mkdtemp(prefix="card-comments-bench-"))
    try:
        out = run(folder, args.rounds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = [
        ("next card, without comments", out["plain"]),
        ("next card, with the image's comments (one indexed query)", out["full"]),
        ("comment on the open card (store, then the image's comments)", out["comment"]),
        ("guidelines (about 20 KiB, parsed into blocks)", out["guidelines"]),
    ]
    table = "\n".join(f"| {name} | {ms(samples)} |" for name, samples in rows)
    section = (
        f"{SECTION}\n\n- Command: `{command_line()}`\n- Date: {started}\n- Machine: {machine}\n"
        f"- Workspace: {N_IMAGES:,} images (bench/studio_workspace.py), {N_COMMENTS:,} comments on random images, "
        "SQLite; server functions called in-process\n\n"
        f"| call | median ms | p95 ms | calls |\n|---|---:|---:|---:|\n{table}\n"
    )
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
