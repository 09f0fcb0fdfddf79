"""A small studio workspace for tests: photos with ImGT labels, a classifier run, a prior relabel and users,
and a way to serve it on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import insert
from sqlalchemy.engine import Engine

from db import create_db_engine, init_db
from db.enums import PredictionStatus, Role
from db.models import ModelRun, Prediction
from relabel.annotations import add_user
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.review.studio import Studio
from relabel.sources import import_source
from relabel.vocabulary import load_builtin
from relabel.workspace import get_dataset, image_index
from tests import images

PASSWORD = "pw-for-tests"
# wnid-prefixed files: the original label comes from the name
FILES = [
    "n02123045_tabby.jpg",  # tabby cat
    "n07920052_espresso.jpg",
    "n03773504_missile.jpg",
    "n01440764_tench.jpg",
    "n02124075_egyptian.jpg",
    "n04266014_shuttle.jpg",
]
CLASSIFIER = {  # top-3 (class index, probability) per file
    "n02123045_tabby.jpg": [(281, 0.7), (282, 0.2), (285, 0.05)],
    "n07920052_espresso.jpg": [(968, 0.6), (967, 0.3), (504, 0.05)],  # cup, espresso: original is 2nd
    "n03773504_missile.jpg": [(744, 0.8), (657, 0.1), (812, 0.05)],  # projectile over missile
    "n01440764_tench.jpg": [(0, 0.9), (1, 0.05), (2, 0.01)],
    "n02124075_egyptian.jpg": [(285, 0.5), (281, 0.3), (282, 0.1)],
    "n04266014_shuttle.jpg": [(812, 0.9), (744, 0.05), (657, 0.01)],
}


def build_workspace(folder: Path, url: str | None = None) -> Engine:
    """Photos, ImGT from file names, a top-3 classifier run, a ReaL-style prior, users alice/bob (annotators)
    and lena (lead), all with PASSWORD."""
    vocab = load_builtin()
    root = folder / "photos"
    for i, name in enumerate(FILES):
        images.photo(root / name, (80 + 8 * i, 60), (30 * i, 120, 200 - 30 * i))
    engine = create_db_engine(url or f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    ingest_dataset(
        engine, plan_ingest(root, vocab), dataset="photos", root=root, vocab=vocab, show_progress=False, workers=1
    )
    from sqlmodel import Session

    with Session(engine) as s:
        ds = get_dataset(s, "photos")
        ids = image_index(s, ds).ids_by_path
        run = ModelRun(
            dataset_id=ds.id, name="efficientnet-lite0@topk", model="efficientnet-lite0", protocol="topk", params={}
        )
        s.add(run)
        s.flush()
        s.execute(
            insert(Prediction),
            [
                {
                    "run_id": run.id,
                    "image_id": ids[name],
                    "classes": [c for c, _ in top],
                    "scores": [p for _, p in top],
                    "status": PredictionStatus.ok,
                    "raw_output": "",
                    "reason": "",
                }
                for name, top in CLASSIFIER.items()
            ],
        )
        s.commit()
    prior = folder / "real.csv"
    prior.write_text("image,labels\nn07920052_espresso.jpg,n07930864\nn03773504_missile.jpg,n04008634\n")
    import_source(engine, prior, name="real", fmt="csv")
    for name, role in (("alice", Role.annotator), ("bob", Role.annotator), ("lena", Role.lead)):
        add_user(engine, name, role, PASSWORD)
    return engine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(studio: Studio, exports: Path) -> Iterator[str]:
    """The studio launched on a free port of 127.0.0.1; yields its URL."""
    from ui.app import launch_app

    port = free_port()
    app = launch_app(studio, port=port, exports_dir=exports, block=False)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        app.close()
