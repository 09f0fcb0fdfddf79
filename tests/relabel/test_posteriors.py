"""`relabel.posteriors.items_held` answers as the plain membership test it replaces, on awkward inputs."""

from __future__ import annotations

import numpy as np

from relabel.posteriors import items_held, original_items


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
