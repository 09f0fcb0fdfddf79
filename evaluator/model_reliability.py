"""Model reliability after ARGUS: capability, cross-dataset consistency, robustness retention, efficiency, overall.

Only CDC's formula is the ARGUS authors'. P, RR, E, the weights and the overall score are this project's own
definitions, in the spirit of ARGUS; reports say so. Each part is a number in [0, 1], higher is better.

capability (P)
    The mean of the scores given, any non-empty shape. Scores must already be in [0, 1] (an accuracy); NaN is
    rejected rather than skipped, so two models are never compared over different cells. Which cells enter (one
    protocol, the images every compared run scored, the reference the protocol may be scored against) is the
    caller's choice; `relabel.evaluation.reliability` documents it.
cross-dataset consistency (CDC, the ARGUS formula)
    CDC = 1 − mean_i |a_i − ā| / ā over a model's scores a_i on n ≥ 2 different datasets (the mean absolute
    deviation relative to the mean), clipped to [0, 1]. One dataset gives no CDC at all: a single score has no
    spread to measure, and 1 would reward a model for being evaluated less. ā = 0 gives 0: a model that scores
    nothing anywhere has no capability to be consistent about.
robustness retention (RR)
    RR = mean over perturbations × severities of min(perturbed / clean, 1). Each term is clipped to [0, 1] so a
    perturbation that happens to help does not buy back the loss on another one. `clean` may be one number or
    an array that broadcasts against `perturbed`; a term whose clean score is 0 counts 0. Its interval
    (`resampled_retention`) resamples the images of the robustness run, clean and perturbed with the same images
    (paired), and every model scored on those images with the same resamples (`evaluator.paired.JointBootstrap`).
efficiency (E)
    Against fixed reference budgets (`BUDGETS`), never against the other models compared, so a model's E does not
    change when a model is added or removed. Each measure x with budget B gives the term B / (B + x): 1 for a free
    measure, 0.5 exactly at the budget, 1/3 at twice the budget, → 0 as x grows. E is the mean of the terms of
    the measures known for the model; a measure nobody could take (the memory or FLOPs of a model behind an API)
    is unknown and enters no term. No measure known: E is unknown.
overall
    Σ w_j · part_j / Σ w_j over the registered parts; equal weights by default. Weights name every
    part (0 leaves one out), are non-negative, finite and not all 0; they are normalised to sum to 1. Weights
    that leave a part out are refused, naming it: here no default is safe to assume (the CLI's `--weights` fills
    the parts it does not name with 1, and says so). `overall_of_resamples` takes each part's resamples (or one
    fixed value per model, as E: a measurement, not a sample of images) and gives the overall score of each
    resample, whose ranks `evaluator.ranking.rank_intervals` reads.

The parts are a registry, `evaluator.reliability_parts.RELIABILITY_PARTS`; the overall score and its resamples
are over the parts registered there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike

from evaluator.errors import EvaluationError
from evaluator.paired import JointBootstrap
from evaluator.ranking import ranking_shift
from evaluator.references import check_mask
from evaluator.reliability_parts import CAPABILITY, part_names

MIN_DATASETS = 2  # CDC needs a spread: two datasets at least


@dataclass(frozen=True)
class EfficiencyBudgets:
    """The fixed reference budget of each efficiency measure: at the budget a measure's term is 0.5.

    latency_s: seconds per image (median); 0.1 s is ten images a second on one device.
    peak_memory_bytes: the model's peak memory; 4 GiB fits a consumer GPU beside the desktop.
    flops: floating-point operations per image; 10 GFLOPs is about ResNet-50 at 224 px (8.2 GFLOPs).
    cost_per_1k_images: money (the price list's currency, USD for OpenAI) per 1,000 images; 1.0.
    """

    latency_s: float = 0.1
    peak_memory_bytes: float = 4 * 2**30
    flops: float = 10e9
    cost_per_1k_images: float = 1.0


BUDGETS = EfficiencyBudgets()
MEASURES = tuple(f.name for f in fields(EfficiencyBudgets))
MEASURE_LABELS = {"latency_s": "latency", "peak_memory_bytes": "memory", "flops": "FLOPs",
                  "cost_per_1k_images": "cost"}  # fmt: skip


@dataclass(frozen=True)
class EfficiencyMeasurement:
    """What was measured for one model, in the units of `EfficiencyBudgets`; None = not known (never 0).

    Every known value is finite and ≥ 0.
    """

    latency_s: float | None = None
    peak_memory_bytes: float | None = None
    flops: float | None = None
    cost_per_1k_images: float | None = None


@dataclass(frozen=True)
class EfficiencyScore:
    """E (None when no measure is known) and the term in (0, 1] of each known measure, keyed as in MEASURES."""

    value: float | None
    terms: dict[str, float]


class ReliabilityParts(Mapping[str, float]):
    """The parts of one model, each in [0, 1]: positional in registry order, or by name (`capability=0.8`).

    A part may be left out; the overall score needs every part whose weight is not 0.
    """

    def __init__(self, *values: float, **named: float) -> None:
        names = part_names()
        if len(values) > len(names):
            raise EvaluationError(f"{len(values)} parts given; the registered parts are {', '.join(names)}")
        twice = sorted(set(names[: len(values)]) & set(named))
        unknown = sorted(set(named) - set(names))
        if twice or unknown:
            raise EvaluationError(f"parts {', '.join(twice or unknown)}: given twice or not registered "
                                  f"(parts: {', '.join(names)})")  # fmt: skip
        self._values = {**dict(zip(names, values)), **named}
        for name, value in self._values.items():
            _check_unit(np.asarray(value, dtype=np.float64), name)

    def __getitem__(self, name: str) -> float:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"ReliabilityParts({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"


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
            {"name": r.name, **r.parts, "overall": r.overall, "rank_by_capability": r.rank_by_capability,
             "rank_by_overall": r.rank_by_overall, "shift": r.shift}
            for r in self.rows
        ]  # fmt: skip


def capability(scores: ArrayLike) -> float:
    """P: the mean of `scores`, any non-empty shape, every value in [0, 1]."""
    arr = _unit_array(scores, "capability scores")
    return float(arr.mean())


def cross_dataset_consistency(scores: ArrayLike) -> float:
    """CDC in [0, 1] from one model's scores on n_datasets ≥ 2 datasets, (n_datasets,) in [0, 1]."""
    arr = _unit_array(scores, "per-dataset scores")
    if arr.ndim != 1:
        raise EvaluationError(f"per-dataset scores must be 1-D (one per dataset), got shape {arr.shape}")
    if len(arr) < MIN_DATASETS:
        raise EvaluationError(
            f"CDC needs scores on at least {MIN_DATASETS} datasets, got {len(arr)}; with one dataset it is unknown"
        )
    return float(_compute_cdc(arr[None])[0])


def consistency_of_resamples(resampled: ArrayLike) -> np.ndarray:
    """CDC of each resample: `resampled` (n_boot, n_datasets ≥ 2) per-dataset scores → (n_boot,) float.

    A resample with a NaN score (it held none of a dataset's images) gives NaN; other values must lie in [0, 1].
    """
    arr = np.asarray(resampled, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < MIN_DATASETS:
        raise EvaluationError(f"resampled scores must be (n_boot, n_datasets ≥ 2), got shape {arr.shape}")
    known = np.isfinite(arr).all(axis=1)
    _check_unit(arr[known], "resampled per-dataset scores")
    out = np.full(len(arr), np.nan)
    out[known] = _compute_cdc(arr[known])
    return out


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


def retention_of_resamples(clean: ArrayLike, perturbed: ArrayLike) -> np.ndarray:
    """RR of each resample: `clean` (n_boot, ...) and `perturbed` (n_boot, ..., n_conditions) top-1 in [0, 1] →
    (n_boot, ...). A resample with a NaN score (it held none of a condition's scored images) gives NaN."""
    base, after = np.asarray(clean, dtype=np.float64), np.asarray(perturbed, dtype=np.float64)
    if after.ndim < 1 or after.shape[:-1] != base.shape or after.shape[-1] == 0:
        raise EvaluationError(f"perturbed {after.shape} must be clean {base.shape} plus one axis of conditions ≥ 1")
    known = np.isfinite(base) & np.isfinite(after).all(axis=-1)
    _check_unit(base[known], "resampled clean scores")
    _check_unit(after[known], "resampled perturbed scores")
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = np.where(base[..., None] > 0, np.minimum(after / base[..., None], 1.0), 0.0)
    return np.where(known, terms.mean(axis=-1), np.nan)


def resampled_retention(correct: ArrayLike, scored: ArrayLike, *, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """RR of n_models models over `n_boot` joint resamples of the robustness run's images → (n_boot, n_models).

    `correct`, `scored`: bool (n_models, 1 + n_conditions, n_images), the clean pass first, then every
    perturbation × severity; `scored` marks the images a condition's top-1 counts (not an error, a non-empty
    reference set), `correct` the scored ones right. Every condition and every model sees the same resample of
    the images (`JointBootstrap(n_images, n_boot, seed)`), so clean and perturbed are paired.
    """
    right = check_mask(correct, "correct", np.shape(correct))
    if right.ndim != 3 or right.shape[1] < 2 or right.shape[2] == 0:
        raise EvaluationError(f"correct must be (n_models, 1 + n_conditions ≥ 2, n_images ≥ 1), got {right.shape}")
    counted = check_mask(scored, "scored", right.shape)
    if (right & ~counted).any():
        raise EvaluationError("correct marks an image that is not scored")
    n_models, n_rows, n_images = right.shape
    means = (
        JointBootstrap(n_images, n_boot, seed)
        .means(right.reshape(-1, n_images), counted.reshape(-1, n_images))
        .reshape(n_boot, n_models, n_rows)
    )
    return retention_of_resamples(means[..., 0], means[..., 1:])


def efficiency(measurement: EfficiencyMeasurement, budgets: EfficiencyBudgets = BUDGETS) -> EfficiencyScore:
    """E of one model against fixed `budgets` (module docstring); depends on no other model."""
    if not isinstance(measurement, EfficiencyMeasurement):
        raise EvaluationError(f"expected an EfficiencyMeasurement, got {type(measurement).__name__}")
    values = {}
    for name in MEASURES:
        value, budget = getattr(measurement, name), getattr(budgets, name)
        if not (isinstance(budget, int | float) and np.isfinite(budget) and budget > 0):
            raise EvaluationError(f"budget {name} = {budget!r}; budgets must be finite numbers > 0")
        if value is None:
            continue
        number = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
        if not number or not np.isfinite(value) or value < 0:
            raise EvaluationError(f"{name} = {value!r}; a measurement must be a finite number ≥ 0 (None: unknown)")
        values[name] = float(value)
    return _compute_efficiency(values, budgets)


def overall(parts: Mapping[str, float], weights: Mapping[str, float] | None = None) -> float:
    """Weighted mean in [0, 1] of `parts` (part name -> value in [0, 1], every part whose weight is not 0);
    `weights` maps each registered part's name to a weight (default equal; module docstring)."""
    given = parts if isinstance(parts, ReliabilityParts) else ReliabilityParts(**parts)
    return _compute_overall(given, _check_weights(weights))


def overall_of_resamples(
    parts: Mapping[str, ArrayLike | None], weights: Mapping[str, float] | None = None
) -> np.ndarray:
    """The overall score of each resample → (n_boot, n_models).

    `parts` maps each registered part's name to its resamples (n_boot, n_models), or to one fixed value per model
    (n_models,), as E is (a measurement, not a sample of images); a part whose weight is 0 may be None or left
    out. Values in [0, 1]; a NaN resample gives a NaN overall score there.
    """
    w = _check_weights(weights)
    unknown = sorted(set(parts) - set(w))
    if unknown:
        raise EvaluationError(f"parts {', '.join(unknown)} are not registered (parts: {', '.join(w)})")
    needed = [name for name, weight in w.items() if weight > 0]
    missing = [name for name in needed if parts.get(name) is None]
    if missing:
        raise EvaluationError(f"parts {', '.join(missing)} have a non-zero weight and no values")
    arrays = {name: np.asarray(parts[name], dtype=np.float64) for name in needed}
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays.values()))
    except ValueError:
        shown = ", ".join(f"{k} {a.shape}" for k, a in arrays.items())
        raise EvaluationError(f"parts do not broadcast to one (n_boot, n_models) shape: {shown}") from None
    if len(shape) != 2:
        raise EvaluationError(f"parts must give (n_boot, n_models) scores, got shape {shape}")
    total = np.zeros(shape)
    for name, values in arrays.items():
        _check_unit(np.where(np.isnan(values), 0.0, values), f"resampled {name}")  # NaN: a resample without images
        total += w[name] * values
    return total


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
    lacking = [name for name in names if CAPABILITY not in models[name]]
    if lacking:
        raise EvaluationError(f"model {lacking[0]!r}: no {CAPABILITY}, which the overall ranking is compared with")
    shift = ranking_shift([models[n][CAPABILITY] for n in names], [scores[n] for n in names], names)
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


def _check_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    """Weights by part name in registry order, normalised to sum 1; refused (one line naming the parts) unless
    they name exactly the registered parts."""
    names = part_names()
    if weights is None:
        return {name: 1 / len(names) for name in names}
    missing = [name for name in names if name not in weights]
    unknown = sorted(set(weights) - set(names))
    if missing or unknown:
        odd = "; ".join(f"{what} {', '.join(found)}" for what, found in (("missing", missing), ("unknown", unknown))
                        if found)  # fmt: skip
        raise EvaluationError(f"weights must name exactly {', '.join(names)} (0 leaves a part out); {odd}")
    try:
        w = np.array([weights[name] for name in names], dtype=np.float64)
    except (TypeError, ValueError):
        raise EvaluationError(f"weights must be numbers, got {dict(weights)}") from None
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() == 0:
        raise EvaluationError(f"weights must be finite, ≥ 0 and not all 0, got {dict(weights)}")
    return dict(zip(names, (w / w.sum()).tolist()))


def _compute_cdc(scores: np.ndarray) -> np.ndarray:
    """CDC of each row of `scores` (n_rows, n_datasets). Trusts its input."""
    mean = scores.mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cdc = 1 - np.abs(scores - mean[:, None]).mean(axis=1) / mean
    return np.where(mean == 0, 0.0, np.clip(cdc, 0, 1))


def _compute_rr(clean: np.ndarray, perturbed: np.ndarray) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = np.where(clean > 0, np.minimum(perturbed / clean, 1.0), 0.0)
    return float(terms.mean())


def _compute_efficiency(values: dict[str, float], budgets: EfficiencyBudgets) -> EfficiencyScore:
    terms = {name: getattr(budgets, name) / (getattr(budgets, name) + x) for name, x in values.items()}
    return EfficiencyScore(float(np.mean(list(terms.values()))) if terms else None, terms)


def _compute_overall(parts: Mapping[str, float], weights: Mapping[str, float]) -> float:
    missing = [name for name, w in weights.items() if w > 0 and name not in parts]
    if missing:
        raise EvaluationError(f"parts {', '.join(missing)} have a non-zero weight and no value")
    # one dot product over every part in registry order (a part of weight 0 counts 0), as the resamples add up
    return float(np.dot([parts.get(name, 0.0) for name in weights], list(weights.values())))
