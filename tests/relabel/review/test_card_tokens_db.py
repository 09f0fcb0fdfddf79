"""Card tokens in the database: a card served by one studio process is answered on another on the same database
(two Studio objects with an engine each, on one SQLite file) and after a restart, for its own user and image only;
each user's pool is bounded without touching another user's tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from db import create_db_engine
from db.models import Annotation, CardToken
from relabel.common.errors import ConflictError, StaleCardError
from relabel.review.studio import Studio
from relabel.review.tokens import PRUNE_EVERY, DbCardTokens
from tests.studio_workspace import build_workspace


def studio_process(folder: Path, name: str) -> Studio:
    """One studio process on the workspace's database: an engine of its own."""
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    return Studio(engine, cache_dir=folder / f"cache-{name}", overlap=2)


def stored(studio: Studio) -> list[Annotation]:
    with Session(studio.engine) as s:
        return list(s.scalars(select(Annotation)))


def test_a_card_served_by_one_process_is_answered_on_another_and_after_a_restart(tmp_path: Path) -> None:
    build_workspace(tmp_path)
    first, second = studio_process(tmp_path, "a"), studio_process(tmp_path, "b")
    card, token = first.next_card("alice")
    assert card is not None
    saved = second.decide("alice", token, card.image_id, "original")
    assert [(r.id, r.image_id, r.client_token) for r in stored(first)] == [(saved.annotation_id, card.image_id, token)]
    assert second.decide("alice", token, card.image_id, "original").duplicate  # sent again: "already saved"
    other, other_token = first.next_card("alice")
    assert other is not None and other.image_id != card.image_id
    restarted = studio_process(tmp_path, "a2")
    assert not restarted.decide("alice", other_token, other.image_id, "none_fit").duplicate
    assert len(stored(first)) == 2


def test_a_token_speaks_only_for_its_own_user_and_image_in_every_process(tmp_path: Path) -> None:
    build_workspace(tmp_path)
    first, second = studio_process(tmp_path, "a"), studio_process(tmp_path, "b")
    card, token = first.next_card("alice")
    assert card is not None
    with pytest.raises(ConflictError, match=f"another card than image {card.image_id}"):
        second.decide("bob", token, card.image_id, "original")
    with pytest.raises(StaleCardError, match="not served by this studio session"):
        second.decide("alice", "0" * 24, card.image_id, "original")
    assert stored(first) == []


def test_each_user_s_pool_is_bounded_and_a_flood_drops_only_their_own_oldest(tmp_path: Path) -> None:
    engine = build_workspace(tmp_path)
    tokens, elsewhere = DbCardTokens(engine, limit=20), DbCardTokens(create_db_engine(str(engine.url)), limit=20)

    def issue(user_id: int, image_id: int) -> str:
        return tokens.issue(user_id, image_id, suggestion_id=None, suggested_class=7, original=(3, 4), last_event=9)

    bobs = issue(2, 1)
    alices = [issue(1, 1 + i % 6) for i in range(100)]
    assert elsewhere.check(bobs, 2, 1).suggested_class == 7
    shown = elsewhere.check(alices[-1], 1, 1 + 99 % 6)
    assert (shown.original, shown.last_event, shown.user_id) == ((3, 4), 9, 1)
    with pytest.raises(StaleCardError):
        elsewhere.check(alices[79], 1, 1 + 79 % 6)  # the 21st newest went
    assert [elsewhere.check(t, 1, 1 + (80 + i) % 6).image_id for i, t in enumerate(alices[80:])] == [
        1 + (80 + i) % 6 for i in range(20)
    ]
    with Session(engine) as s:  # alice's rows beyond her pool go every PRUNE_EVERY cards; bob's one stays
        assert 21 <= s.scalar(select(func.count()).select_from(CardToken)) <= 21 + PRUNE_EVERY


def test_the_time_on_a_card_is_measured_on_the_wall_clock_across_processes(tmp_path: Path) -> None:
    engine = build_workspace(tmp_path)
    now = [1_800_000_000.0]
    tokens = DbCardTokens(engine, clock=lambda: now[0])
    token = tokens.issue(1, 2, suggestion_id=None, suggested_class=None, original=(0,), last_event=None)
    assert DbCardTokens(engine).check(token, 1, 2).at == 1_800_000_000.0
