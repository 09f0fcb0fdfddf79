"""ARGUS-style reliability: capability, cross-dataset consistency, robustness retention and efficiency.

Each part is a number in [0, 1], higher is better, and the overall score is their weighted mean.

capability (P)
    Mean of the scores over every dataset/split × protocol cell. Scores must already be in [0, 1] (an
    accuracy); NaN is rejected rather than skipped, so two models are never compared over different cells.
cross-dataset consistency (CDC)
    CDC = 1 − mean_i |a_i − ā| / ā over the per-dataset scores a_i (the mean absolute deviation relative to the
    mean), clipped to [0, 1]. One dataset gives 1. ā = 0 gives 0: a model that scores nothing anywhere has no
    capability to be consistent about, and 0 keeps the weighted mean from rewarding it.
robustness retention (RR)
    RR = mean over perturbations × severities of min(perturbed / clean, 1). Each term is clipped to [0, 1] so a
    perturbation that happens to help does not buy back the loss on another one. `clean` may be one number or
    an array that broadcasts against `perturbed` (e.g. one clean score per dataset); a term whose clean score
    is 0 counts 0, for the same reason as ā = 0 above.
efficiency (E)
    Relative to the compared models: for a cost (latency p50 and p95 per image, peak memory, parameters, FLOPs)
    the term is min over models / value; for throughput it is value / max over models. So the best model on a
    measure gets 1 and one twice as costly gets 0.5. A measure enters only when it is known for every compared
    model (a model is never rewarded for an unknown), and E is the mean of the terms that entered. A single
    model gets 1.0.
overall
    Σ w_j · part_j / Σ w_j over the four parts; equal weights by default. Weights are non-negative, finite and
    not all 0; they are normalised to sum to 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError
from evaluator.ranking import ranking_shift

PARTS = ("capability", "consistency", "robustness", "efficiency")
COSTS = ("latency_p50_s", "latency_p95_s", "peak_memory_bytes", "n_parameters", "flops")
BENEFITS = ("throughput_per_s",)


@dataclass(frozen=True)
class ReliabilityParts:
    """The four parts of one model, each in [0, 1]."""

    capability: float
    consistency: float
    robustness: float
    efficiency: float

    def __post_init__(self) -> None:
        for name in PARTS:
            _check_unit(np.asarray(getattr(self, name), dtype=np.float64), name)


@dataclass(frozen=True)
class EfficiencyMeasurement:
    """What was measured for one model; None = not known. Every known value is finite and > 0.

    Latencies in seconds per image, peak memory in bytes, throughput in images per second.
    """

    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    peak_memory_bytes: float | None = None
    throughput_per_s: float | None = None
    n_parameters: float | None = None
    flops: float | None = None


@dataclass(frozen=True)
class LatencySummary:
    """Per-image latency in seconds: median, 95th percentile (linear interpolation) and mean over n images."""

    n: int
    p50_s: float
    p95_s: float
    mean_s: float


@dataclass(frozen=True)
class ReliabilityRow:
    """One model of a comparison: its parts, overall score, and rank by capability alone and by overall."""

    name: str
    parts: ReliabilityParts
    overall: float
    rank_by_capability: int
    rank_by_overall: int

    @property
    def shift(self) -> int:
        """Places gained by ranking on the overall score instead of capability alone."""
        return self.rank_by_capability - self.rank_by_overall


@dataclass(frozen=True)
class ReliabilityTable:
    """Rows in order of overall rank; Kendall's τ between the two rankings' scores (NaN if either is flat)."""

    rows: tuple[ReliabilityRow, ...]
    kendall_tau: float

    def as_records(self) -> list[dict[str, object]]:
        """One flat dict per row, for a CSV writer or a data frame."""
        return [
            {"name": r.name, **asdict(r.parts), "overall": r.overall, "rank_by_capability": r.rank_by_capability,
             "rank_by_overall": r.rank_by_overall, "shift": r.shift}
            for r in self.rows
        ]  # fmt: skip


def capability(scores: ArrayLike) -> float:
    """P: the mean of `scores`, any non-empty shape (datasets/splits × protocols), every value in [0, 1]."""
    arr = _unit_array(scores, "capability scores")
    return float(arr.mean())


def cross_dataset_consistency(scores: ArrayLike) -> float:
    """CDC in [0, 1] from per-dataset scores (n_datasets,) in [0, 1]; see the module docstring."""
    arr = _unit_array(scores, "per-dataset scores")
    if arr.ndim != 1:
        raise EvaluationError(f"per-dataset scores must be 1-D (one per dataset), got shape {arr.shape}")
    return _compute_cdc(arr)


def robustness_retention(clean: ArrayLike, perturbed: ArrayLike) -> float:
    """RR in [0, 1]: `perturbed` (perturbations × severities, any non-empty shape) and `clean` in [0, 1].

    `clean` is a number or an array that broadcasts against `perturbed`.
    """
    base = _unit_array(clean, "clean scores")
    after = _unit_array(perturbed, "perturbed scores")
    try:
        base, after = np.broadcast_arrays(base, after)
    except ValueError:
        raise EvaluationError(f"clean scores {base.shape} do not broadcast against perturbed {after.shape}") from None
    return _compute_rr(base, after)


def efficiency(measurements: Sequence[EfficiencyMeasurement]) -> np.ndarray:
    """E in (0, 1] for each of n_models models, relative to each other; returns (n_models,) float."""
    if not measurements:
        raise EvaluationError("efficiency needs at least one model's measurements")
    columns = {}
    for field in (*COSTS, *BENEFITS):
        values = [getattr(m, field) for m in measurements]
        if any(v is None for v in values):
            continue
        arr = np.asarray(values, dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(arr) | (arr <= 0))
        if len(bad):
            raise EvaluationError(f"model {bad[0]} has {field} = {values[bad[0]]!r}; measurements must be > 0")
        columns[field] = arr
    if not columns:
        known = ", ".join((*COSTS, *BENEFITS))
        raise EvaluationError(f"no measure is known for every model; give at least one of {known} for all")
    return _compute_efficiency(columns)


def overall(
    capability: float, consistency: float, robustness: float, efficiency: float,
    weights: Mapping[str, float] | None = None,
) -> float:  # fmt: skip
    """Weighted mean in [0, 1] of the four parts; `weights` maps each name in PARTS to a weight (default equal)."""
    parts = ReliabilityParts(capability, consistency, robustness, efficiency)
    return _compute_overall(parts, _check_weights(weights))


def compare_rankings(
    models: Mapping[str, ReliabilityParts], weights: Mapping[str, float] | None = None
) -> ReliabilityTable:
    """The ranking by capability alone against the ranking by overall score, for two or more models."""
    if len(models) < 2:
        raise EvaluationError(f"comparing rankings needs at least 2 models, got {len(models)}")
    bad = [name for name, parts in models.items() if not isinstance(parts, ReliabilityParts)]
    if bad:
        raise EvaluationError(f"model {bad[0]!r}: expected ReliabilityParts, got {type(models[bad[0]]).__name__}")
    w = _check_weights(weights)
    names = list(models)
    scores = {name: _compute_overall(parts, w) for name, parts in models.items()}
    shift = ranking_shift([models[n].capability for n in names], [scores[n] for n in names], names)
    rows = tuple(ReliabilityRow(r.name, models[r.name], scores[r.name], r.rank_a, r.rank_b) for r in shift.rows)
    return ReliabilityTable(rows, shift.kendall_tau)


def summarize_latencies(seconds: ArrayLike) -> LatencySummary:
    """p50, p95 and mean of per-image latencies in seconds (a non-empty 1-D sequence of values ≥ 0)."""
    try:
        arr = np.asarray(seconds, dtype=np.float64)
    except (TypeError, ValueError):
        raise EvaluationError(f"latencies must be numbers of seconds, got {seconds!r:.80}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise EvaluationError(f"latencies must be a non-empty 1-D sequence, got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
    if len(bad):
        raise EvaluationError(f"latency {bad[0]} is {float(arr[bad[0]])}; expected seconds ≥ 0")
    p50, p95 = np.percentile(arr, [50, 95])
    return LatencySummary(len(arr), float(p50), float(p95), float(arr.mean()))


# ----------------------------------------------------------------------------------- validation and compute


def _unit_array(values: ArrayLike, what: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise EvaluationError(f"{what} must be numbers in [0, 1], got {values!r:.80}") from None
    if arr.size == 0:
        raise EvaluationError(f"{what} are empty")
    _check_unit(arr, what)
    return arr


def _check_unit(arr: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0]) if arr.ndim else ()
        at = f" at {where if len(where) > 1 else where[0]}" if where else ""
        raise EvaluationError(f"{what}{at} is {float(arr[where])}, outside [0, 1]")


def _check_weights(weights: Mapping[str, float] | None) -> np.ndarray:
    """Weights in PARTS order, normalised to sum 1."""
    if weights is None:
        return np.full(len(PARTS), 1 / len(PARTS))
    if set(weights) != set(PARTS):
        odd = sorted(set(weights) ^ set(PARTS))
        raise EvaluationError(f"weights must name exactly {', '.join(PARTS)}; check {', '.join(odd)}")
    w = np.array([weights[name] for name in PARTS], dtype=np.float64)
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() == 0:
        raise EvaluationError(f"weights must be finite, ≥ 0 and not all 0, got {dict(weights)}")
    return w / w.sum()


def _compute_cdc(scores: np.ndarray) -> float:
    mean = scores.mean()
    if mean == 0:
        return 0.0
    return float(np.clip(1 - np.abs(scores - mean).mean() / mean, 0, 1))


def _compute_rr(clean: np.ndarray, perturbed: np.ndarray) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = np.where(clean > 0, np.minimum(perturbed / clean, 1.0), 0.0)
    return float(terms.mean())


def _compute_efficiency(columns: dict[str, np.ndarray]) -> np.ndarray:
    terms = [values.min() / values if field in COSTS else values / values.max() for field, values in columns.items()]
    return np.mean(terms, axis=0)


def _compute_overall(parts: ReliabilityParts, weights: np.ndarray) -> float:
    return float(np.dot([getattr(parts, name) for name in PARTS], weights))
