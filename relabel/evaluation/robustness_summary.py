"""A robustness run with every number its text and report show, computed once before anything is rendered.

`build_robustness_summary` works out, against each reference of the run's grid, RR with its bootstrap interval
(`reliability_intervals.retention_of`), RR over each perturbation's severities (the grid's last column) and
ImageNet-C's corruption errors; `relabel.evaluation.text.render_robustness` and
`relabel.evaluation.report.robustness_markdown` only format the finished `RobustnessSummary`, so the terminal and
the report show the same numbers from one bootstrap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from evaluator.corruption_error import CorruptionErrors
from evaluator.model_reliability import robustness_retention
from relabel.evaluation.corruption_errors import run_corruption_errors
from relabel.evaluation.reliability_intervals import RETENTION_BOOT, RETENTION_SEED, Retention, retention_of
from relabel.evaluation.results import RobustnessResult


@dataclass(frozen=True)
class ReferenceRobustness:
    """What a robustness run shows against one reference: RR with its interval, RR of each perturbation (in the
    order of `RobustnessResult.perturbations`; None where a score is missing), and the corruption errors of its
    ImageNet-C corruptions (None for a run without them)."""

    retention: Retention
    per_perturbation: tuple[float | None, ...]
    corruption: CorruptionErrors | None


@dataclass(frozen=True)
class RobustnessSummary:
    """A robustness run and, by reference in grid order, the numbers computed from it."""

    result: RobustnessResult
    references: dict[str, ReferenceRobustness]


def build_robustness_summary(
    result: RobustnessResult, n_boot: int = RETENTION_BOOT, seed: int = RETENTION_SEED
) -> RobustnessSummary:
    """Every number the text and report of `result` show, against each reference of its grid: RR with its 95 %
    interval over `n_boot` resamples of the run's images (0: no interval), RR per perturbation, and CE."""
    references = {
        reference: ReferenceRobustness(
            retention=retention_of(result, reference, n_boot=n_boot, seed=seed),
            per_perturbation=tuple(_retention(result.clean[reference].accuracy, v) for v in result.grid[reference]),
            corruption=run_corruption_errors(result, reference),
        )
        for reference in result.grid
    }
    return RobustnessSummary(result, references)


def build_robustness_summaries(results: Sequence[RobustnessResult], n_boot: int) -> list[RobustnessSummary]:
    """`build_robustness_summary` of each of `results`, in order, with `n_boot` resamples for RR's interval."""
    return [build_robustness_summary(r, n_boot=n_boot) for r in results]


def _retention(clean: float, values: Sequence[float]) -> float | None:
    """RR over one perturbation's severities; None when a score is missing (a pass whose every call failed)."""
    if not math.isfinite(clean) or not all(math.isfinite(v) for v in values):
        return None
    return robustness_retention(clean, list(values))
