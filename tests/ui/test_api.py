"""The launched studio driven over HTTP: login, the cards' server functions as the page calls them (decisions,
resends, the session user, forged tokens), leads' endpoints through gradio_client, and what files are served."""

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
from tests.studio_workspace import PASSWORD, CardClient, build_workspace, serving


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
    alice = CardClient(url, "alice")
    card = alice.call("boot", {})["card"]
    assert card["key"] and card["original"]
    before = count(studio)
    first = alice.call("decide", {"key": card["key"], "action": "original"})
    resent = alice.call("decide", {"key": card["key"], "action": "original"})
    assert count(studio) == before + 1
    assert "saved" in first["message"] and "already saved" in resent["message"]
    assert first["card"]["key"] != card["key"]  # the next card came back in the same round trip


def test_a_refused_action_is_an_error_reply_and_writes_nothing(server: tuple[str, Studio]) -> None:
    url, studio = server
    alice = CardClient(url, "alice")
    card = alice.call("next", {})["card"]
    before = count(studio)
    forged = alice.call("decide", {"key": f"{card['image_id']}:{'f' * 24}", "action": "original"})
    empty = alice.call("decide", {"key": card["key"], "action": "labels", "classes": []})
    assert "not served by this studio session" in forged["error"] and "pick at least one class" in empty["error"]
    assert count(studio) == before


def test_a_request_without_a_session_is_refused(server: tuple[str, Studio]) -> None:
    url, _ = server
    alice = CardClient(url, "alice")
    body = {"data": {}, "component_id": alice.component, "fn_name": "next", "session_hash": alice.session}
    assert httpx.post(f"{url}gradio_api/component_server/", json=body, timeout=30).status_code == 401


def test_lead_endpoints_refuse_an_annotator_and_serve_a_lead(server: tuple[str, Studio]) -> None:
    url, studio = server
    before = count(studio)
    with pytest.raises(Exception, match="is an annotator"):
        client(url, "bob").predict("round-x", "keep", 1, "unanimous", 0.9, "off", api_name="/create_snapshot")
    assert count(studio) == before
    message = client(url, "lena").predict("round-x", "keep", 1, "unanimous", 0.9, "off", api_name="/create_snapshot")
    assert "snapshot 'round-x'" in message


def test_the_user_is_the_session_user(server: tuple[str, Studio]) -> None:
    url, studio = server
    bob = CardClient(url, "bob")
    card = bob.call("next", {})["card"]
    bob.call("decide", {"key": card["key"], "action": "none_fit", "user": "alice"})  # a user in the data is ignored
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
    lena.predict("files-x", "keep", 1, "unanimous", 0.9, "off", api_name="/create_snapshot")
    export = Path(lena.predict("files-x", "jsonl", api_name="/export_snapshot"))
    assert json.loads(export.read_text().splitlines()[0])  # the lead got the export
    written = next((folder / "exports").glob("files-x-*.jsonl"))
    assert export.read_bytes() == written.read_bytes()

    alice = httpx.Client(base_url=url, timeout=30)
    alice.post("/login", data={"username": "alice", "password": PASSWORD}).raise_for_status()
    card = CardClient(url, "alice").call("next", {})["card"]
    assert alice.get(f"/{card['url']}").status_code == 200  # the card's image is served to a signed-in session
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
        alice = CardClient(url, "alice")
        card = alice.call("next", {})["card"]
        acknowledged = []
        for _ in range(3):
            acknowledged.append(card["key"].split(":")[1])
            reply = alice.call("decide", {"key": card["key"], "action": "original"})
            assert "saved" in reply["message"]
            card = reply["card"]
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
