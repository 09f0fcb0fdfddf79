"""The normal quantiles `evaluator.intervals` holds for the usual levels are scipy's, bit for bit."""

from __future__ import annotations

import pytest
from scipy import special

from evaluator import intervals


@pytest.mark.parametrize("level", sorted(intervals._Z))
def test_the_held_quantiles_are_scipys(level: float) -> None:
    assert intervals._z(level) == float(special.ndtri((1 + level) / 2))


def test_another_level_is_asked_of_scipy() -> None:
    assert 0.8 not in intervals._Z and intervals._z(0.8) == float(special.ndtri(0.9))
    with pytest.raises(intervals.EvaluationError, match="level"):
        intervals._z(1.5)
