"""`relabel decisions import` on many images: a CSV of two annotators' label sets for N images, stored through the
studio's decision check in one transaction, then the same file again (every row already stored: nothing written).

The workspace is the studio test workspace (six photos, annotators alice and bob) with N more image rows added
straight into the images table (no files: the import reads only the database). Timings are the import call alone;
the median of the repeats, each on a fresh workspace.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_decision_import.py --images 25000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.engine import Engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db.models import Image  # noqa: E402
from relabel.interop.decisions import import_decisions  # noqa: E402
from tests.studio_workspace import build_workspace  # noqa: E402

LABEL_SETS = (("alice", "tabby;n02123159"), ("bob", "281"))  # a name and a wnid; an index


def workspace(folder: Path, n: int) -> tuple[Engine, Path]:
    """The studio test workspace with `n` more images, and a CSV of a decision by each annotator on each."""
    engine = build_workspace(folder)
    with engine.begin() as conn:
        base = dict(conn.execute(select(Image.__table__)).mappings().first() or {})
        base.pop("id")
        rows = [{**base, "path": f"bulk/{i:06d}.jpg", "stem": f"{i:06d}", "sha256": f"{i:064x}"} for i in range(n)]
        conn.execute(insert(Image.__table__), rows)
    csv = folder / "decisions.csv"
    lines = ["image,user,classes"] + [f"bulk/{i:06d}.jpg,{u},{c}" for i in range(n) for u, c in LABEL_SETS]
    csv.write_text("\n".join(lines) + "\n")
    return engine, csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=25_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    first, again = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="bench-decisions-") as tmp:
            engine, csv = workspace(Path(tmp), args.images)
            start = time.perf_counter()
            r = import_decisions(engine, csv, fmt="csv", show_progress=False)
            first.append(time.perf_counter() - start)
            assert r.stored == 2 * args.images and r.users == 2, r
            start = time.perf_counter()
            r = import_decisions(engine, csv, fmt="csv", show_progress=False)
            again.append(time.perf_counter() - start)
            assert r.stored == 0 and r.already == 2 * args.images, r
            engine.dispose()
    n = 2 * args.images
    for name, seconds in (("first import", first), ("same file again (nothing stored)", again)):
        median = statistics.median(seconds)
        print(
            f"| {name} | {n:,} decisions | {median:.2f} s | {min(seconds):.2f} | {max(seconds):.2f} | "
            f"{n / median:,.0f}/s |"
        )


if __name__ == "__main__":
    main()
