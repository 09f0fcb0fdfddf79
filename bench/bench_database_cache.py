"""`relabel evaluate` on 50,000 images of a PostgreSQL workspace, which keeps what it derives in the user's cache
folder (`relabel.common.kept_arrays.cache_dir_of`: `$RELABEL_CACHE/databases/postgresql-DIGEST`).

Builds the workspace in a schema of its own on the server (dropped at the end): the 50,000 val images planned from
the built-in val labels (no pixels), real.json, a top-5 run and ReaL's 924,810 rater answers, then a Dawid-Skene
snapshot of them, each through `relabel` as a user runs it. Then, per repeat, the same evaluate three times:

- with the cache folder deleted: an evaluate with nothing kept (on a database server, every evaluate kept nothing
  before the user's cache folder served it);
- a workspace's first: the folder holds what the consensus snapshot kept (its arrays and the vote answers);
- again: everything read from the folder.

CPU seconds are those of the `relabel` process (user + system, `os.wait4`), not the server's; wall seconds include
the server's work and the round trips. Median of --repeats.

Example:
  python bench/bench_database_cache.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from bench_scale_cli import VAL, Step, run, timed, write_inputs
from benchlib import command_line, machine_line, write_section
from sqlalchemy import create_engine, text

TITLE = "## Evaluate on PostgreSQL: the user's cache folder"
DEFAULT_URL = os.environ.get("RELABEL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
EVALUATE = ["evaluate", "--run", "r50", "--reference", "imgt", "--reference", "snapshot:ds-1", "--no-report"]
KEPT_BY_SNAPSHOT = ("votes-", "snapshot-arrays-")  # what `snapshot create --consensus` keeps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=DEFAULT_URL, help="a PostgreSQL server's database (a schema is made there)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="replace this section of BENCHMARKS.md")
    args = parser.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc)
    machine = machine_line()
    schema = f"bench_cache_{uuid.uuid4().hex[:8]}"
    server = create_engine(args.url)
    with server.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        with tempfile.TemporaryDirectory() as folder:
            steps = measure(Path(folder), f"{args.url}?options=-csearch_path%3D{schema}", args.repeats)
    finally:
        with server.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        server.dispose()
    lines = [
        TITLE,
        "",
        f"`{command_line()}`, {started:%Y-%m-%d %H:%M} UTC; {machine}; PostgreSQL on the same machine.",
        "",
        "The 50,000 val images, one top-5 run, ReaL's 924,810 rater answers and a Dawid-Skene snapshot of them in a "
        "PostgreSQL schema; `relabel evaluate --run r50 --reference imgt --reference snapshot:ds-1 --no-report`. CPU "
        "seconds of the `relabel` process (the server's are not counted; wall seconds include them), median of "
        f"{args.repeats} (min, max).",
        "",
        "| evaluate | CPU s median | min | max | wall s median |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {s.name} | {statistics.median(s.cpu):.2f} | {min(s.cpu):.2f} | {max(s.cpu):.2f} | "
            f"{statistics.median(s.wall):.2f} |"
            for s in steps
        ),
    ]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(TITLE, section)


def measure(tmp: Path, url: str, repeats: int) -> list[Step]:
    """Build the workspace at `url` and time the three evaluates `repeats` times."""
    os.environ["RELABEL_DB"], os.environ["RELABEL_CACHE"] = url, str(tmp / "user-cache")
    top5, _, _ = write_inputs(tmp)
    ws = tmp / "ws"
    ws.mkdir()
    for step in (
        ["init"],
        ["ingest", str(tmp / "not-mounted"), "--layout", "imagenet-val", "--dataset", "val", "--quiet"],
        ["labels", "import", str(VAL / "real.json"), "--format", "real"],
        ["predictions", "import", str(top5), "--run", "r50"],
        ["votes", "import", str(VAL / "real_raters.npz"), "--format", "real-raters", "--name", "real-raters"],
        ["snapshot", "create", "ds-1", "--consensus", "ds", "--votes", "real-raters", "--no-studio-votes", "--quiet"],
    ):
        cpu, wall, _ = run(ws, step)
        print(f"relabel {' '.join(step[:2])}: {cpu:.2f} s CPU, {wall:.2f} s wall", file=sys.stderr)
    (cache,) = (tmp / "user-cache" / "databases").iterdir()
    bare = Step("with the cache folder deleted (nothing kept)", "")
    first = Step("a workspace's first (what the consensus snapshot kept: its arrays, the vote answers)", "")
    again = Step("again (everything read from the cache folder)", "")
    kept = tmp / "kept-by-snapshot"
    kept.mkdir()
    for path in cache.iterdir():
        if path.name.startswith(KEPT_BY_SNAPSHOT):
            shutil.copy2(path, kept / path.name)
    for _ in range(repeats):
        shutil.rmtree(cache)
        timed(bare, ws, EVALUATE)
        shutil.rmtree(cache)
        shutil.copytree(kept, cache)
        timed(first, ws, EVALUATE)
        timed(again, ws, EVALUATE)
    return [bare, first, again]


if __name__ == "__main__":
    main()
