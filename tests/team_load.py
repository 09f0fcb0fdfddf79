"""A team on one PostgreSQL database: several `relabel serve` processes, simulated annotators driving the card's
server functions over HTTP as the page's script does, and one process killed with SIGKILL mid-run, its annotators
moving on to another process with the cookies they have (sessions live in the database). Then what was served and
stored is checked against the overlap and against the decisions the clients saw acknowledged.

Used by tests/ui/test_team_load.py (small, asserted) and bench/bench_team_load.py (timed, written to BENCHMARKS.md).

- Served beyond the overlap, at once: each annotator holds an image from the moment its card arrives until it sends
  the decision (a sub-interval of the lease the server holds), so more than `overlap` annotators holding one image
  at the same instant of these intervals means the queue handed it out beyond the overlap.
- Stored beyond the overlap: more annotators with a decision on one image than the overlap.
- Lost: an acknowledged decision (the reply said "saved #N") whose card token is not in the annotations table.
  Duplicated: an annotator with two standing decisions on one image.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from db import create_db_engine
from db.enums import Role
from relabel.decisions.annotations import add_user
from tests.studio_workspace import FILES, PASSWORD, build_workspace, free_port

PG_URL = os.environ.get("RELABEL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
START_S = 600.0  # how long a studio process may take to start on a busy machine (4 at once on 2 cores: minutes)


def annotator(k: int) -> str:
    return f"ann{k:02d}"


@contextmanager
def pg_schema(prefix: str = "load") -> Iterator[str]:
    """A fresh schema on the PostgreSQL server, dropped afterwards; yields a URL whose connections use it."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def build_team_workspace(folder: Path, url: str, n_images: int, n_annotators: int) -> None:
    """The test workspace (`tests.studio_workspace.build_workspace`) with `n_images` photos on `url`'s database,
    and annotators ann00.. with PASSWORD."""
    engine = build_workspace(folder, url, extra=max(0, n_images - len(FILES)))
    for k in range(n_annotators):
        add_user(engine, annotator(k), Role.annotator, PASSWORD)
    engine.dispose()


class Server:
    """One `relabel serve` process on the workspace's database, on a free port of 127.0.0.1."""

    def __init__(self, folder: Path, url: str, overlap: int, name: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = folder / f"serve-{name}.log"
        relabel = Path(sys.executable).with_name("relabel")
        command = [str(relabel), "--workspace", str(folder), "--db", url, "serve", "--overlap", str(overlap)]
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [*command, "--port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )
        self.alive = True

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(self.url, timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the studio on port {self.port} did not start: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed or released."""
        self.alive = False
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.alive = False


@contextmanager
def servers(folder: Path, url: str, overlap: int, n: int) -> Iterator[list[Server]]:
    """`n` studio processes on one database, started together; all stopped afterwards."""
    started = [Server(folder, url, overlap, str(i)) for i in range(n)]
    try:
        deadline = time.monotonic() + START_S
        for s in started:
            s.wait_ready(deadline)
        yield started
    finally:
        for s in started:
            s.stop()


@dataclass
class Run:
    """What the clients saw: every card held (user, image, from, until), every acknowledged decision (user, card
    token, image, time), refusals and errors."""

    held: list[tuple[str, int, float, float]] = field(default_factory=list)
    acked: list[tuple[str, str, int, float]] = field(default_factory=list)
    refused: int = 0  # decisions answered with an error (a stale card), not acknowledged
    unanswered: int = 0  # decisions in flight when a process died
    moved: int = 0  # annotators that moved to another process
    errors: list[str] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0
    killed_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class Annotator:
    """One signed-in browser page of the studio: one POST to Gradio's `/component_server` per action."""

    def __init__(self, user: str, server: Server) -> None:
        self.user, self.server = user, server
        self.http = httpx.Client(base_url=server.url, timeout=60)
        self.http.post("/login", data={"username": user, "password": PASSWORD}).raise_for_status()
        self._open_page()

    def _open_page(self) -> None:
        config = self.http.get("/config").json()
        self.component = next(
            c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "review-card"
        )
        self.session = uuid.uuid4().hex

    def move(self, server: Server) -> None:
        """Go on on another process with the same cookies (a proxy sending the next request elsewhere)."""
        cookies = self.http.cookies
        self.http.close()
        self.server = server
        self.http = httpx.Client(base_url=server.url, timeout=60, cookies=cookies)
        self._open_page()

    def call(self, fn: str, data: dict[str, Any]) -> dict[str, Any]:
        body = {"data": data, "component_id": self.component, "fn_name": fn, "session_hash": self.session}
        response = self.http.post("/gradio_api/component_server/", json=body)
        response.raise_for_status()
        reply: dict[str, Any] = response.json()
        return reply


def _decide_all(a: Annotator, run: Run, team: list[Server], ready: threading.Barrier) -> None:
    """Decide cards until the queue has nothing left for `a`; on a dead process, move to the next live one."""
    card = a.call("boot", {}).get("card")
    ready.wait()
    since = time.monotonic()
    while card is not None:
        key = str(card["key"])
        image = int(key.split(":", 1)[0])
        sent = time.monotonic()
        try:
            reply = a.call("decide", {"key": key, "action": "original"})
        except httpx.HTTPError as exc:
            with run.lock:
                run.held.append((a.user, image, since, sent))
                run.unanswered += 1
                if a.server.alive:
                    run.errors.append(f"{a.user}: {exc!r}")
            card = _reopen_elsewhere(a, run, team)
            since = time.monotonic()
            continue
        now = time.monotonic()
        with run.lock:
            run.held.append((a.user, image, since, sent))
            if reply.get("error") or "saved #" not in str(reply.get("message", "")):
                run.refused += 1
            else:
                run.acked.append((a.user, key.split(":", 1)[1], image, now))
        card = reply.get("card")
        since = now


def _reopen_elsewhere(a: Annotator, run: Run, team: list[Server]) -> dict[str, Any] | None:
    """After a failed request: once the process is known dead, the page is reloaded on the next live process."""
    deadline = time.monotonic() + 30
    while a.server.alive and time.monotonic() < deadline:  # the killer marks it dead before the signal
        time.sleep(0.05)
    live = [s for s in team if s.alive]
    at = team.index(a.server)
    target = next(s for s in team[at:] + team[:at] if s.alive) if live else None
    if target is None:
        return None
    a.move(target)
    with run.lock:
        run.moved += 1
    card: dict[str, Any] | None = a.call("boot", {}).get("card")
    return card


def drive(team: list[Server], n_annotators: int, *, kill_after: int | None) -> Run:
    """`n_annotators` annotators spread over the processes round-robin, deciding until nothing is left; once
    `kill_after` decisions are acknowledged (None: never), the last process is killed with SIGKILL."""
    run = Run()
    clients = [Annotator(annotator(k), team[k % len(team)]) for k in range(n_annotators)]
    ready = threading.Barrier(n_annotators + 1)

    def work(a: Annotator) -> None:
        try:
            _decide_all(a, run, team, ready)
        except Exception as exc:  # counted and reported; the run goes on
            with run.lock:
                run.errors.append(f"{a.user}: {exc!r}")
            if not ready.broken and ready.n_waiting:
                ready.abort()

    threads = [threading.Thread(target=work, args=(a,)) for a in clients]
    for t in threads:
        t.start()
    ready.wait(timeout=300)
    run.started = time.monotonic()
    while kill_after is not None and any(t.is_alive() for t in threads):
        if len(run.acked) >= kill_after:
            run.killed_at = time.monotonic()
            team[-1].kill()
            break
        time.sleep(0.01)
    for t in threads:
        t.join()
    run.ended = time.monotonic()
    for a in clients:
        a.http.close()
    return run


def held_at_once(run: Run) -> int:
    """The most annotators that held one image at the same instant (`Run.held` intervals)."""
    by_image: dict[int, list[tuple[float, int]]] = {}
    for _, image, start, end in run.held:
        by_image.setdefault(image, []).extend([(start, 1), (end, -1)])
    most = 0
    for events in by_image.values():
        now = 0
        for _, step in sorted(events, key=lambda e: (e[0], e[1])):  # an end before a start at the same instant
            now += step
            most = max(most, now)
    return most


def check_database(url: str, run: Run, overlap: int) -> dict[str, int]:
    """The annotators' decisions as stored, against what the clients saw acknowledged."""
    engine = create_db_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "select u.name, a.image_id, a.client_token from annotations a join users u on u.id = a.user_id"
                " where u.name like 'ann%' and a.verdict != 'retract'"
            )
        ).all()
    engine.dispose()
    tokens: dict[str, int] = {}
    pairs: dict[tuple[str, int], int] = {}
    deciders: dict[int, set[str]] = {}
    for user, image, token in rows:
        if token:
            tokens[token] = tokens.get(token, 0) + 1
        pairs[(user, image)] = pairs.get((user, image), 0) + 1
        deciders.setdefault(image, set()).add(user)
    served: dict[int, set[str]] = {}
    for user, image, _, _ in run.held:
        served.setdefault(image, set()).add(user)
    return {
        "stored": len(rows),
        "images_decided": len(deciders),
        "lost": sum(token not in tokens for _, token, _, _ in run.acked),
        "duplicated": sum(n - 1 for n in pairs.values() if n > 1) + sum(n - 1 for n in tokens.values() if n > 1),
        "stored_beyond_overlap": sum(len(users) > overlap for users in deciders.values()),
        "served_beyond_overlap_over_the_run": sum(len(users) > overlap for users in served.values()),
        "held_at_once_max": held_at_once(run),
    }
