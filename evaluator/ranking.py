"""How the ranking of several models changes between two references (e.g. ImGT → ReGT, or two snapshots).

Ranks are 1 for the best score; tied scores share the best rank of their group (`scipy.stats.rankdata`, method
"min"). Kendall's τ (τ-b, which accounts for ties) compares the two score lists; it is NaN when either list is
constant, because a list without any order cannot agree or disagree with another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from evaluator.errors import EvaluationError


@dataclass(frozen=True)
class RankChange:
    """One model's score and rank (1 = best; ties share the best rank) under references a and b."""

    name: str
    score_a: float
    score_b: float
    rank_a: int
    rank_b: int

    @property
    def shift(self) -> int:
        """Places gained under b: positive moved up, negative moved down."""
        return self.rank_a - self.rank_b


@dataclass(frozen=True)
class RankingShift:
    """The models in order of rank under b, and Kendall's τ between the two score lists (NaN if either is flat)."""

    rows: tuple[RankChange, ...]
    kendall_tau: float
    p_value: float

    @property
    def moved(self) -> tuple[RankChange, ...]:
        return tuple(r for r in self.rows if r.shift != 0)


def ranking_shift(scores_a: ArrayLike, scores_b: ArrayLike, names: Sequence[str] | None = None) -> RankingShift:
    """How the ranking of n_models models changes from reference a to reference b (scores: (n_models,) floats)."""
    a, b = _floats(scores_a, "scores_a"), _floats(scores_b, "scores_b")
    if a.ndim != 1 or a.shape != b.shape or len(a) < 2:
        raise EvaluationError(f"scores_a and scores_b must be 1-D, equal length ≥ 2; got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise EvaluationError("scores must be finite numbers (a model whose every call failed has no rank)")
    labels = [f"model {i}" for i in range(len(a))] if names is None else [str(n) for n in names]
    if len(labels) != len(a):
        raise EvaluationError(f"{len(labels)} names for {len(a)} models")
    return _compute_ranking_shift(a, b, labels)


def _floats(values: ArrayLike, what: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise EvaluationError(f"{what} must be numbers, got {values!r:.80}") from None


def _compute_ranking_shift(a: np.ndarray, b: np.ndarray, names: list[str]) -> RankingShift:
    rank_a = stats.rankdata(-a, method="min").astype(int)
    rank_b = stats.rankdata(-b, method="min").astype(int)
    rows = [RankChange(names[i], float(a[i]), float(b[i]), int(rank_a[i]), int(rank_b[i])) for i in range(len(a))]
    rows.sort(key=lambda r: (r.rank_b, r.rank_a, r.name))
    if np.ptp(a) == 0 or np.ptp(b) == 0:  # τ is undefined when one list has no order at all
        return RankingShift(tuple(rows), float("nan"), float("nan"))
    tau = stats.kendalltau(a, b)
    return RankingShift(tuple(rows), float(tau.statistic), float(tau.pvalue))
