"""A small studio workspace for tests: photos with ImGT labels, a classifier run, a prior relabel and users,
and a way to serve it on 127.0.0.1."""

from __future__ import annotations

import atexit
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, select, text, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db import create_db_engine, init_db
from db.enums import Role
from db.models import Annotation, Dataset, User
from relabel.common.vocabulary import load_builtin
from relabel.common.workspace import get_dataset, image_index
from relabel.decisions.annotations import add_user
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.review.studio import Studio
from relabel.sources.bulk import store_run
from relabel.sources.labels import import_source
from tests import images
from tests.databases import copy_rows, schema_of

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


def build_workspace(folder: Path, url: str | None = None, extra: int = 0) -> Engine:
    """Photos, ImGT from file names, a top-3 classifier run, a ReaL-style prior, users alice/bob (annotators)
    and lena (lead), all with PASSWORD. `extra` more photos of the same six classes in turn (so every class has
    reference photos), each with a top-3 of its own class first.

    A workspace is a copy of one built once per test process (building it is most of a studio test's time), with
    the dataset root pointed at the copied photos: a copy of the SQLite file, or on PostgreSQL the rows of a template
    schema copied into the URL's schema when that holds today's tables and no rows (else it is built there)."""
    url = url or f"sqlite:///{folder / 'relabel.db'}"
    db_file = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    if (folder / "photos").exists():
        return _build(folder, url, extra)
    if db_file is None:
        template = _postgres_template(url, extra)
        if template is None or not copy_rows(template[0], template[1], _schema(url)):
            return _build(folder, url, extra)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(template[2] / "photos", folder / "photos")
        shutil.copy(template[2] / "real.csv", folder / "real.csv")
        engine = create_db_engine(url)
        with engine.begin() as conn:
            conn.execute(update(Dataset).values(root=str((folder / "photos").resolve())))
        return engine
    if db_file.exists():
        return _build(folder, url, extra)
    template = _template(extra)
    shutil.copytree(template / "photos", folder / "photos")
    shutil.copy(template / "real.csv", folder / "real.csv")
    db_file.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(template / "relabel.db", db_file)
    engine = create_db_engine(url)
    init_db(engine)
    with engine.begin() as conn:
        conn.execute(update(Dataset).values(root=str((folder / "photos").resolve())))
    return engine


_TEMPLATES: dict[int, Path] = {}  # `extra` -> the workspace folder built for it in this process


def _template(extra: int) -> Path:
    if extra not in _TEMPLATES:
        folder = Path(tempfile.mkdtemp(prefix="relabel-studio-workspace-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        engine = _build(folder, None, extra)
        with engine.connect() as conn:  # everything into relabel.db itself, so that one file is the copy
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        engine.dispose()
        _TEMPLATES[extra] = folder
    return _TEMPLATES[extra]


_POSTGRES_TEMPLATES: dict[tuple[str, int], tuple[str, str, Path]] = {}  # (server, extra) -> server, schema, folder


def _schema(url: str) -> str:
    where = schema_of(url)
    return where[1] if where else ""


def _postgres_template(url: str, extra: int) -> tuple[str, str, Path] | None:
    """(server URL, schema, folder) of the workspace built once per test process on `url`'s server; None when `url`
    does not name a schema."""
    where = schema_of(url)
    if where is None:
        return None
    server = where[0]
    if (server, extra) not in _POSTGRES_TEMPLATES:
        schema = f"t_ws_{uuid.uuid4().hex[:12]}"
        admin = create_engine(server)
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        admin.dispose()
        atexit.register(_drop_schema, server, schema)
        folder = Path(tempfile.mkdtemp(prefix="relabel-studio-workspace-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _build(folder, f"{server}?options=-csearch_path%3D{schema}", extra).dispose()
        _POSTGRES_TEMPLATES[server, extra] = (server, schema, folder)
    return _POSTGRES_TEMPLATES[server, extra]


def _drop_schema(server: str, schema: str) -> None:
    admin = create_engine(server)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
    admin.dispose()


def _build(folder: Path, url: str | None, extra: int) -> Engine:
    vocab = load_builtin()
    root = folder / "photos"
    for i, name in enumerate(FILES):
        images.photo(root / name, (80 + 8 * i, 60), (30 * i, 120, 200 - 30 * i))
    classifier = dict(CLASSIFIER)
    for i in range(extra):
        base = FILES[i % len(FILES)]
        name = f"{base.split('_')[0]}_extra{i:04d}.jpg"
        images.photo(root / name, (64 + i % 7, 48), ((37 * i) % 256, (91 * i) % 256, 128))
        own = vocab.resolve(base.split("_")[0])
        classifier[name] = [(own, 0.6), ((own + 1) % 1000, 0.3), ((own + 2) % 1000, 0.1)]
    engine = create_db_engine(url or f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    ingest_dataset(
        engine, plan_ingest(root, vocab), dataset="photos", root=root, vocab=vocab, show_progress=False, workers=1
    )
    with Session(engine) as s:
        ds = get_dataset(s, "photos")
        ids = image_index(s, ds).ids_by_path
        ranked = [
            {"image_id": ids[name], "classes": [c for c, _ in top], "scores": [p for _, p in top]}
            for name, top in classifier.items()
        ]
        store_run(
            s,
            dataset_id=ds.id,  # type: ignore[arg-type]
            name="efficientnet-lite0@topk",
            model="efficientnet-lite0",
            protocol="topk",
            predictions=ranked,
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


class CardClient:
    """One signed-in browser session calling a card's server functions over HTTP, as the page's script does:
    one POST to Gradio's `/component_server` per action."""

    def __init__(self, url: str, user: str, password: str = PASSWORD, mode: str = "review") -> None:
        import uuid

        import httpx

        self.http = httpx.Client(base_url=url, timeout=60)
        self.http.post("/login", data={"username": user, "password": password}).raise_for_status()
        config = self.http.get("/config").json()
        self.component = next(
            c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == f"{mode}-card"
        )
        self.session = uuid.uuid4().hex

    def call(self, fn: str, data: dict[str, Any]) -> dict[str, Any]:
        body = {"data": data, "component_id": self.component, "fn_name": fn, "session_hash": self.session}
        response = self.http.post("/gradio_api/component_server/", json=body)
        response.raise_for_status()
        reply: dict[str, Any] = response.json()
        return reply

    def close(self) -> None:
        self.http.close()


def stored_annotations(studio: Studio, user: str | None = None) -> list[Annotation]:
    """Every annotation row of the workspace in id order (of `user` only, if given), as the database holds it."""
    with Session(studio.engine) as s:
        query = select(Annotation).order_by(col(Annotation.id))
        if user:
            query = query.join(User, col(User.id) == col(Annotation.user_id)).where(User.name == user)
        return list(s.scalars(query))
