"""Several studio processes on one database act as one review queue: leases and decisions are shared through the
database (`relabel.review.leases`). Two `Studio`s, each with its own engine (its own connections, as two
`relabel serve` processes have), on a SQLite file and on PostgreSQL; then two real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select, text
from sqlalchemy.engine import Engine
from sqlmodel import col

from db import SCHEMA_VERSION, create_db_engine, init_db
from db.enums import Role
from db.migrations import MIGRATIONS
from db.models import Annotation, QueueLease, pk
from relabel.common.errors import StaleCardError
from relabel.decisions.annotations import add_user
from relabel.review.studio import Studio
from tests.conftest import REPO
from tests.studio_workspace import PASSWORD, build_workspace

LEASE = 600.0


class Clock:
    """Wall-clock seconds that a test moves; the queue's own (monotonic) clock and the database leases' clock."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def open_studio(url: str, tmp_path: Path, name: str, overlap: int, clock: Clock | None = None) -> Studio:
    """A studio as one process opens it: its own engine on the shared database."""
    studio = Studio(create_db_engine(url), cache_dir=tmp_path / f"cache-{name}", overlap=overlap)
    if clock is not None:
        studio.queue.clock = clock
        studio.queue.shared.clock = clock  # type: ignore[union-attr]
    return studio


def build(db_url: str, tmp_path: Path, overlap: int, clock: Clock | None = None) -> tuple[Studio, Studio]:
    engine = build_workspace(tmp_path, db_url)
    for name in ("carol", "dave"):
        add_user(engine, name, Role.annotator, PASSWORD)
    engine.dispose()
    return open_studio(db_url, tmp_path, "a", overlap, clock), open_studio(db_url, tmp_path, "b", overlap, clock)


def serve(studio: Studio, user: str) -> tuple[int | None, str]:
    """The image `user` is served next and the card's token; (None, "") when nothing is left for them."""
    card, token = studio.next_card(user)
    return (None, "") if card is None else (card.image_id, token)


def take(studio: Studio, user: str) -> tuple[int, str]:
    """`serve`, when the test knows something is left."""
    image_id, token = serve(studio, user)
    assert image_id is not None, f"nothing served to {user}"
    return image_id, token


def decisions_per_image(engine: Engine) -> dict[int, list[int]]:
    with engine.connect() as conn:
        rows = conn.execute(select(col(Annotation.image_id), col(Annotation.user_id))).all()
    out: dict[int, list[int]] = {}
    for image_id, user_id in rows:
        out.setdefault(image_id, []).append(user_id)
    return out


@pytest.mark.parametrize("overlap", [1, 2])
def test_annotators_on_two_processes_are_never_served_an_image_beyond_the_overlap(
    db_url: str, tmp_path: Path, overlap: int
) -> None:
    a, b = build(db_url, tmp_path, overlap)
    holders: dict[int, set[str]] = {}
    # four annotators, two on each process, take turns until the queue is empty; each decides what they are served
    users = [(a, "alice"), (b, "bob"), (a, "carol"), (b, "dave")]
    done: set[str] = set()
    while len(done) < len(users):
        for studio, user in users:
            if user in done:
                continue
            image_id, token = serve(studio, user)
            if image_id is None:
                done.add(user)
                continue
            holders.setdefault(image_id, set()).add(user)
            assert len(holders[image_id]) <= overlap, (image_id, holders[image_id])
            studio.decide(user, token, image_id, "original")
    n_images = len(a.queue.order)
    assert sorted(len(h) for h in holders.values()) == [overlap] * n_images  # every image got its opinions
    stored = decisions_per_image(a.engine)
    assert {i: len(u) for i, u in stored.items()} == {i: overlap for i in a.queue.order}
    assert all(len(set(u)) == len(u) for u in stored.values())  # nobody decided an image twice
    assert a.queue.counts()["complete"] == b.queue.counts()["complete"] == n_images


def test_overlap_one_hands_two_processes_different_images_at_the_same_moment(db_url: str, tmp_path: Path) -> None:
    a, b = build(db_url, tmp_path, overlap=1)
    alice, _ = serve(a, "alice")
    bob, _ = serve(b, "bob")  # B's memory knows nothing of alice: the database's lease says the image is taken
    assert alice == a.queue.order[0] and bob == b.queue.order[1]
    assert serve(a, "alice")[0] == alice and serve(b, "bob")[0] == bob  # a reload gives each their own card back


def test_two_way_overlap_serves_a_third_annotator_elsewhere(db_url: str, tmp_path: Path) -> None:
    a, b = build(db_url, tmp_path, overlap=2)
    first = a.queue.order[0]
    assert serve(a, "alice")[0] == first and serve(b, "bob")[0] == first
    assert serve(a, "carol")[0] == a.queue.order[1]  # alice and bob hold the first image: full
    assert serve(b, "dave")[0] == a.queue.order[1]


def test_a_decision_stored_through_one_process_is_seen_by_the_other(db_url: str, tmp_path: Path) -> None:
    a, b = build(db_url, tmp_path, overlap=2)
    first = a.queue.order[0]
    _, alice_token = serve(a, "alice")
    a.decide("alice", alice_token, first, "original")
    assert b.queue.counts()["needs_votes"] == len(b.queue.order) and b.decided_by("alice") == 1
    assert b.queue.evidence[first].voters.keys() == {a.user("alice")[0]}
    image_id, bob_token = serve(b, "bob")
    assert image_id == first
    b.decide("bob", bob_token, first, "none_fit")  # bob disagrees: the image is disputed on both processes
    assert a.queue.disputed() == b.queue.disputed() == [first]
    assert a.queue.counts()["complete"] == 1 and a.decided_by("bob") == 1
    # the overlap is reached: neither process serves the image again
    assert serve(a, "carol")[0] != first and serve(b, "dave")[0] != first
    assert b.queue.counts()["disputed"] == a.queue.counts()["disputed"] == 1


def test_a_decision_whose_id_was_skipped_is_read_once_it_lands(db_url: str, tmp_path: Path) -> None:
    """Another process's transaction in flight leaves a hole in the annotation ids: the pull that sees the newer
    id remembers the hole and asks for it again (`relabel.review.leases.GAP_SECONDS`), until it lands."""
    a, b = build(db_url, tmp_path, overlap=3)
    first, second, third = a.queue.order[:3]
    _, token = take(b, "alice")
    b.decide("alice", token, first, "original")
    a.queue.counts()  # a look at the queue takes what other processes stored (`ReviewQueue._sync`)
    assert a.queue.evidence[first].voters.keys() == {a.user("alice")[0]}
    table = Annotation.__table__  # type: ignore[attr-defined]
    with b.engine.begin() as conn:
        row = dict(conn.execute(select(table).where(table.c.image_id == first)).mappings().one())

    def land(offset: int, image_id: int, user: str) -> None:
        copy = {**row, "id": row["id"] + offset, "image_id": image_id, "user_id": b.user(user)[0], "client_token": None}
        with b.engine.begin() as conn:
            conn.execute(table.insert().values(**copy))

    land(2, second, "bob")  # the id in between is still in flight
    a.queue.counts()
    assert a.queue.evidence[second].voters.keys() == {a.user("bob")[0]}
    assert a.queue.shared._gaps.keys() == {row["id"] + 1}  # type: ignore[union-attr]
    land(1, third, "carol")
    a.queue.counts()
    assert a.queue.evidence[third].voters.keys() == {a.user("carol")[0]}
    assert not a.queue.shared._gaps  # type: ignore[union-attr]


def test_an_undo_on_one_process_reopens_the_image_on_the_other(db_url: str, tmp_path: Path) -> None:
    a, b = build(db_url, tmp_path, overlap=1)
    first, token = take(a, "alice")
    a.decide("alice", token, first, "original")
    assert serve(b, "bob")[0] != first
    b.skip("bob", b.queue.order[1])
    assert a.undo("alice") == first
    a.skip("alice", first)  # alice leaves the image she undid: it is free for bob, whose cursor is past it
    assert b.queue.counts()["complete"] == 0 and b.decided_by("alice") == 0
    assert b.queue.may_serve(first, b.user("dave")[0])


def test_an_expired_lease_lets_the_image_go_to_someone_else(db_url: str, tmp_path: Path) -> None:
    clock = Clock()
    a, b = build(db_url, tmp_path, overlap=1, clock=clock)
    first, alice_token = take(a, "alice")
    assert first == a.queue.order[0]
    assert serve(b, "bob")[0] != first
    clock.now += LEASE + 1  # alice went for lunch
    assert serve(b, "dave")[0] == first
    assert serve(a, "alice")[0] not in (first, None)  # back: dave holds it now, alice gets the next free image
    with pytest.raises(StaleCardError):  # and her old card's answer is refused, not stored beyond the overlap
        a.decide("alice", alice_token, first, "original")
    assert first not in decisions_per_image(a.engine)


def test_a_process_killed_while_holding_a_lease_blocks_its_image_only_until_expiry(db_url: str, tmp_path: Path) -> None:
    clock = Clock()
    a, b = build(db_url, tmp_path, overlap=1, clock=clock)
    first, _ = serve(a, "alice")
    a.engine.dispose()  # the process is gone: its lease is never released
    del a
    with b.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(QueueLease)).scalar() == 1
    assert serve(b, "bob")[0] != first
    clock.now += LEASE - 1
    assert serve(b, "carol")[0] not in (first, None)
    clock.now += 2
    assert serve(b, "dave")[0] == first


def test_leaving_an_image_deletes_its_lease_row(db_url: str, tmp_path: Path) -> None:
    a, b = build(db_url, tmp_path, overlap=1)

    def leases() -> list[tuple[int, int]]:
        with a.engine.connect() as conn:
            return [
                (int(i), int(u)) for i, u in conn.execute(select(col(QueueLease.image_id), col(QueueLease.user_id)))
            ]

    alice = a.user("alice")[0]
    first, token = take(a, "alice")
    assert leases() == [(first, alice)]
    a.skip("alice", first)
    assert leases() == []
    second, token = take(a, "alice")
    assert leases() == [(second, alice)]
    a.decide("alice", token, second, "original")
    assert leases() == []
    assert serve(b, "bob")[0] == first  # skipped by alice, so free


WORKER = """
import json, sys, threading, time
from pathlib import Path
from db import SCHEMA_VERSION, create_db_engine, init_db
from db.migrations import MIGRATIONS
from relabel.review.studio import Studio

url, cache, overlap, users = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
studio = Studio(create_db_engine(url), cache_dir=cache, overlap=overlap)
log = []
cache.mkdir(parents=True, exist_ok=True)
(cache / "ready").touch()
while not (cache.parent / "go").exists():  # both processes start annotating at the same moment
    time.sleep(0.005)

def annotate(user):
    while True:
        card, token = studio.next_card(user)
        if card is None:
            return
        log.append(("served", user, card.image_id, None))
        time.sleep(0.02)  # a look at the card
        try:
            saved = studio.decide(user, token, card.image_id, "original")
        except Exception as exc:  # counted by the test: a card served that could not be answered
            log.append(("refused", user, card.image_id, repr(exc)))
            studio.skip(user, card.image_id)
            continue
        log.append(("duplicate" if saved.duplicate else "saved", user, card.image_id, saved.annotation_id))

threads = [threading.Thread(target=annotate, args=(u,)) for u in users]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(log))
"""


def test_two_real_processes_with_four_annotators_share_forty_images(db_url: str, tmp_path: Path) -> None:
    overlap = 2
    engine = build_workspace(tmp_path, db_url, extra=34)
    for name in ("carol", "dave"):
        add_user(engine, name, Role.annotator, PASSWORD)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, db_url, str(tmp_path / f"cache-{i}"), str(overlap), users],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, users in enumerate(("alice,carol", "bob,dave"))
    ]
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"cache-{i}" / "ready").exists() for i in range(2)) and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    logs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err[-2000:]
        logs.extend(json.loads(out))
    stored = decisions_per_image(engine)
    assert len(stored) == 40 and all(len(u) == overlap == len(set(u)) for u in stored.values())
    assert Counter(event for event, *_ in logs) == {"served": 40 * overlap, "saved": 40 * overlap}
    served = Counter(image_id for event, _, image_id, _ in logs if event == "served")
    assert set(served.values()) == {overlap} and len(served) == 40  # no image served beyond the overlap
    assert len({(user, image_id) for event, user, image_id, _ in logs if event == "served"}) == 40 * overlap
    with engine.connect() as conn:  # every decision a worker was told was saved is stored, once
        ids = list(conn.execute(select(pk(Annotation.id))).scalars())
    assert sorted(int(a) for event, _, _, a in logs if event == "saved") == sorted(ids)
    engine.dispose()


def test_a_version_5_workspace_gets_the_lease_table(tmp_path: Path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'old.db'}")
    init_db(engine, MIGRATIONS[:5])
    with engine.begin() as conn:  # what a workspace made before the table existed holds
        conn.execute(text("DROP TABLE queue_leases"))
        assert not inspect(conn).has_table("queue_leases")
    assert init_db(engine) == SCHEMA_VERSION
    with engine.connect() as conn:
        assert {c["name"] for c in inspect(conn).get_columns("queue_leases")} == {
            "id",
            "dataset_id",
            "image_id",
            "user_id",
            "expires_at",
        }
    engine.dispose()
