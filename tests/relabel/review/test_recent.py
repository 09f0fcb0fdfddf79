"""A user's day and recent decisions read from the decision log (`relabel.review.recent`), on SQLite and
PostgreSQL: today is the UTC day, an undone decision does not count and is marked in the list, each image is listed
once at its newest decision, and other users' decisions are never counted or listed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlmodel import col

from db.enums import Verdict
from db.models import Annotation
from relabel.review.recent import day_start, decided_today, recent_decisions, utc
from relabel.review.studio import Studio
from tests.studio_workspace import build_workspace


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    return Studio(build_workspace(tmp_path, db_url), cache_dir=tmp_path / "cache", overlap=2)


def decide(studio: Studio, user: str, image_id: int, action: str = "original") -> None:
    _, token = studio.open_card(user, image_id)
    studio.decide(user, token, image_id, action)


def today_of(studio: Studio, user: str, now: datetime | None = None) -> int:
    with studio.engine.connect() as conn:
        return decided_today(conn, studio.dataset_id, studio.user(user)[0], now or datetime.now(timezone.utc))


def recent_of(studio: Studio, user: str, limit: int = 20) -> list[tuple[int, Verdict, bool]]:
    with studio.engine.connect() as conn:
        found = recent_decisions(conn, studio.dataset_id, studio.user(user)[0], limit=limit)
    return [(d.image_id, d.verdict, d.undone) for d in found]


def move_to(studio: Studio, image_id: int, when: datetime) -> None:
    with studio.engine.begin() as conn:
        conn.execute(update(Annotation).where(col(Annotation.image_id) == image_id).values(created_at=when))


def test_today_counts_the_images_decided_since_midnight_utc_and_not_undone(studio: Studio) -> None:
    a, b, c, d = studio.queue.order[:4]
    assert today_of(studio, "alice") == 0
    decide(studio, "alice", a)
    decide(studio, "alice", a, "none_fit")  # decided again: still one image
    for image_id in (b, c):
        decide(studio, "alice", image_id)
    decide(studio, "bob", d)  # another user's decision
    assert today_of(studio, "alice") == 3 and today_of(studio, "bob") == 1
    assert studio.undo("alice") == c  # undone: no longer counted
    assert today_of(studio, "alice") == 2
    move_to(studio, a, datetime.now(timezone.utc) - timedelta(days=1))  # its two events were yesterday's
    assert today_of(studio, "alice") == 1
    tomorrow = datetime.now(timezone.utc) + timedelta(days=1)
    assert today_of(studio, "alice", tomorrow) == 0  # a new UTC day starts from zero


def test_recent_lists_each_image_once_newest_first_with_undone_marked(studio: Studio) -> None:
    a, b, c, d = studio.queue.order[:4]
    for image_id in (a, b, c):
        decide(studio, "alice", image_id)
    decide(studio, "alice", a, "unclear")  # a's newest decision, now the newest of all
    decide(studio, "bob", d)
    decide(studio, "alice", d)
    assert studio.undo("alice") == d
    assert recent_of(studio, "alice") == [
        (d, Verdict.labels, True),  # undone, still listed so it can be opened and decided again
        (a, Verdict.unclear, False),
        (c, Verdict.labels, False),
        (b, Verdict.labels, False),
    ]
    assert recent_of(studio, "alice", limit=2) == [(d, Verdict.labels, True), (a, Verdict.unclear, False)]
    assert recent_of(studio, "bob") == [(d, Verdict.labels, False)]
    assert recent_of(studio, "lena") == []


def test_times_are_utc_whatever_the_database_hands_back() -> None:
    naive = datetime(2026, 3, 4, 23, 59, 30)
    assert utc(naive) == datetime(2026, 3, 4, 23, 59, 30, tzinfo=timezone.utc)
    east = datetime(2026, 3, 5, 1, 0, tzinfo=timezone(timedelta(hours=2)))  # 23:00 UTC the day before
    assert day_start(east) == datetime(2026, 3, 4, tzinfo=timezone.utc)
