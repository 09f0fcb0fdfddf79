"""`relabel.votes.posteriors.items_held` answers as the plain membership test it replaces, on awkward inputs."""

from __future__ import annotations

import numpy as np
import pytest

from relabel.common.errors import NotFoundError, RelabelError
from relabel.decisions.rules import DEFAULT_RULE, RULES, reads_votes
from relabel.votes.aggregation import METHODS
from relabel.votes.posteriors import check_rule, consensus_choices, items_held, original_items


def naive(pairs: np.ndarray, sets) -> np.ndarray:
    return np.array([c in sets.get(i, ()) for i, c in pairs.tolist()], bool)


def test_items_held_is_the_membership_test() -> None:
    rng = np.random.default_rng(0)
    pairs = np.stack([rng.integers(1, 300, 5000), rng.integers(0, 50, 5000)], axis=1)  # unsorted, repeated
    sets = {i: set(rng.integers(0, 60, rng.integers(0, 4)).tolist()) for i in range(0, 320, 2)}
    sets[7] = {-1, 10**9, 3}  # classes no pair can hold
    sets[9] = [4, 4]
    for s in (sets, {}, {1: ()}):
        assert (items_held(pairs, s) == naive(pairs, s)).all()
        assert (original_items(pairs, s) == naive(pairs, s)).all()
    assert items_held(np.zeros((0, 2), np.int64), sets).shape == (0,)
    negative = np.array([[1, -2], [1, 3]])
    assert items_held(negative, {1: {-2}}).tolist() == [True, False]


class TestConsensusChoices:
    """What a snapshot's consensus can be: the rules on the studio's decisions, then the aggregation methods."""

    def test_every_rule_and_method_is_offered_once_with_what_it_does(self) -> None:
        choices = consensus_choices()
        assert list(choices) == [*RULES, *METHODS] and next(iter(choices)) == DEFAULT_RULE
        assert all(choices[n] == RULES[n].description for n in RULES)
        assert all(choices[n] == METHODS[n].summary for n in METHODS)

    def test_a_name_registered_as_both_is_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(METHODS, DEFAULT_RULE, METHODS["majority"])
        with pytest.raises(RelabelError, match=f"{DEFAULT_RULE}: registered both as a consensus rule and as an"):
            consensus_choices()

    def test_a_rule_reads_no_votes_and_a_method_does(self) -> None:
        assert not check_rule(DEFAULT_RULE, 0.9) and check_rule("all-yes", 0.9)
        with pytest.raises(NotFoundError, match="unknown consensus rule 'bayes'; known: all-yes, ds, "):
            check_rule("bayes", 0.9)
        # a stored snapshot's settings: the studio's rule under its stored name, or a method (None: an old one)
        assert not reads_votes(None) and not reads_votes({"rule": "unanimous", "min_votes": 1})
        assert reads_votes({"rule": "ds", "threshold": 0.9})
