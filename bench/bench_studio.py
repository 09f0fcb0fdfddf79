"""The annotation studio on a 50,000-image workspace with 150,000 decisions: handler time, HTTP round trips,
concurrent annotators, server memory.

1. Server side: the review handlers called in-process (`ui.card_api.next_card`, and `Studio.decide`, the save
   alone), rotating over the annotators (16 unless --users says); p50 / p95 in ms.
2. Client observed: `relabel serve` in its own process; one annotator over HTTP on 127.0.0.1 (login, then each
   action sent as the card's page script sends it: one POST to Gradio's `/component_server` route), timing "next
   card" and "save" (which answers with the next card), plus fetching the card's image file.
3. Load: 16 simulated annotators in threads, 200 decisions each, as fast as the server answers, timed from when all
   of them are signed in with their first card on screen (sign-in is reported apart); decisions/s, then
   the database is checked: every acknowledged decision stored once (0 lost, 0 duplicated), and no "database is
   locked" error anywhere. The server's peak RSS (VmHWM) is read from /proc.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_studio.py --write
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from benchlib import MET, REPO, SHARED, command_line, machine_line, write_section
from sqlalchemy import text
from studio_workspace import DISTINCT, N_IMAGES, PASSWORD, build

from db import create_db_engine
from relabel.review.queue import one_look
from relabel.review.studio import Studio
from ui import card_api

sys.path.insert(0, str(REPO))  # the HTTP card client lives in tests/, which is not an installed package
from tests.studio_workspace import CardClient  # noqa: E402

SECTION = "## Studio: 50,000 images, 150,000 decisions"
OVERLAP = 5  # the workspace's images already hold 3 decisions each; 2 more opinions per image are wanted


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(values: list[float]) -> tuple[float, float]:
    return pct(values, 0.5) * 1e3, pct(values, 0.95) * 1e3


# -- 1. in-process handlers ------------------------------------------------------------------------------------


def server_side(folder: Path, rounds: int, users: int) -> dict[str, list[float]]:
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    started = time.perf_counter()
    studio = Studio(engine, cache_dir=folder / "cache", overlap=OVERLAP)
    out: dict[str, list[float]] = {"startup": [time.perf_counter() - started], "next": [], "save": []}
    for i in range(rounds):
        user = f"bench{i % users:02d}"
        t0 = time.perf_counter()
        with one_look():  # one request, as the server runs each handler (`ui.card_component`)
            card = card_api.next_card(studio, user, {})["card"]
        t1 = time.perf_counter()
        image_id, token = card_api.parse_key(card)
        with one_look():
            studio.decide(user, token, image_id, "original")
        out["next"].append(t1 - t0)
        out["save"].append(time.perf_counter() - t1)
    engine.dispose()
    return out


# -- 2 and 3. over HTTP ----------------------------------------------------------------------------------------


class Annotator:
    """One signed-in browser session of the studio, sending each action as the card's page script does."""

    def __init__(self, url: str, user: str) -> None:
        self.client = CardClient(url, user, PASSWORD)
        self.card: dict = {}

    def call(self, fn: str, data: dict) -> dict:
        reply = self.client.call(fn, data)
        if reply.get("error"):
            raise RuntimeError(f"{fn}: {reply['error'][:300]}")
        self.card = reply.get("card") or {}
        return reply

    def next_card(self) -> dict:
        return self.call("next", {})

    def save(self, action: str = "original") -> dict:
        return self.call("decide", {"key": self.card["key"], "action": action})

    def fetch_image(self) -> None:
        if self.card.get("url"):
            self.client.http.get("/" + self.card["url"]).raise_for_status()


def start_server(folder: Path, port: int) -> subprocess.Popen:
    relabel = Path(sys.executable).with_name("relabel")
    proc = subprocess.Popen(
        [str(relabel), "--workspace", str(folder), "serve", "--overlap", str(OVERLAP), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"benchmark aborted: the studio did not start: {proc.stdout.read() if proc.stdout else ''}")


def client_side(url: str, rounds: int, user: str) -> dict[str, list[float]]:
    one = Annotator(url, user)
    one.next_card()
    out: dict[str, list[float]] = {"next": [], "save": [], "image": []}
    for _ in range(rounds):
        t0 = time.perf_counter()
        one.next_card()
        t1 = time.perf_counter()
        one.fetch_image()
        t2 = time.perf_counter()
        one.save()
        out["next"].append(t1 - t0)
        out["image"].append(t2 - t1)
        out["save"].append(time.perf_counter() - t2)
    return out


def load_test(url: str, users: int, per_user: int) -> dict[str, object]:
    acked: list[tuple[str, str]] = []  # (user, card key) of every acknowledged decision
    errors: list[str] = []
    lock = threading.Lock()

    def work(k: int) -> None:
        user = f"bench{k:02d}"
        try:
            a = Annotator(url, user)
            a.call("boot", {})
        except Exception as exc:
            with lock:
                errors.append(f"{user}: {exc}")
            a = None
        ready.wait()  # every annotator signed in with the page loaded: the timed part is steady-state reviewing
        if a is None:
            return
        try:
            for _ in range(per_user):
                key = a.card.get("key")
                if not key:
                    break
                a.save("original" if k % 3 else "none_fit")
                with lock:
                    acked.append((user, key))
        except Exception as exc:  # counted and reported, the run goes on
            with lock:
                errors.append(f"{user}: {exc}")

    ready = threading.Barrier(users + 1)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(users)]
    signing_in = time.perf_counter()
    for t in threads:
        t.start()
    ready.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    return {
        "seconds": time.perf_counter() - started,
        "sign_in_seconds": started - signing_in,
        "acked": acked,
        "errors": errors,
    }


def check_database(folder: Path, acked: list[tuple[str, str]], users: int) -> dict[str, int]:
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    with engine.connect() as conn:
        tokens = {
            t for (t,) in conn.execute(text("select client_token from annotations where client_token is not null"))
        }
        duplicated = conn.execute(
            text(
                "select count(*) from (select a.user_id, a.image_id from annotations a join users u on u.id = a.user_id"
                " where u.name like 'bench%' and a.verdict != 'retract' group by a.user_id, a.image_id"
                " having count(*) > 1)"
            )
        ).scalar()
        stored = conn.execute(
            text("select count(*) from annotations a join users u on u.id = a.user_id where u.name like 'bench%'")
        ).scalar()
    engine.dispose()
    lost = sum(key.split(":", 1)[1] not in tokens for _, key in acked)
    return {"stored": int(stored or 0), "lost": lost, "duplicated": int(duplicated or 0)}


def rss_kib(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=300, help="sequential next+save rounds (server and client)")
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--per-user", type=int, default=200)
    parser.add_argument("--port", type=int, default=7899)
    parser.add_argument("--keep", type=Path, help="build the workspace here and keep it")
    parser.add_argument("--write", action="store_true", help="write the section of BENCHMARKS.md")
    args = parser.parse_args()
    sample = SHARED / "imagenet-sample"
    if not sample.is_dir():
        raise SystemExit(f"benchmark aborted: {sample} not found")
    machine = machine_line()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="studio-bench-"))
    try:
        t = time.perf_counter()
        build(folder, sample, args.users)
        built = time.perf_counter() - t
        inproc = server_side(folder, args.rounds, args.users)
        proc = start_server(folder, args.port)
        try:
            url = f"http://127.0.0.1:{args.port}"
            client = client_side(url, args.rounds, f"bench{args.users - 1:02d}")
            load = load_test(url, args.users, args.per_user)
            rss, hwm = rss_kib(proc.pid)
        finally:
            proc.terminate()
            log = proc.communicate(timeout=30)[0]
        db = check_database(folder, load["acked"], args.users)  # type: ignore[arg-type]
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    locked = sum("locked" in e for e in load["errors"]) + log.count("database is locked")  # type: ignore[union-attr]
    report(args, machine, built, inproc, client, load, db, locked, rss, hwm)


def report(args, machine, built, inproc, client, load, db, locked, rss, hwm) -> None:  # type: ignore[no-untyped-def]
    acked = len(load["acked"])
    rate = acked / load["seconds"]
    rows = [
        ("next card, handler (in-process)", *ms(inproc["next"]), 20),
        ("save, handler (in-process)", *ms(inproc["save"]), 20),
        ("next card, over HTTP", *ms(client["next"]), 100),
        ("save + next card, over HTTP", *ms(client["save"]), 100),
        ("card image file, over HTTP", *ms(client["image"]), None),
    ]
    lines = [
        SECTION,
        "",
        f"- Command: `{command_line()}`",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine}",
        f"- Workspace: {N_IMAGES:,} images (the sample photos hard-linked; the first {DISTINCT:,} in review order "
        "distinct files, so every card shown has its own file, hash and display copy), ImGT, a "
        f"top-5 classifier run, an OW run, 150,000 decisions by 10 past annotators; SQLite (WAL); overlap "
        f"{OVERLAP}; built by bulk inserts in {built:.1f} s; studio start-up (queue and evidence) "
        f"{inproc['startup'][0]:.1f} s",
        f'- Sequential: {args.rounds} rounds of next card + save ("original is right"), {args.users} annotators in '
        "turn in-process, one annotator over HTTP (`relabel serve` in its own process)",
        "",
        "| operation | p50 ms | p95 ms | target p95 | met |",
        "|---|---:|---:|---:|---|",
    ]
    for name, p50, p95, target in rows:
        met = MET[p95 <= target] if target else "—"
        lines.append(f"| {name} | {p50:.1f} | {p95:.1f} | {target or '—'} | {met} |")
    lines += [
        "",
        f"Load: {args.users} annotators × {args.per_user} decisions over HTTP, each saving as fast as the server "
        f"answers (every save returns the next card), timed once all were signed in with their first card "
        f"(signing in, loading the page and the first card took {load['sign_in_seconds']:.1f} s for all "
        f"{args.users}).",
        "",
        "| measure | value | target | met |",
        "|---|---:|---|---|",
        f"| decisions acknowledged | {acked:,} in {load['seconds']:.1f} s | {args.users * args.per_user:,} | "
        f"{MET[acked == args.users * args.per_user]} |",
        f"| decisions/s | {rate:.1f} | ≥ 50 | {MET[rate >= 50]} |",
        f"| lost (acknowledged, not stored) | {db['lost']} | 0 | {MET[db['lost'] == 0]} |",
        f"| duplicated (same user, same image) | {db['duplicated']} | 0 | {MET[db['duplicated'] == 0]} |",
        f'| "database is locked" errors | {locked} | 0 | {MET[locked == 0]} |',
        f"| client errors | {len(load['errors'])} | 0 | {MET[not load['errors']]} |",
        f"| server RSS at the end / peak | {rss / 1024:.0f} MiB / {hwm / 1024:.0f} MiB | — | — |",
    ]
    if load["errors"]:
        lines += ["", "First errors: " + "; ".join(e[:200] for e in load["errors"][:3])]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
