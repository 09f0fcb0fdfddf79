"""The launched studio driven over HTTP with gradio_client: login, decisions, resends, roles."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

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
