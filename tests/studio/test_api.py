"""The launched studio driven over HTTP with gradio_client: login, decisions, resends, roles."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from db import create_db_engine
from db.models import Annotation
from relabel.review.studio import Studio
from tests.studio.workspace import PASSWORD, build_workspace, serving

FILTERS = ("all classes", "open", "any")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Studio]]:
    folder = tmp_path_factory.mktemp("studio")
    studio = Studio(build_workspace(folder), cache_dir=folder / "cache", overlap=1)
    with serving(studio, folder / "exports") as url:
        yield url, studio


def client(url: str, user: str, password: str = PASSWORD):  # type: ignore[no-untyped-def]
    from gradio_client import Client

    return Client(url, auth=(user, password), verbose=False)


def count(studio: Studio) -> int:
    with Session(studio.engine) as s:
        return int(s.scalar(select(func.count()).select_from(Annotation)) or 0)


def test_a_wrong_password_is_refused(server: tuple[str, Studio]) -> None:
    url, _ = server
    with pytest.raises(Exception, match="(?i)login|auth|credentials|401"):
        client(url, "alice", "not-the-password")


def test_next_card_decide_and_a_resent_decision_stored_once(server: tuple[str, Studio]) -> None:
    url, studio = server
    alice = client(url, "alice")
    card = alice.predict(*FILTERS, api_name="/next_card")
    key = card[8]
    assert key and card[2]  # card key, original label text
    before = count(studio)
    first = alice.predict(key, [], [], "", *FILTERS, api_name="/decide_original")
    resent = alice.predict(key, [], [], "", *FILTERS, api_name="/decide_original")
    assert count(studio) == before + 1
    assert "saved" in first[9] and "already saved" in resent[9]
    assert first[8] != key  # the next card came back in the same round trip


def test_lead_endpoints_refuse_an_annotator_and_serve_a_lead(server: tuple[str, Studio]) -> None:
    url, studio = server
    before = count(studio)
    with pytest.raises(Exception, match="is an annotator"):
        client(url, "bob").predict("round-x", "keep", 1, api_name="/create_snapshot")
    assert count(studio) == before
    message = client(url, "lena").predict("round-x", "keep", 1, api_name="/create_snapshot")
    assert "snapshot 'round-x'" in message


def test_the_user_is_the_session_user(server: tuple[str, Studio]) -> None:
    url, studio = server
    bob = client(url, "bob")
    card = bob.predict(*FILTERS, api_name="/next_card")
    bob.predict(card[8], [], [], "", *FILTERS, api_name="/decide_none_fit")
    with Session(studio.engine) as s:
        last = s.scalars(select(Annotation).order_by(Annotation.id.desc())).first()  # type: ignore[attr-defined]
    assert last is not None and last.user_id == studio.user("bob")[0]


def test_only_card_images_are_served_and_lead_downloads_go_out_as_copies(server: tuple[str, Studio]) -> None:
    url, studio = server
    folder = Path(studio.engine.url.database or "").parent  # the workspace: relabel.db, exports, reports
    root = Path(studio.root or "")
    (root / "evil.html").write_text("<script>window.pwned = 1</script>")
    report = folder / "reports" / "20260101T000000" / "report.md"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("# lead-only report\n")
    lena = client(url, "lena")
    lena.predict("files-x", "keep", 1, api_name="/create_snapshot")
    export = Path(lena.predict("files-x", "real", api_name="/export_snapshot"))
    assert json.loads(export.read_text())  # the lead got the export
    written = next((folder / "exports").glob("files-x-*.real.json"))
    assert export.read_bytes() == written.read_bytes()

    alice = httpx.Client(base_url=url, timeout=30)
    alice.post("/login", data={"username": "alice", "password": PASSWORD}).raise_for_status()
    card = client(url, "alice").predict(*FILTERS, api_name="/next_card")
    assert Path(card[0]).is_file()  # the card's image was served to the signed-in client
    for path in (root / "evil.html", *sorted(root.glob("*.jpg"))[:1], report, written, folder / "relabel.db"):
        assert alice.get(f"/gradio_api/file={path}").status_code == 403, path


def test_a_killed_server_loses_no_acknowledged_decision(tmp_path: Path) -> None:
    """`relabel serve` in its own process, killed with SIGKILL right after answering: every decision it
    acknowledged is in the database, once, and a restarted server goes on from there."""
    engine = build_workspace(tmp_path)
    engine.dispose()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    relabel = Path(sys.executable).with_name("relabel")
    command = [str(relabel), "--workspace", str(tmp_path), "serve", "--overlap", "1", "--port", str(port)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ})
    try:
        wait_until_serving(url, proc)
        alice = client(url, "alice")
        card = alice.predict(*FILTERS, api_name="/next_card")
        acknowledged = []
        for _ in range(3):
            acknowledged.append(card[8].split(":")[1])
            card = alice.predict(card[8], [], [], "", *FILTERS, api_name="/decide_original")
            assert "saved" in card[9]
    finally:
        proc.kill()
        proc.wait(timeout=30)
    engine = create_db_engine(f"sqlite:///{tmp_path / 'relabel.db'}")
    with Session(engine) as s:
        tokens = list(s.scalars(select(Annotation.client_token)))
    assert sorted(tokens) == sorted(acknowledged)
    restarted = Studio(engine, cache_dir=tmp_path / "cache", overlap=1)
    assert restarted.decided_by("alice") == 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_serving(url: str, proc: subprocess.Popen[bytes], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise AssertionError(f"relabel serve exited with {proc.returncode}: {output[-2000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"relabel serve did not answer on {url} within {seconds} s")
