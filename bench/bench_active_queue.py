"""Active review queue benchmark: building the queue by expected benefit on a 50,000-image workspace.

The workspace (SQLite in a temporary folder, rows only: no pixels are read) holds 50,000 images with ImGT labels,
--runs stored runs of top-5 predictions on every image (each wrong on ~25 %, 1 % failed), and a vote-based
snapshot with posteriors on 25,000 images, 7 pairs each (175,000, about ReaL's 184,962): most within 0.0001 to 0.01
of 0 or 1, one pair in (0.1, 0.9) on 37 % of the voted images (the share of ReaL's rated images a ds snapshot leaves
uncertain). Timed, median of --repeats:

(a) `load_benefit`: the snapshot's posteriors and every run's top-1 read, `relabel.review.active.review_benefit`;
(b) the queue as the studio builds it at start and on refresh (`load_benefit`, `load_evidence`, `ReviewQueue`),
    beside the evidence order alone (no vote-based snapshot read);
(c) `relabel queue --limit 20` (`relabel.review.upcoming.list_queue`).

Example:
  python bench/bench_active_queue.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from benchlib import REPO, command_line, machine_line, write_section

sys.path.insert(0, str(REPO))

from sqlalchemy import insert  # noqa: E402
from sqlalchemy.engine import Engine  # noqa: E402
from sqlmodel import Session  # noqa: E402

from db import create_db_engine, init_db  # noqa: E402
from db.enums import Category, ImageStatus, PredictionStatus, SourceKind  # noqa: E402
from db.models import (  # noqa: E402
    Dataset,
    Image,
    Label,
    LabelSource,
    ModelRun,
    Prediction,
    Snapshot,
    SnapshotLabel,
    SnapshotPosterior,
)
from relabel.common.vocabulary import ensure_vocabulary, load_builtin  # noqa: E402
from relabel.review.benefit import load_benefit  # noqa: E402
from relabel.review.cards import pick_runs  # noqa: E402
from relabel.review.evidence import load_evidence  # noqa: E402
from relabel.review.queue import ReviewQueue  # noqa: E402
from relabel.review.upcoming import list_queue  # noqa: E402

TITLE = "## Studio: the active review queue on 50,000 images"
N_IMAGES, N_VOTED, PAIRS, UNCERTAIN_SHARE = 50_000, 25_000, 7, 0.37
CHUNK = 20_000


def build(folder: Path, n_runs: int, seed: int = 0) -> Engine:
    rng = np.random.default_rng(seed)
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    original = rng.integers(0, 1000, N_IMAGES)
    with engine.begin() as conn:
        with Session(bind=conn) as s:
            ds = Dataset(name="val", root=str(folder), vocabulary_id=ensure_vocabulary(s, load_builtin()).id)
            s.add(ds)
            s.flush()
            s.commit()
        bulk(conn, Image, [
            {"dataset_id": 1, "path": f"ILSVRC2012_val_{i:08d}.JPEG", "stem": f"ILSVRC2012_val_{i:08d}",
             "status": ImageStatus.ok, "reason": "", "notes": ""}
            for i in range(1, N_IMAGES + 1)
        ])  # fmt: skip
        imgt = conn.execute(
            insert(LabelSource).values(dataset_id=1, name="imgt", kind=SourceKind.original, format="bench")
        ).inserted_primary_key[0]
        bulk(conn, Label, [{"source_id": imgt, "image_id": i + 1, "classes": [int(c)]} for i, c in enumerate(original)])
        for r in range(n_runs):
            run = conn.execute(
                insert(ModelRun).values(dataset_id=1, name=f"model{r:02d}@topk", model=f"model{r:02d}",
                                        protocol="topk", params={})
            ).inserted_primary_key[0]  # fmt: skip
            wrong = rng.random(N_IMAGES) < 0.25
            top1 = np.where(wrong, rng.integers(0, 1000, N_IMAGES), original)
            failed = rng.random(N_IMAGES) < 0.01
            bulk(conn, Prediction, [
                {"run_id": run, "image_id": i + 1, "classes": [] if failed[i] else [int(top1[i]), *map(int, rest)],
                 "scores": None, "status": PredictionStatus.error if failed[i] else PredictionStatus.ok,
                 "reason": "timeout" if failed[i] else "", "raw_output": ""}
                for i, rest in enumerate(rng.integers(0, 1000, (N_IMAGES, 4)))
            ])  # fmt: skip
        snap = conn.execute(
            insert(Snapshot).values(dataset_id=1, name="ds", content_hash="bench", base_source="imgt",
                                    undecided_policy="keep", n_images=N_IMAGES, counts={},
                                    consensus={"rule": "ds", "threshold": 0.9})
        ).inserted_primary_key[0]  # fmt: skip
        voted = np.sort(rng.choice(np.arange(1, N_IMAGES + 1), N_VOTED, replace=False))
        uncertain = rng.random(N_VOTED) < UNCERTAIN_SHARE
        rows = []
        for k, image_id in enumerate(voted.tolist()):
            classes = [int(original[image_id - 1]), *(int(c) for c in rng.choice(1000, PAIRS + 1, replace=False))]
            classes = list(dict.fromkeys(classes))[:PAIRS]
            doubt = 10.0 ** rng.uniform(-4, -2, PAIRS)  # a settled pair: 0.0001 to 0.01 from 0 or 1
            probs = np.where(rng.random(PAIRS) < 0.2, 1 - doubt, doubt)
            probs[0] = 1 - doubt[0]
            if uncertain[k]:
                probs[rng.integers(PAIRS)] = rng.uniform(0.1, 0.9)
            rows += [{"snapshot_id": snap, "image_id": image_id, "class_index": c, "posterior": float(p)}
                     for c, p in zip(classes, probs)]  # fmt: skip
        bulk(conn, SnapshotPosterior, rows)
        bulk(conn, SnapshotLabel, [
            {"snapshot_id": snap, "image_id": int(i), "classes": [], "category": Category.U if u else Category.A,
             "origin": "uncertain" if u else "consensus"}
            for i, u in zip(voted, uncertain)
        ])  # fmt: skip
    return engine


def bulk(conn, table, rows: list[dict]) -> None:  # type: ignore[no-untyped-def]
    for start in range(0, len(rows), CHUNK):
        conn.execute(insert(table), rows[start : start + CHUNK])


def timed(fn: Callable[[], object], repeats: int) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def stats(times: list[float]) -> str:
    return f"median {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10, help="Stored runs of top-5 predictions.")
    parser.add_argument("--write", action="store_true", help="Rewrite this section of BENCHMARKS.md.")
    args = parser.parse_args()
    machine = machine_line()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        engine = build(Path(tmp), args.runs)
        built = time.perf_counter() - t0

        def benefit() -> object:
            with engine.connect() as conn:
                return load_benefit(conn, 1)

        def queue(with_benefit: bool = True) -> ReviewQueue:
            with engine.connect() as conn:
                b = load_benefit(conn, 1) if with_benefit else None
                return ReviewQueue(load_evidence(conn, 1, pick_runs(conn, 1, None, None), b))

        benefit_times, b = timed(benefit, args.repeats)
        queue_times, q = timed(queue, args.repeats)
        plain_times, _ = timed(lambda: queue(False), args.repeats)
        listing_times, listing = timed(lambda: list_queue(engine, limit=20), args.repeats)
        ranked = sum(e.benefit is not None and e.benefit >= 0.05 for e in q.evidence.values())  # type: ignore[attr-defined]
        first = listing.entries[0]  # type: ignore[attr-defined]
    lines = [
        TITLE,
        "",
        f"{datetime.date.today()}; `{command_line()}`; {machine}.",
        "",
        f"Workspace (rows only, built in {built:.0f} s): {N_IMAGES:,} images, {args.runs} runs of top-5 predictions "
        f"(1 % failed), a vote-based snapshot with {N_VOTED * PAIRS:,} posteriors on {N_VOTED:,} images "
        f"({UNCERTAIN_SHARE * 100:.0f} % with a pair in (0.1, 0.9)); {ranked:,} images ranked by benefit, the rest by "
        f"evidence. {args.repeats} runs each:",
        "",
        f"- (a) `load_benefit` (posteriors, {len(b.runs)} runs' top-1, `review_benefit`): {stats(benefit_times)};",  # type: ignore[attr-defined]
        f"- (b) the studio's queue (benefit, evidence, order): {stats(queue_times)}; the evidence order alone: "
        f"{stats(plain_times)};",
        f"- (c) `relabel queue --limit 20`: {stats(listing_times)}; first: benefit {first.benefit:.2f}, "
        f'"{first.reason}".',
    ]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
