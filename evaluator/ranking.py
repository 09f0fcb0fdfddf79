"""How the ranking of several models changes between two references (e.g. ImGT → ReGT, or two snapshots).

Ranks are 1 for the best score; tied scores share the best rank of their group (`scipy.stats.rankdata`, method
"min"). Kendall's τ (τ-b, which accounts for ties) compares the two score lists; it is NaN when either list is
constant, because a list without any order cannot agree or disagree with another.

Both score lists should be taken on the same images, or a shift mixes the change of reference with a change of
images. `rank_intervals` reads how sure a rank and a shift are from resampled scores: the models' scores under
both references in each of n_boot resamples of the images, drawn jointly for every model
(`evaluator.paired.JointBootstrap`), so a resample that makes the images harder makes them harder for every model.
Its intervals are percentile intervals of the integer ranks and shifts over the resamples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

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


@dataclass(frozen=True)
class RankInterval:
    """One model's rank under a and b and its places gained (a − b): percentile interval over joint resamples,
    and the share of resamples in which the model moved at all."""

    name: str
    rank_a: tuple[int, int]
    rank_b: tuple[int, int]
    shift: tuple[int, int]
    moved_share: float


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
    from scipy import stats  # here, not at the top: scipy.stats costs ~0.7 s, and most evaluations rank nothing

    rank_a = stats.rankdata(-a, method="min").astype(int)
    rank_b = stats.rankdata(-b, method="min").astype(int)
    rows = [RankChange(names[i], float(a[i]), float(b[i]), int(rank_a[i]), int(rank_b[i])) for i in range(len(a))]
    rows.sort(key=lambda r: (r.rank_b, r.rank_a, r.name))
    if np.ptp(a) == 0 or np.ptp(b) == 0:  # τ is undefined when one list has no order at all
        return RankingShift(tuple(rows), float("nan"), float("nan"))
    tau = stats.kendalltau(a, b)
    return RankingShift(tuple(rows), float(tau.statistic), float(tau.pvalue))


def rank_intervals(
    resampled_a: ArrayLike, resampled_b: ArrayLike, names: Sequence[str], level: float = 0.95
) -> tuple[RankInterval, ...]:
    """Rank and shift intervals of n_models models from scores (n_boot, n_models) under references a and b, the
    same row of both arrays being the same resample of the images (module docstring). NaN scores rank last."""
    a, b = _floats(resampled_a, "resampled_a"), _floats(resampled_b, "resampled_b")
    if a.ndim != 2 or a.shape != b.shape or a.shape[1] != len(names) or a.shape[0] == 0:
        raise EvaluationError(
            f"resampled scores must be (n_boot, {len(names)}) for {len(names)} names; got {a.shape} and {b.shape}"
        )
    if not 0 < level < 1:
        raise EvaluationError(f"level must be in (0, 1), got {level!r}")
    rank_a, rank_b = _ranks(a), _ranks(b)
    shift = rank_a - rank_b
    q = [(1 - level) / 2, (1 + level) / 2]

    def bounds(values: np.ndarray, i: int) -> tuple[int, int]:
        low, high = np.quantile(values[:, i], q, method="inverted_cdf")
        return int(low), int(high)

    return tuple(
        RankInterval(str(n), bounds(rank_a, i), bounds(rank_b, i), bounds(shift, i), float(np.mean(shift[:, i] != 0)))
        for i, n in enumerate(names)
    )


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Rank 1 = best within each row, ties share the best rank; NaN ranks after every number."""
    from scipy import stats

    return stats.rankdata(np.where(np.isnan(scores), np.inf, -scores), method="min", axis=1).astype(int)
