"""Each row's resampled top-1 on its own images: the same as the joint bootstrap's, and the same whatever other rows
are resampled beside it."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.errors import EvaluationError
from evaluator.paired import JointBootstrap
from relabel.evaluation.row_resamples import resample_top1


def rows(k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    scored = rng.random((k, n)) < 0.9
    scored[-1, n // 3 :] = False  # a partial run: a third of the images
    return (rng.random((k, n)) < 0.7) & scored, scored


def test_equals_the_joint_bootstrap_over_each_rows_own_images() -> None:
    correct, scored = rows(5, 3_000)

    got = resample_top1(correct, scored, 200, seed=7)

    expected = JointBootstrap(3_000, 200, 7).means(correct, scored)
    assert got.shape == (200, 5)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("k", [6, 12])  # einsum's sums, and a BLAS product's (from BLAS_ROWS rows)
def test_a_rows_values_do_not_depend_on_the_rows_beside_it(k: int) -> None:
    correct, scored = rows(k, 2_000)

    alone = resample_top1(correct[:1], scored[:1], 300, seed=1)
    among = resample_top1(correct, scored, 300, seed=1)

    assert np.array_equal(alone[:, 0], among[:, 0])
    assert not np.array_equal(among[:, 0], among[:, 1])  # the rows differ: the check above could fail


def test_a_draw_without_the_rows_images_is_nan() -> None:
    correct = np.array([[True, False, False]])
    scored = np.array([[True, False, False]])  # one image of three: some draws miss it

    got = resample_top1(correct, scored, 200, seed=0)[:, 0]

    assert np.isnan(got).any() and set(got[~np.isnan(got)]) == {1.0}


def test_refuses_mismatched_shapes() -> None:
    with pytest.raises(EvaluationError, match="same shape"):
        resample_top1(np.zeros((2, 5), bool), np.zeros((2, 4), bool), 10, 0)
