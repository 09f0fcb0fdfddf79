"""`IndexDraws`: the image indices of numpy's `integers(0, n, dtype=np.int32)`, bit for bit, read from raw words."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.index_draws import MAX_IMAGES, IndexDraws
from evaluator.paired import JointBootstrap


@pytest.mark.parametrize("n", [2, 5, 50_000, 2**30 + 1, 3 * 2**29 + 7, MAX_IMAGES])
def test_the_draws_are_numpys_in_any_split_of_the_stream(n: int) -> None:
    # 2^30 + 1 rejects about a quarter of the words, so the rejection path and the words carried between calls
    # (an odd number read, half of a raw output left) are both taken many times
    draws, rng = IndexDraws(7, n), np.random.default_rng(7)
    for count in (1, 2, 3, 7, 100, 1, 999, 4096, 13):
        assert np.array_equal(draws.take(count), rng.integers(0, n, size=count, dtype=np.int32))


def test_sizes_outside_numpys_int32_path_are_refused() -> None:
    for n in (1, MAX_IMAGES + 1):
        with pytest.raises(ValueError, match="n must be in"):
            IndexDraws(0, n)


@pytest.mark.parametrize(("n_images", "n_boot"), [(1, 3), (2, 40), (333, 50), (4_001, 9)])
def test_joint_bootstrap_counts_are_those_of_numpys_integers(n_images: int, n_boot: int) -> None:
    draws = np.random.default_rng(3).integers(0, n_images, size=(n_boot, n_images), dtype=np.int32)
    expected = np.stack([np.bincount(row, minlength=n_images) for row in draws]).astype(np.float32)
    assert np.array_equal(np.concatenate(list(JointBootstrap(n_images, n_boot, seed=3).counts())), expected)
