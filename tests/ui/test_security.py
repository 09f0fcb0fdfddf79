"""The studio's web trust boundary: sign-in throttling and constant work, same-origin requests and cookies, upload
and body caps, the hidden API listing, the minimum password length, and the display cache against files changed
in the dataset folder after ingest; served host names (DNS rebinding), forwarded addresses, sign-out by POST only,
and rebinding the port after a crash. Over HTTP against a served studio, and in chromium for a page on another port.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi import HTTPException
from PIL import Image
from sqlalchemy import func, select
from sqlmodel import Session

from db.enums import Role
from db.models import Annotation, User
from relabel.common.errors import InputError
from relabel.decisions.annotations import MIN_PASSWORD_LENGTH, add_user, check_new_password, verify_password
from relabel.review.display import DisplayCache, StoredImage
from relabel.review.studio import Studio
from tests.studio_workspace import PASSWORD, CardClient, build_workspace, free_port, serving
from ui import card_api
from ui.login import FREE_PER_ADDRESS, FREE_PER_USER, LOCK_S, LOCKED_STATUS, LoginGuard, LoginThrottle
from ui.security import (
    check_allowed_host,
    check_trusted_proxy,
    host_name,
    same_origin,
    served_hosts,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Studio]]:
    folder = tmp_path_factory.mktemp("security")
    engine = build_workspace(folder)
    add_user(engine, "target", Role.annotator, PASSWORD)  # the name the throttle tests lock out
    studio = Studio(engine, cache_dir=folder / "cache", overlap=1)
    with serving(studio, folder / "exports") as url:
        yield url, studio


def count(studio: Studio) -> int:
    with Session(studio.engine) as s:
        return int(s.scalar(select(func.count()).select_from(Annotation)) or 0)


def login(url: str, user: str, password: str = PASSWORD, **headers: str) -> httpx.Response:
    return httpx.post(f"{url}login", data={"username": user, "password": password}, headers=headers, timeout=60)


def foreign(url: str) -> str:
    """An origin on another port of the studio's host."""
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    return f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TestSignInThrottle:
    def test_five_failures_lock_a_name_for_longer_each_time_and_other_names_go_on(self) -> None:
        clock = FakeClock()
        throttle = LoginThrottle(clock=clock)
        for _ in range(FREE_PER_USER):
            assert throttle.begin("alice", "10.0.0.1") is None  # admitted, and counted until it succeeds
        locked = throttle.begin("alice", "10.0.0.1")
        assert locked is not None and locked.seconds == LOCK_S and "'alice'" in locked.message
        assert f"try again in {LOCK_S:.0f} s" in locked.message
        assert throttle.begin("bob", "10.0.0.1") is None  # another name from the same address
        throttle.succeeded("bob", "10.0.0.1")
        clock.now += LOCK_S
        assert throttle.begin("alice", "10.0.0.1") is None  # one more guess, which fails: twice as long
        second = throttle.begin("alice", "10.0.0.1")
        assert second is not None and second.seconds == 2 * LOCK_S

    def test_a_right_password_starts_the_name_afresh(self) -> None:
        throttle = LoginThrottle(clock=FakeClock())
        for _ in range(FREE_PER_USER - 1):
            throttle.begin("alice", "10.0.0.1")
        throttle.begin("alice", "10.0.0.1")
        throttle.succeeded("alice", "10.0.0.1")
        assert throttle.begin("alice", "10.0.0.1") is None

    def test_one_address_guessing_many_names_is_locked_out(self) -> None:
        throttle = LoginThrottle(clock=FakeClock())
        for i in range(FREE_PER_ADDRESS):
            assert throttle.begin(f"name{i}", "10.0.0.9") is None
        locked = throttle.begin("alice", "10.0.0.9")
        assert locked is not None and locked.who == "this address"
        assert throttle.begin("alice", "10.0.0.10") is None  # another address is not

    def test_a_flood_of_other_failures_never_frees_a_locked_name(self) -> None:
        throttle = LoginThrottle(clock=FakeClock(), max_keys=100)
        for _ in range(FREE_PER_USER):
            throttle.begin("bob", "10.0.0.1")
        for i in range(1_000):  # many names from many addresses, far more keys than are kept
            throttle.begin(f"name{i}", f"10.1.{i // 250}.{i % 250}")
        locked = throttle.begin("bob", "10.0.0.1")
        assert locked is not None and locked.who == "'bob'"

    def test_a_locked_out_attempt_is_refused_without_hashing_even_when_right(self) -> None:
        checked: list[str] = []

        def check(name: str, password: str) -> bool:
            checked.append(name)
            return password == "right-password"

        guard = LoginGuard(check, LoginThrottle(clock=FakeClock()))
        for _ in range(FREE_PER_USER):
            assert asyncio.run(guard.login("alice", "wrong")) is False
        with pytest.raises(HTTPException) as refused:
            asyncio.run(guard.login("alice", "right-password"))
        assert refused.value.status_code == LOCKED_STATUS and "try again in" in str(refused.value.detail)
        assert refused.value.headers == {"Retry-After": str(int(LOCK_S))}
        assert len(checked) == FREE_PER_USER  # the refused attempt never reached the password check
        assert asyncio.run(guard.login("bob", "right-password")) is True

    def test_the_password_check_runs_off_the_event_loop(self) -> None:
        threads: list[int] = []

        def check(name: str, password: str) -> bool:
            threads.append(threading.get_ident())
            return True

        async def sign_in() -> tuple[bool, int]:
            return await LoginGuard(check).login("alice", "pw"), threading.get_ident()

        ok, loop_thread = asyncio.run(sign_in())
        assert ok and threads and threads[0] != loop_thread

    def test_over_http_the_right_password_is_refused_while_locked_and_others_sign_in(
        self, server: tuple[str, Studio]
    ) -> None:
        url, _ = server
        for _ in range(FREE_PER_USER):
            assert login(url, "target", "wrong-password").status_code == 400
        refused = login(url, "target")
        assert refused.status_code == LOCKED_STATUS, refused.text
        assert "too many failed sign-ins for 'target'" in refused.json()["detail"]
        assert int(refused.headers["retry-after"]) > 0 and "set-cookie" not in refused.headers
        assert login(url, "bob").status_code == 200


class TestPasswords:
    def test_an_unknown_name_costs_the_same_hash_as_a_known_one(
        self, server: tuple[str, Studio], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _, studio = server
        calls: list[bytes] = []
        real = hashlib.scrypt

        def spy(password: bytes, **kwargs: Any) -> bytes:
            calls.append(password)
            return real(password, **kwargs)

        monkeypatch.setattr(hashlib, "scrypt", spy)
        add_user(studio.engine, "nopassword", Role.annotator)
        assert not studio.login("nobody-by-this-name", "guess-1")
        assert not studio.login("nopassword", "guess-2")
        assert not studio.login("alice", "guess-3")
        assert calls == [b"guess-1", b"guess-2", b"guess-3"]
        assert not verify_password("x", "scrypt$not-hex$zz")  # a malformed hash is a "no", not an error

    def test_users_add_refuses_a_short_password_from_the_option_the_environment_and_the_prompt(
        self, tmp_path: Path
    ) -> None:
        from relabel.cli import cli

        ws = ["--workspace", str(tmp_path / "ws")]
        short = "x" * (MIN_PASSWORD_LENGTH - 1)
        runner = CliRunner()
        given = runner.invoke(cli, [*ws, "users", "add", "carol", "--password", short])
        from_env = runner.invoke(cli, [*ws, "users", "add", "carol"], env={"RELABEL_PASSWORD": short})
        assert given.exit_code == from_env.exit_code == 2
        assert "password too short" in given.output and "at least 8" in from_env.output
        ok = "y" * MIN_PASSWORD_LENGTH
        prompted = runner.invoke(cli, [*ws, "users", "add", "carol"], input=f"{short}\n{ok}\n{ok}\n")
        assert prompted.exit_code == 0 and "password too short" in prompted.output  # asked again, then added
        from db import create_db_engine

        with Session(create_db_engine(f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}")) as s:
            carol = s.scalars(select(User).where(User.name == "carol")).one()
        assert verify_password(ok, carol.password_hash)

    @pytest.mark.parametrize(
        ("name", "password", "message"),
        [
            ("dave", " " * 12, "password too short"),
            (" alice", "long-enough-pass", "starts or ends with a space"),
            ("new\nline", "long-enough-pass", "control characters"),
            ("Alice", "long-enough-pass", "differs only in letter case"),
            ("x" * 65, "long-enough-pass", "at most 64"),
        ],
    )
    def test_users_add_refuses_names_no_one_could_sign_in_with(
        self, tmp_path: Path, name: str, password: str, message: str
    ) -> None:
        from relabel.cli import cli

        ws = ["--workspace", str(tmp_path / "ws")]
        runner = CliRunner()
        assert runner.invoke(cli, [*ws, "users", "add", "alice", "--password", "long-enough-pass"]).exit_code == 0
        refused = runner.invoke(cli, [*ws, "users", "add", name, "--password", password])
        assert refused.exit_code != 0 and message in refused.output and "Traceback" not in refused.output
        assert refused.output.strip().splitlines()[-1].count(message) == 1  # the reason, on one line

    def test_serve_refuses_a_bad_or_taken_port_in_one_line(self, tmp_path: Path) -> None:
        import socket

        from relabel.cli import cli

        ws = ["--workspace", str(tmp_path / "ws")]
        runner = CliRunner()
        assert runner.invoke(cli, [*ws, "init"]).exit_code == 0
        too_big = runner.invoke(cli, [*ws, "serve", "--port", "99999"])
        assert too_big.exit_code == 2 and "99999" in too_big.output and "Traceback" not in too_big.output
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            busy = runner.invoke(cli, [*ws, "serve", "--port", str(port)])
        assert busy.exit_code != 0 and f"cannot listen on 127.0.0.1:{port}" in busy.output
        assert len(busy.output.strip().splitlines()) == 1

    def test_the_demo_password_meets_the_rule(self) -> None:
        from relabel.demo import DEMO_PASSWORD

        assert check_new_password(DEMO_PASSWORD) == DEMO_PASSWORD


class TestSameOrigin:
    def test_origin_matching(self) -> None:
        assert same_origin("http://127.0.0.1:7860", "127.0.0.1:7860")
        assert same_origin("https://studio.lab.example", "studio.lab.example")  # behind a TLS proxy
        assert same_origin("http://127.0.0.1:7860/?page=x", "127.0.0.1:7860")  # a Referer
        assert not same_origin("http://127.0.0.1:7861", "127.0.0.1:7860")
        assert not same_origin("http://localhost:7860", "127.0.0.1:7860")
        assert not same_origin("null", "127.0.0.1:7860")
        assert not same_origin("http://127.0.0.1:99999", "127.0.0.1:7860")

    def test_a_post_from_another_origin_is_refused_and_writes_nothing(self, server: tuple[str, Studio]) -> None:
        url, studio = server
        alice = CardClient(url, "alice")
        card = alice.call("next", {})["card"]
        before = count(studio)
        body = {"data": {"key": card["key"], "action": "original"}, "component_id": alice.component,
                "fn_name": "decide", "session_hash": alice.session}  # fmt: skip
        for headers in ({"Origin": foreign(url)}, {"Referer": f"{foreign(url)}/evil.html"}, {"Origin": "null"}):
            refused = alice.http.post("/gradio_api/component_server/", json=body, headers=headers)
            assert refused.status_code == 403 and "cross-origin" in refused.text, headers
        queued = alice.http.post("/gradio_api/queue/join", json={"data": [], "fn_index": 0, "session_hash": "x"},
                                 headers={"Origin": foreign(url)})  # fmt: skip
        read = alice.http.get("/config", headers={"Origin": foreign(url)})  # a page may not read replies either
        assert queued.status_code == read.status_code == 403 and "components" not in read.text
        assert count(studio) == before
        same = alice.http.post("/gradio_api/component_server/", json=body, headers={"Origin": url.rstrip("/")})
        assert same.status_code == 200 and "saved" in same.json()["message"]  # the studio's own page
        assert count(studio) == before + 1

    def test_a_sign_in_from_another_origin_is_refused(self, server: tuple[str, Studio]) -> None:
        url, _ = server
        refused = login(url, "bob", Origin=foreign(url))
        assert refused.status_code == 403 and "set-cookie" not in refused.headers

    def test_session_cookies_are_same_site_lax_and_pages_are_not_framed(self, server: tuple[str, Studio]) -> None:
        url, _ = server
        cookies = login(url, "bob").headers.get_list("set-cookie")
        assert len(cookies) == 2
        for cookie in cookies:
            assert re.findall(r"(?i)samesite=\w+", cookie) == ["SameSite=Lax"], cookie
        page = httpx.get(url, timeout=30)
        assert "frame-ancestors 'self'" in page.headers["content-security-policy"]


class TestUploadsAndBodies:
    def test_no_file_can_be_uploaded_and_bodies_are_capped(self, server: tuple[str, Studio]) -> None:
        from gradio.utils import get_upload_folder

        url, _ = server
        alice = CardClient(url, "alice")
        name = f"drop-{uuid.uuid4().hex}.jpg"
        for size in (4, 1_500_000):  # the studio takes no files: a small one is refused as a large one
            reply = alice.http.post("/gradio_api/upload", files={"files": (name, b"<html>" + b"a" * size)})
            assert reply.status_code == 404
        assert not [p for p in Path(get_upload_folder()).rglob(name)]

        def chunks(head: bytes) -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield head
            for _ in range(5):
                yield b"a" * (1 << 20)

        event = alice.http.post("/gradio_api/queue/join", content=chunks(b'{"data": ["'),
                                headers={"Content-Type": "application/json"})  # fmt: skip
        assert event.status_code == 413
        assert alice.http.get("/config").headers["x-content-type-options"] == "nosniff"


class TestApiListing:
    LISTING_ROUTES = (
        "/config",
        "/gradio_api/info",
        "/gradio_api/info?all_endpoints=True",
        "/gradio_api/openapi.json",
        "/openapi.json",
        "/docs",
        "/redoc",
        "/gradio_api/mcp/schema",
        "/monitoring",
        "/monitoring/summary",
        "/gradio_api/runs",
    )

    @staticmethod
    def embedded_listing(html: str) -> dict[str, Any]:
        found = re.search(r"window\.gradio_api_info = (.*?);</script>", html)
        assert found, "the page no longer embeds gradio_api_info: check where Gradio puts the listing now"
        listing: dict[str, Any] = json.loads(found.group(1))
        return listing

    def test_without_a_session_no_route_lists_the_api(self, server: tuple[str, Studio]) -> None:
        url, _ = server
        with httpx.Client(base_url=url, timeout=30) as visitor:
            for route in self.LISTING_ROUTES:
                assert visitor.get(route).status_code in (401, 403, 404), route
            for route in ("/", "/?view=api"):
                page = visitor.get(route)
                assert page.status_code == 200
                assert self.embedded_listing(page.text) == {"named_endpoints": {}, "unnamed_endpoints": {}}, route

    def test_a_signed_in_annotator_gets_no_listing_either(self, server: tuple[str, Studio]) -> None:
        url, _ = server
        alice = CardClient(url, "alice").http
        assert alice.get("/gradio_api/info?all_endpoints=True").json() == {"named_endpoints": {},
                                                                          "unnamed_endpoints": {}}  # fmt: skip
        assert self.embedded_listing(alice.get("/").text)["named_endpoints"] == {}
        assert alice.get("/gradio_api/openapi.json").status_code == 404


def jpeg(path: Path, size: tuple[int, int], color: tuple[int, int, int]) -> StoredImage:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path, "JPEG")
    data = path.read_bytes()
    return StoredImage(1, str(path.parent), path.name, hashlib.sha256(data).hexdigest(), "JPEG", "RGB", *size, None,
                       len(data))  # fmt: skip


class TestDisplayCache:
    def test_a_link_planted_after_the_first_display_is_refused_at_full_resolution(self, tmp_path: Path) -> None:
        cache = DisplayCache(tmp_path / "cache", side=256)
        image = jpeg(tmp_path / "root" / "photo.jpg", (300, 200), (10, 200, 30))
        shown = cache.path_for(image)  # larger than the display side: a rendered copy; the original is not cached
        secret = tmp_path / "outside.jpg"
        Image.new("RGB", (300, 200), (255, 0, 0)).save(secret, "JPEG")
        (tmp_path / "root" / "photo.jpg").unlink()
        os.symlink(secret, tmp_path / "root" / "photo.jpg")
        with pytest.raises(InputError, match="image 1: 'photo.jpg' resolves outside the dataset root"):
            cache.path_for(image, side=0)
        with pytest.raises(InputError, match="outside the dataset root"):
            cache.path_for(image)  # checked on every serve, cached or not
        cached = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
        assert cached == [shown]
        assert all(not p.is_symlink() and p.read_bytes() != secret.read_bytes() for p in cached)

    def test_a_file_replaced_with_other_bytes_is_refused_and_nothing_is_cached(self, tmp_path: Path) -> None:
        cache = DisplayCache(tmp_path / "cache", side=256)
        small = jpeg(tmp_path / "root" / "small.jpg", (100, 80), (0, 0, 255))  # shown as it is
        large = jpeg(tmp_path / "root" / "large.jpg", (400, 300), (0, 255, 0))  # rendered
        for image in (small, large):
            Image.new("RGB", (image.width or 0, image.height or 0), (9, 9, 9)).save(Path(image.root or "") / image.path)
            for side in (None, 0):
                with pytest.raises(InputError, match=rf"'{image.path}' has changed since ingest"):
                    cache.path_for(image, side=side)
        assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]

    def test_a_huge_file_put_in_an_image_s_place_is_refused_before_it_is_copied(self, tmp_path: Path) -> None:
        cache = DisplayCache(tmp_path / "cache", side=256)
        image = jpeg(tmp_path / "root" / "photo.jpg", (100, 80), (0, 0, 255))
        with (tmp_path / "root" / "photo.jpg").open("r+b") as f:
            f.truncate(1 << 30)  # a sparse 1 GiB file: copying it before the check would write 1 GiB
        with pytest.raises(InputError, match=r"has changed since ingest \(1073741824 bytes, ingest recorded"):
            cache.path_for(image, side=0)
        assert sum(p.stat().st_size for p in (tmp_path / "cache").rglob("*") if p.is_file()) == 0

    def test_the_original_in_the_cache_is_a_checked_copy_not_a_link(self, tmp_path: Path) -> None:
        cache = DisplayCache(tmp_path / "cache", side=256)
        image = jpeg(tmp_path / "root" / "photo.jpg", (100, 80), (0, 0, 255))
        original = cache.path_for(image, side=0)
        source = tmp_path / "root" / "photo.jpg"
        assert original.read_bytes() == source.read_bytes()
        assert not original.is_symlink() and original.stat().st_ino != source.stat().st_ino

    def test_the_studio_shows_why_a_changed_image_cannot_be_shown(self, tmp_path: Path) -> None:
        studio = Studio(build_workspace(tmp_path), cache_dir=tmp_path / "cache", overlap=1)
        image_id = studio.queue.next_image(studio.user("lena")[0]) or 0
        stored = studio.stored_image(image_id)
        Image.new("RGB", (50, 50), (1, 2, 3)).save(Path(studio.root or "") / stored.path, "JPEG")
        card = card_api.open_image(studio, "lena", {"image_id": image_id})["card"]
        assert card["url"] == "" and card["image_error"].startswith(f"image {image_id} cannot be shown: ")
        assert "changed since ingest" in card["image_error"] and "\n" not in card["image_error"]
        with pytest.raises(InputError, match="changed since ingest"):
            card_api.full_resolution(studio, "lena", {"key": card["key"]})


EVIL_PAGE = """<!doctype html><title>another app on this machine</title><script>
window.attempts = (async () => {
  const studio = STUDIO;
  const out = {};
  const body = JSON.stringify(BODY);
  try {
    const r = await fetch(studio + 'gradio_api/component_server/', {method: 'POST', credentials: 'include',
      headers: {'Content-Type': 'application/json'}, body});
    out.json_post = r.status;
  } catch (e) { out.json_post = 'failed'; }
  try {  // a "simple" request: no preflight, the reply cannot be read, but the server would act on it
    await fetch(studio + 'gradio_api/component_server/', {method: 'POST', credentials: 'include', mode: 'no-cors',
      headers: {'Content-Type': 'text/plain'}, body});
    out.simple_post = 'sent';
  } catch (e) { out.simple_post = 'failed'; }
  try {
    const r = await fetch(studio + 'config', {credentials: 'include'});
    out.read_config = r.ok ? (await r.text()).length : r.status;
  } catch (e) { out.read_config = 'failed'; }
  return out;
})();
</script>"""


@pytest.mark.browser
def test_a_page_on_another_port_cannot_act_as_the_signed_in_user(server: tuple[str, Studio]) -> None:
    from tests.ui.test_browser import CHROMIUM, WAIT_MS, require_browser, sign_in

    require_browser()
    from playwright.sync_api import sync_playwright

    url, studio = server
    client = CardClient(url, "bob")  # a real card of bob's, for a decision the evil page would forge
    card = client.call("next", {})["card"]
    body = {"data": {"key": card["key"], "action": "original"}, "component_id": client.component,
            "fn_name": "decide", "session_hash": client.session}  # fmt: skip
    html = EVIL_PAGE.replace("STUDIO", json.dumps(url)).replace("BODY", json.dumps(body)).encode()

    class EvilPage(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args: Any) -> None:
            pass

    evil = ThreadingHTTPServer(("127.0.0.1", free_port()), EvilPage)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    before = count(studio)
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
            page = chromium.new_context().new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(url)
            sign_in(page, "bob")  # the studio's own page works, signed in
            page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
            attempts = page.evaluate("window.attempts")
            chromium.close()
    finally:
        evil.shutdown()
    assert attempts["json_post"] in (403, "failed"), attempts
    assert attempts["read_config"] in (403, "failed"), attempts
    assert count(studio) == before  # neither the preflighted nor the simple POST stored bob's decision


# --- served names, forwarded addresses, sign-out by POST, rebinding after a crash -----------------------------------


@contextmanager
def launched(tmp_path: Path, **options: Any) -> Iterator[tuple[str, Studio]]:
    """A studio of its own (its sign-in limits shared with no other test), served with `launch_app`'s `options`."""
    from ui.app import launch_app

    studio = Studio(build_workspace(tmp_path), cache_dir=tmp_path / "cache", overlap=1)
    port = free_port()
    app = launch_app(studio, port=port, exports_dir=tmp_path / "exports", block=False, **options)
    try:
        yield f"http://127.0.0.1:{port}/", studio
    finally:
        app.close()


def rotate_forwarded_for(url: str) -> httpx.Response:
    """FREE_PER_ADDRESS wrong sign-ins under as many names, each claiming another X-Forwarded-For address, then
    alice's right password from yet another claimed address."""
    for i in range(FREE_PER_ADDRESS):
        assert login(url, f"guess-{i}", "wrong-password", **{"X-Forwarded-For": f"10.9.0.{i}"}).status_code == 400
    return login(url, "alice", **{"X-Forwarded-For": "10.9.1.1"})


class TestServedNames:
    def test_host_names_and_the_served_set(self) -> None:
        assert host_name("127.0.0.1:7860") == "127.0.0.1" and host_name("[::1]:7860") == "::1"
        assert host_name("Studio.Lab.Example.") == "studio.lab.example" and host_name(None) is None
        assert host_name("127.0.0.1:99999") is None and host_name("") is None and host_name("a@127.0.0.1") is None
        served = served_hosts("0.0.0.0", ["studio.lab.example"])
        assert served == {"localhost", "127.0.0.1", "::1", "studio.lab.example"}  # a wildcard bind names nothing
        assert "10.0.0.5" in served_hosts("10.0.0.5")

    @pytest.mark.parametrize("value", ["http://studio.lab", "studio.lab:8080", "studio.lab/x", "*.lab", "", "a b"])
    def test_an_allowed_host_must_be_a_bare_name_or_address(self, value: str) -> None:
        with pytest.raises(InputError, match="is not a host name or address; give the name users type"):
            check_allowed_host(value)
        assert check_allowed_host(" Studio.Lab ") == "studio.lab" and check_allowed_host("[::1]") == "::1"

    @pytest.mark.parametrize("value", ["*", "proxy.lab", "10.0.0.300", ""])
    def test_a_trusted_proxy_must_be_an_address_or_network(self, value: str) -> None:
        with pytest.raises(InputError, match="is not an IP address or network"):
            check_trusted_proxy(value)
        assert check_trusted_proxy("10.0.0.7/24") == "10.0.0.0/24" and check_trusted_proxy("::1") == "::1/128"

    def test_a_rebinding_page_is_refused_before_login(self, server: tuple[str, Studio]) -> None:
        """A page at evil.example whose name now resolves to 127.0.0.1 is same-origin with itself; its requests
        still name its host, and are refused before any route."""
        url, _ = server
        port = url.rstrip("/").rsplit(":", 1)[1]
        evil = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        refused = login(url, "alice", **evil)
        assert refused.status_code == 403 and "host 'evil.example' is not served here" in refused.text
        assert "set-cookie" not in refused.headers
        page = httpx.get(url, headers={"Host": f"evil.example:{port}"}, timeout=60)
        assert page.status_code == 403
        assert httpx.get(url, headers={"Host": ""}, timeout=60).status_code in (400, 403)
        assert login(url, "alice", Host=f"localhost:{port}", Origin=f"http://localhost:{port}").status_code == 200

    def test_serve_refuses_a_bad_allowed_host_or_proxy_in_one_line(self, tmp_path: Path) -> None:
        from relabel.cli import cli

        ws = ["--workspace", str(tmp_path / "ws")]
        runner = CliRunner()
        assert runner.invoke(cli, [*ws, "init"]).exit_code == 0
        for option, value, message in (
            ("--allowed-host", "http://studio.lab", "is not a host name or address"),
            ("--trusted-proxy", "*", "is not an IP address or network"),
        ):
            refused = runner.invoke(cli, [*ws, "serve", option, value])
            assert refused.exit_code == 2 and message in refused.output, refused.output
            assert len(refused.output.strip().splitlines()) == 1 and "Traceback" not in refused.output


class TestForwardedAddresses:
    def test_a_rotated_x_forwarded_for_does_not_escape_the_address_limit(self, tmp_path: Path) -> None:
        with launched(tmp_path) as (url, _):
            refused = rotate_forwarded_for(url)
        assert refused.status_code == LOCKED_STATUS and "too many failed sign-ins for this address" in refused.text

    def test_a_configured_proxy_s_x_forwarded_for_names_the_client(self, tmp_path: Path) -> None:
        with launched(tmp_path, trusted_proxies=["127.0.0.1/32"]) as (url, _):
            signed_in = rotate_forwarded_for(url)  # each claimed address failed once: none is locked
        assert signed_in.status_code == 200, signed_in.text
        assert os.environ["FORWARDED_ALLOW_IPS"] == "127.0.0.1/32"


class TestSignOut:
    def test_a_get_signs_no_one_out_and_a_foreign_post_is_refused(self, server: tuple[str, Studio]) -> None:
        url, studio = server
        add_user(studio.engine, "leaver", Role.annotator, PASSWORD)
        with httpx.Client(base_url=url, timeout=60) as browser:
            assert browser.post("/login", data={"username": "leaver", "password": PASSWORD}).status_code == 200
            page = browser.get("/logout")  # what an <img src=/logout> on any page of the site sends
            assert page.status_code == 200 and '<form method="post" action="logout">' in page.text
            assert "frame-ancestors 'self'" in page.headers["content-security-policy"]
            assert browser.get("/config").status_code == 200  # still signed in
            foreign_post = browser.post("/logout", headers={"Origin": foreign(url)})
            assert foreign_post.status_code == 403 and browser.get("/config").status_code == 200
            cookies = dict(browser.cookies)
            signed_out = browser.post("/logout", headers={"Origin": url.rstrip("/")})
            assert signed_out.status_code == 302 and browser.get("/config").status_code == 401
        with httpx.Client(base_url=url, timeout=60, cookies=cookies) as replay:
            assert replay.get("/config").status_code == 401  # the session itself ended, not just the cookie


def test_the_port_can_be_bound_again_at_once_after_a_crash() -> None:
    """A crashed studio leaves its connections in TIME_WAIT; the free-port check binds with SO_REUSEADDR, as the
    server does, so `relabel serve` starts again at once; a port still listened on is refused."""
    import socket

    from relabel.common.errors import InputError as PortError
    from ui.cli import check_port_free

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's listening socket
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(PortError, match=f"cannot listen on 127.0.0.1:{port}"):
            check_port_free("127.0.0.1", port)
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server side closes first, as when its process dies: its end waits in TIME_WAIT
        client.recv(1)
        client.close()
    # what the check did before: the lingering connection blocks a plain bind
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))
    check_port_free("127.0.0.1", port)


SIGN_OUT_PAGE = """<!doctype html><title>another app on this machine</title>
<img id="probe" src="STUDIOlogout">
<script>
window.attempts = (async () => {
  await new Promise((done) => { const img = document.getElementById('probe'); img.onload = img.onerror = done;
    if (img.complete) done(); });
  try {
    await fetch(STUDIO + 'logout', {method: 'POST', credentials: 'include', mode: 'no-cors'});
    return 'sent';
  } catch (e) { return 'failed'; }
})();
</script>"""


@pytest.mark.browser
def test_a_page_on_another_port_cannot_sign_a_user_out_and_the_studio_s_control_can(
    server: tuple[str, Studio],
) -> None:
    from tests.ui.test_browser import CHROMIUM, WAIT_MS, require_browser, sign_in

    require_browser()
    from playwright.sync_api import sync_playwright

    url, studio = server
    add_user(studio.engine, "quitter", Role.annotator, PASSWORD)
    html = SIGN_OUT_PAGE.replace("STUDIOlogout", f"{url}logout").replace("STUDIO", json.dumps(url)).encode()

    class EvilPage(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args: Any) -> None:
            pass

    evil = ThreadingHTTPServer(("127.0.0.1", free_port()), EvilPage)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
            page = chromium.new_context().new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(url)
            sign_in(page, "quitter")
            page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
            attempt = page.evaluate("window.attempts")
            page.goto(url)
            page.locator("[data-mode=review] .rg-logout").wait_for()  # still signed in: the card, not the login
            still_in = page.get_by_label("username").count() == 0
            page.locator("[data-mode=review] .rg-logout").click()  # the card's sign-out posts its form
            page.get_by_label("username").wait_for()  # Gradio's sign-in form
            page.goto(url)
            page.get_by_label("username").wait_for()  # and the session is gone, not only this page
            chromium.close()
    finally:
        evil.shutdown()
    assert attempt in ("sent", "failed") and still_in
