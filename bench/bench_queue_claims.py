"""What sharing the review queue through the database costs per card (`relabel.review.leases.DbLeases`).

A dataset of `--images` images, each with `--votes` standing decisions by other annotators (so a claim reads a real
decision log), on a SQLite file and on the PostgreSQL server named by RELABEL_TEST_PG_URL (skipped when it cannot
be reached; a fresh schema, dropped afterwards). Timed, `--n` times each: a claim of a new image (the transaction
that locks the image, counts leases and standing decisions, and moves the user's lease), a pull when no decision is
new (what every card view asks first), and a whole `ReviewQueue.next_image` after a skip (pull, release of the
previous lease, claim of the next image). Prints the median, min and max in milliseconds, over `--repeats` fresh
databases pooled; `--write` replaces its section of BENCHMARKS.md.

Example:
  python bench/bench_queue_claims.py --n 200 --write
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from benchlib import command_line, machine_line, write_section
from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db import create_db_engine, init_db
from db.enums import ImageStatus, Role, SuggestionAction, Verdict
from db.models import Annotation, Dataset, Image, User, stored_id
from relabel.common.vocabulary import ensure_vocabulary, load_builtin
from relabel.review.leases import DbLeases
from relabel.review.queue import Evidence, ReviewQueue

SECTION = "## Review queue: leases shared by several studio processes"
PG_URL = os.environ.get("RELABEL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def populate(engine: Engine, n_images: int, votes: int) -> tuple[int, list[int]]:
    """A dataset of `n_images` readable images, `votes` decisions on each by users 2.., and the timed user (id 1)."""
    init_db(engine)
    with Session(engine) as s:
        vocab = ensure_vocabulary(s, load_builtin())
        ds = Dataset(name="bench", root="/nonexistent", vocabulary_id=stored_id(vocab))
        s.add(ds)
        s.add_all(User(name=f"user{i}", role=Role.annotator) for i in range(votes + 1))
        s.commit()
        dataset_id = stored_id(ds)
    with engine.begin() as conn:
        conn.execute(
            insert(Image),
            [
                {"dataset_id": dataset_id, "path": f"{i}.jpg", "stem": str(i), "status": ImageStatus.ok}
                for i in range(n_images)
            ],
        )
        image_ids = list(conn.execute(text("SELECT id FROM images ORDER BY id")).scalars())
        conn.execute(
            insert(Annotation),
            [
                {
                    "image_id": i,
                    "user_id": 2 + v,
                    "verdict": Verdict.labels,
                    "classes": [v % 3],
                    "flags": [],
                    "suggestion_action": SuggestionAction.none,
                }
                for i in image_ids
                for v in range(votes)
            ],
        )
    return dataset_id, image_ids


def timed(n: int, step: Callable[[int], object]) -> list[float]:
    out = []
    for k in range(n):
        start = time.perf_counter()
        step(k)
        out.append((time.perf_counter() - start) * 1000)
    return out


def measure(engine: Engine, n: int, n_images: int, votes: int) -> dict[str, list[float]]:
    dataset_id, image_ids = populate(engine, n_images, votes)
    leases = DbLeases(engine, dataset_id)
    user = 1
    results = {
        "claim (new image)": timed(n, lambda k: leases.claim(image_ids[k % n_images], user, votes + 1, 600.0)),
        "pull (nothing new)": timed(n, lambda k: leases.pull()),
    }
    queue = ReviewQueue(
        [Evidence(i, original=0) for i in image_ids], overlap=votes + 1, shared=DbLeases(engine, dataset_id)
    )

    def next_card(k: int) -> None:
        image_id = queue.next_image(user)
        assert image_id is not None, "the queue ran dry: give --images more than --n"
        queue.skip(image_id, user)

    results["next_image after a skip"] = timed(n, next_card)
    return results


def backends(skip_pg: bool) -> Iterator[tuple[str, str, Callable[[], None]]]:
    """(name, URL, clean-up) of each database to measure."""
    folder = Path(tempfile.mkdtemp(prefix="bench-claims-"))
    yield "SQLite", f"sqlite:///{folder / 'relabel.db'}", lambda: None
    if skip_pg:
        return
    admin = create_engine(PG_URL)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
    except Exception as exc:  # no server here: measure SQLite only
        print(f"PostgreSQL skipped: {str(exc).splitlines()[0]}")
        return

    def drop() -> None:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))

    yield "PostgreSQL", f"{PG_URL}?options=-csearch_path%3D{schema}", drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200, help="timed repeats of each step (default 200)")
    parser.add_argument("--images", type=int, default=1000, help="images in the dataset (default 1000)")
    parser.add_argument("--votes", type=int, default=2, help="other annotators' decisions per image (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="fresh databases per backend, pooled (default 1)")
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--write", action="store_true", help="replace this benchmark's section of BENCHMARKS.md")
    args = parser.parse_args()
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeats):
        for name, url, clean_up in backends(args.no_postgres):
            engine = create_db_engine(url)
            try:
                for step, ms in measure(engine, args.n, args.images, args.votes).items():
                    samples.setdefault((name, step), []).extend(ms)
            finally:
                engine.dispose()
                clean_up()
    lines = [
        SECTION,
        "",
        f"`{command_line()}`; {time.strftime('%Y-%m-%d')}; {machine_line()}",
        "",
        f"{args.images} images with {args.votes} standing decisions each; {args.n} of each step per database.",
        "",
        "| database | step | median ms | min | max |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {step} | {statistics.median(ms):.2f} | {min(ms):.2f} | {max(ms):.2f} |"
            for (name, step), ms in samples.items()
        ),
    ]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
