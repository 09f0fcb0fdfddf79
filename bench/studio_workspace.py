"""A 50,000-image studio workspace with 150,000 decisions, built by bulk inserts for the studio benchmark.

Images: the 1000 sample photos, hard-linked 50 times each under one dataset root, each row with the sha256 of its
file (the studio checks it before showing an image). The first `DISTINCT` images in review order are made
distinct instead: a copy of the photo with a few unique bytes after its end, so every card a benchmark shows has a
file, a hash and a cached display copy of its own (no browser- or display-cache hits from a repeated photo).
Labels: the built-in ImageNet val labels as ImGT. Runs: a top-5 classifier run and an open-world MLLM run whose
top-1 disagrees with ImGT on ~20 % of the images. Decisions: 10 past annotators, 3 per image (150,000), agreeing
on ~80 % of the images.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import uuid
from pathlib import Path

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine

from db import create_db_engine, init_db
from db.enums import ImageStatus, PredictionStatus, Role, SourceKind, SuggestionAction, Verdict
from db.models import Annotation, Dataset, Image, Label, LabelSource, ModelRun, Prediction, User
from relabel.common.vocabulary import ensure_vocabulary, load_builtin
from relabel.decisions.annotations import hash_password
from relabel.ingest.layouts import builtin_val_labels

N_IMAGES = 50_000
PAST_ANNOTATORS = 10
VOTES_PER_IMAGE = 3
PASSWORD = "bench"
CHUNK = 10_000
DISTINCT = 6000  # images made distinct, from the top of the review order: more than any benchmark reviews


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def link_photos(sample: Path, root: Path, n: int) -> list[str]:
    """`n` file names under `root`, hard links to the sample photos in turn (copies if links are refused)."""
    photos = sorted(sample.glob("*.JPEG"))[:1000]
    root.mkdir(parents=True, exist_ok=True)
    local = root / "_src"
    local.mkdir(exist_ok=True)
    for p in photos:
        if not (local / p.name).exists():
            shutil.copyfile(p, local / p.name)
    names = []
    for i in range(n):
        src = local / photos[i % len(photos)].name
        name = f"ILSVRC2012_val_{i + 1:08d}.JPEG"
        dest = root / name
        if not dest.exists():
            try:
                os.link(src, dest)
            except OSError:
                shutil.copyfile(src, dest)
        names.append(name)
    return names


def build(folder: Path, sample: Path, n_users: int, seed: int = 0) -> Engine:
    """The workspace in `folder` (relabel.db + images/); `n_users` fresh annotators bench00.. plus lead `lead`."""
    rng = random.Random(seed)
    vocab = load_builtin()
    truth = builtin_val_labels()
    names = link_photos(sample, folder / "images", N_IMAGES)
    hashes = {name: sha256_of(folder / "images" / name) for name in names[:1000]}  # the photos repeat in turn
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    with engine.begin() as conn:
        from sqlmodel import Session

        with Session(bind=conn) as s:
            vocab_row = ensure_vocabulary(s, vocab)
            ds = Dataset(name="val", root=str((folder / "images").resolve()), vocabulary_id=vocab_row.id)
            s.add(ds)
            s.flush()
            dataset_id = ds.id
            s.commit()
        conn.execute(
            insert(Image),
            [
                {
                    "dataset_id": dataset_id,
                    "path": n,
                    "stem": n[:-5],
                    "status": ImageStatus.ok,
                    "sha256": hashes[names[k % 1000]],
                    "width": 500,
                    "height": 375,
                    "format": "JPEG",
                    "mode": "RGB",
                    "reason": "",
                    "notes": "",
                }
                for k, n in enumerate(names)
            ],
        )
        image_ids = list(range(1, N_IMAGES + 1))
        imgt = _source(conn, dataset_id, "imgt", SourceKind.original)
        originals = [truth[i] for i in range(N_IMAGES)]
        _bulk(conn, Label, [{"source_id": imgt, "image_id": i, "classes": [c]} for i, c in zip(image_ids, originals)])
        suggestion = _predictions(conn, dataset_id, image_ids, originals, rng)
        _users(conn, n_users)
        _decisions(conn, image_ids, originals, suggestion, rng)
    make_distinct(engine, folder / "images", DISTINCT)
    return engine


def make_distinct(engine: Engine, root: Path, n: int) -> None:
    """Give the first `n` images in review order a file and a hash of their own: a copy of the photo with the
    image id appended after the JPEG's end (browsers and Pillow ignore bytes after the end-of-image marker)."""
    import tempfile

    from relabel.review.studio import Studio

    with tempfile.TemporaryDirectory() as cache:
        order = Studio(engine, cache_dir=Path(cache)).queue.order[:n]
    with engine.begin() as conn:
        paths = dict(conn.execute(select(Image.id, Image.path).where(Image.id.in_(order))).all())  # type: ignore[attr-defined]
        for image_id in order:
            path = root / paths[image_id]
            data = path.read_bytes() + f"distinct-{image_id}".encode()
            path.unlink()  # a hard link: replace it, leave the shared photo alone
            path.write_bytes(data)
            digest = hashlib.sha256(data).hexdigest()
            conn.execute(update(Image).where(Image.id == image_id).values(sha256=digest, bytes=len(data)))


def _source(conn, dataset_id: int, name: str, kind: SourceKind) -> int:  # type: ignore[no-untyped-def]
    return conn.execute(
        insert(LabelSource).values(dataset_id=dataset_id, name=name, kind=kind, format="bench", n_labels=N_IMAGES)
    ).inserted_primary_key[0]


def _bulk(conn, table, rows: list[dict]) -> None:  # type: ignore[no-untyped-def]
    for start in range(0, len(rows), CHUNK):
        conn.execute(insert(table), rows[start : start + CHUNK])


def _predictions(conn, dataset_id: int, ids: list[int], originals: list[int], rng: random.Random) -> dict[int, int]:  # type: ignore[no-untyped-def]
    """A top-5 classifier run and an OW run; returns the OW top-1 per image (wrong on ~20 %)."""
    topk = conn.execute(
        insert(ModelRun).values(
            dataset_id=dataset_id,
            name="efficientnet-lite0@topk",
            model="efficientnet-lite0",
            protocol="topk",
            params={},
        )
    ).inserted_primary_key[0]
    ow = conn.execute(
        insert(ModelRun).values(
            dataset_id=dataset_id, name="openai:gpt-4o@ow", model="gpt-4o", protocol="ow", params={}
        )
    ).inserted_primary_key[0]
    top1: dict[int, int] = {}
    cls_rows, ow_rows = [], []
    for i, c in zip(ids, originals):
        wrong = rng.random() < 0.2
        first = rng.randrange(1000) if wrong else c
        top1[i] = first
        others = [x for x in rng.sample(range(1000), 6) if x != first][:4]
        p = rng.uniform(0.3, 0.95)
        cls_rows.append(
            {
                "run_id": topk,
                "image_id": i,
                "classes": [first, *others],
                "scores": [p, *[(1 - p) / 4] * 4],
                "status": PredictionStatus.ok,
                "raw_output": "",
                "reason": "",
            }
        )
        ow_rows.append(
            {
                "run_id": ow,
                "image_id": i,
                "classes": [first],
                "raw_output": f"a photo of class {first}",
                "status": PredictionStatus.ok,
                "reason": "",
                "details": {"mapped": True, "similarity": 0.8},
            }
        )
    _bulk(conn, Prediction, cls_rows)
    _bulk(conn, Prediction, ow_rows)
    return top1


def _users(conn, n_users: int) -> None:  # type: ignore[no-untyped-def]
    digest = hash_password(PASSWORD)  # one hash for all: scrypt per user would dominate the build
    rows = [{"name": f"past{k:02d}", "role": Role.annotator, "password_hash": digest} for k in range(PAST_ANNOTATORS)]
    rows += [{"name": f"bench{k:02d}", "role": Role.annotator, "password_hash": digest} for k in range(n_users)]
    rows.append({"name": "lead", "role": Role.lead, "password_hash": digest})
    conn.execute(insert(User), rows)


def _decisions(conn, ids: list[int], originals: list[int], suggestion: dict[int, int], rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    rows = []
    for i, c in zip(ids, originals):
        voters = rng.sample(range(1, PAST_ANNOTATORS + 1), VOTES_PER_IMAGE)
        disagree = rng.random() < 0.2
        for k, u in enumerate(voters):
            choice = [suggestion[i]] if (disagree and k == 0) else [c]
            rows.append(
                {
                    "image_id": i,
                    "user_id": u,
                    "verdict": Verdict.labels,
                    "classes": choice,
                    "flags": [],
                    "note": "",
                    "seconds_on_item": rng.uniform(2, 20),
                    "is_adjudication": False,
                    "suggestion_action": SuggestionAction.accepted
                    if choice == [suggestion[i]]
                    else SuggestionAction.rejected,
                    "client_token": uuid.UUID(int=rng.getrandbits(128)).hex,
                }
            )
    _bulk(conn, Annotation, rows)
