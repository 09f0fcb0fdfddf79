"""`resamples_kept`: inside the block a bootstrap's resamples are drawn once and read again, the same numbers;
outside it, and beyond its memory bound, they are drawn on every call and nothing is held."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator import paired
from evaluator.paired import JointBootstrap, resamples_kept


def drawn(n_images: int, n_boot: int = 30, seed: int = 5) -> list[np.ndarray]:
    return list(JointBootstrap(n_images, n_boot, seed).counts())


def test_kept_resamples_are_drawn_once_and_equal_the_fresh_ones() -> None:
    fresh = drawn(400)
    with resamples_kept():
        first, again = drawn(400), drawn(400)
        other_seed = drawn(400, seed=6)
    assert all(a is b for a, b in zip(first, again))  # read from memory, not drawn again
    assert np.array_equal(np.concatenate(first), np.concatenate(fresh))
    assert not np.array_equal(np.concatenate(other_seed), np.concatenate(fresh))
    with pytest.raises(ValueError, match="read-only"):
        first[0][0, 0] = 7  # one statistic cannot change another's resamples


def test_the_same_numbers_through_means_inside_and_outside_the_block() -> None:
    values = np.random.default_rng(0).random((3, 250)) < 0.6
    outside = JointBootstrap(250, 40, seed=2).means(values)
    with resamples_kept():
        JointBootstrap(250, 40, seed=2).means(values[:1])
        inside = JointBootstrap(250, 40, seed=2).means(values)
    assert np.array_equal(inside, outside)


def test_outside_the_block_nothing_is_held() -> None:
    with resamples_kept():
        pass
    first, again = drawn(400), drawn(400)
    assert not any(a is b for a, b in zip(first, again))
    assert np.array_equal(np.concatenate(first), np.concatenate(again))


def test_the_memory_bound_drops_the_oldest_and_skips_what_cannot_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paired, "KEPT_BYTES", 4 * 30 * 500)  # room for one 500-image set of 30 resamples
    monkeypatch.setattr(paired, "CHUNK_VALUES", 4_000)  # drawn in chunks of a few resamples: all of them count
    with resamples_kept():
        small = drawn(300)
        big = drawn(500)  # fits alone: the 300-image set is dropped
        assert not any(a is b for a, b in zip(small, drawn(300)))
        assert not any(a is b for a, b in zip(drawn(600), drawn(600)))  # larger than the bound: never held
        assert np.array_equal(np.concatenate(big), np.concatenate(drawn(500)))


def test_scratch_buffers_are_reused_inside_the_block_only() -> None:
    outside = [paired.scratch("t", (4, 5), np.float32) for _ in range(2)]
    assert not np.shares_memory(*outside)
    with resamples_kept():
        first = paired.scratch("t", (40, 50), np.float32)
        smaller = paired.scratch("t", (3, 7), np.uint32)
        other_name = paired.scratch("u", (3, 7), np.uint32)
        larger = paired.scratch("t", (80, 50), np.float32)
    assert first.shape == (40, 50) and smaller.shape == (3, 7) and smaller.dtype == np.uint32
    assert np.shares_memory(first, smaller) and not np.shares_memory(first, other_name)
    assert larger.shape == (80, 50) and not np.shares_memory(first, larger)  # grown: new memory
