"""How many times a decision in the studio talks to the database: the statements one "decide" reply runs (the
decision stored and the next card served as the page gets it: thumbnails, the user's day, comments), counted with
SQLAlchemy's `before_cursor_execute`, and the pings before them (none: a connection the server closed is noticed
without one, `db.engine`). Two annotators take turns, as on a shared queue with overlap 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event

from relabel.review.studio import Studio
from tests.studio_workspace import build_workspace
from ui.card_component import handlers

# store the decision 9 (6 of them the checks of `relabel.decisions.annotations`), serve the next card 7
MAX_STATEMENTS = 16


def test_a_decision_with_the_next_card_takes_few_statements_and_no_ping(db_url: str, tmp_path: Path) -> None:
    engine = build_workspace(tmp_path, db_url, extra=24)
    studio = Studio(engine, cache_dir=tmp_path / "cache", overlap=2)
    card = handlers(studio, "review")
    counted = {"statements": 0, "pings": 0}
    event.listen(
        engine, "before_cursor_execute", lambda *_: counted.__setitem__("statements", counted["statements"] + 1)
    )
    pinged = engine.dialect.do_ping

    def ping(dbapi_connection: Any) -> bool:
        counted["pings"] += 1
        return bool(pinged(dbapi_connection))

    engine.dialect.do_ping = ping  # type: ignore[method-assign]
    shown = {user: card["next"](studio, user, {})["card"] for user in ("alice", "bob")}
    per_decision = []
    for k in range(12):
        user = ("alice", "bob")[k % 2]
        studio._prefetch.submit(lambda: None).result()  # the previous card's prefetch counts for that card
        counted.update(statements=0, pings=0)
        reply = card["decide"](studio, user, {"key": shown[user]["key"], "action": "original"})
        studio._prefetch.submit(lambda: None).result()
        assert "error" not in reply and reply["card"] is not None, reply
        shown[user] = reply["card"]
        per_decision.append((counted["statements"], counted["pings"]))
    assert max(s for s, _ in per_decision) <= MAX_STATEMENTS, per_decision
    assert all(p == 0 for _, p in per_decision), per_decision
