"""Card tokens per user: a user who asks for cards without end drops only their own oldest tokens, never another
user's open card; a token still belongs to one user and one image."""

from __future__ import annotations

import pytest

from relabel.common.errors import ConflictError, StaleCardError
from relabel.review.tokens import CardTokens

ALICE, BOB = 1, 2


def issue(tokens: CardTokens, user_id: int, image_id: int) -> str:
    return tokens.issue(user_id, image_id, suggestion_id=None, suggested_class=None, original=(0,), last_event=None)


def test_a_flood_of_cards_for_one_user_keeps_every_other_user_s_tokens() -> None:
    tokens = CardTokens(limit=50)
    bobs = issue(tokens, BOB, 7)
    alices = [issue(tokens, ALICE, i) for i in range(1000)]  # twenty times alice's pool
    assert tokens.check(bobs, BOB, 7).image_id == 7  # bob's card still answers
    assert tokens.check(alices[-1], ALICE, 999).user_id == ALICE  # alice's newest too
    with pytest.raises(StaleCardError, match="not served by this studio session"):
        tokens.check(alices[0], ALICE, 0)  # only alice's oldest went
    assert [tokens.check(t, ALICE, 950 + i).image_id for i, t in enumerate(alices[-50:])] == list(range(950, 1000))


def test_a_token_is_another_card_for_another_user_or_image() -> None:
    tokens = CardTokens()
    token = issue(tokens, ALICE, 3)
    with pytest.raises(ConflictError, match="another card than image 3"):
        tokens.check(token, BOB, 3)
    with pytest.raises(ConflictError, match="another card than image 4"):
        tokens.check(token, ALICE, 4)
    assert tokens.check(token, ALICE, 3).image_id == 3
