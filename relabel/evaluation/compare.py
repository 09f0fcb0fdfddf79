"""Paired comparisons of an evaluation: every number beside another one is taken on the same images.

`Outcomes` holds, for every run × reference, which images were scored and which were right (top-1), over the
union of the references' images. From it:

- `paired_scores`: each run's top-1 under every reference against the baseline reference (the first; imgt by
  default) on the images both score, with the paired difference and its paired-bootstrap interval
  (`evaluator.paired`), drawn for each run on its own from the seed, so a run's row is the same whatever other
  runs are evaluated. ImGT on all 50,000 ImageNet val images beside ReaL on its 46,837 is not a gain; ImGT on
  those 46,837 is the number to set beside ReaL.
- `common_ranking`: the ranking shift between the first two references over the images that every run scored
  under both, with rank and shift intervals from one bootstrap that resamples those images jointly for all runs.
- `coverage_warnings`: one line whenever runs cover different images (or a run covers part of a reference), with
  how many images they have in common.
- `Outcomes.resampled_top1`: every cell's top-1 on its own images in each resample of one joint bootstrap over
  the union of images, for intervals of statistics built from several cells (the reliability table's parts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluator.paired import JointBootstrap, PairedDifference, paired_many
from evaluator.ranking import RankingShift, RankInterval, rank_intervals, ranking_shift
from evaluator.scoring import image_outcomes
from relabel.evaluation.references import Reference
from relabel.evaluation.result_parts import Cell, Outcomes
from relabel.evaluation.runs import RunPredictions, align
from relabel.evaluation.scoring import subset_labels


def build_outcomes(runs: Sequence[RunPredictions], references: Sequence[Reference]) -> Outcomes:
    """Every run's top-1 outcome under every reference, placed on the union of the references' images."""
    universe = np.unique(np.concatenate([r.image_ids for r in references]))
    shape = (len(runs), len(references), len(universe))
    correct, scored = np.zeros(shape, bool), np.zeros(shape, bool)
    for j, ref in enumerate(references):
        where = np.searchsorted(universe, ref.image_ids)
        for i, run in enumerate(runs):
            aligned = align(run, ref.image_ids)
            if not len(aligned.rows):
                continue
            labels = subset_labels(ref.labels, aligned.rows)
            if not labels.counts.any():
                continue
            right, counted = image_outcomes(aligned.classes, labels, 1, aligned.ok, failed=aligned.failed)
            correct[i, j, where[aligned.rows]] = right
            scored[i, j, where[aligned.rows]] = counted
    return Outcomes(universe, tuple(r.info.name for r in runs), tuple(r.name for r in references), correct, scored)


def paired_scores(outcomes: Outcomes, *, n_boot: int, seed: int) -> dict[Cell, PairedDifference]:
    """{(run, reference): top-1 under the reference minus under the baseline (the first reference) on the images
    the run has scored under both}, for every reference after the first. `n_boot` = 0: no intervals."""
    out: dict[Cell, PairedDifference] = {}
    for j, ref in enumerate(outcomes.references[1:], start=1):
        common = outcomes.scored[:, 0] & outcomes.scored[:, j]
        for i, run in enumerate(outcomes.runs):
            # one run at a time, each from the same seed: a run's interval never depends on the other runs
            pair = paired_many(outcomes.correct[i : i + 1, 0], outcomes.correct[i : i + 1, j], common[i : i + 1],
                               n_boot=n_boot, seed=seed)  # fmt: skip
            out[(run, ref)] = pair.row(0)
    return out


@dataclass(frozen=True)
class CommonRanking:
    """The ranking shift from reference a to b over `n_images` images scored by every run under both."""

    shift: RankingShift
    n_images: int
    intervals: tuple[RankInterval, ...]


def common_ranking(outcomes: Outcomes, *, n_boot: int, seed: int) -> CommonRanking | None:
    """The shift between the first two references over the images every run scored under both, with rank
    intervals from `n_boot` joint resamples of those images (none when n_boot = 0). None with fewer than two
    references or runs, or no common image."""
    if len(outcomes.references) < 2 or len(outcomes.runs) < 2:
        return None
    common = np.all(outcomes.scored[:, 0] & outcomes.scored[:, 1], axis=0)
    n = int(common.sum())
    if n == 0:
        return None
    a, b = outcomes.correct[:, 0][:, common], outcomes.correct[:, 1][:, common]
    shift = ranking_shift(a.mean(axis=1), b.mean(axis=1), outcomes.runs)
    intervals: tuple[RankInterval, ...] = ()
    if n_boot:
        means = JointBootstrap(n, n_boot, seed).means(np.concatenate([a, b]))
        k = len(outcomes.runs)
        intervals = rank_intervals(means[:, :k], means[:, k:], outcomes.runs)
    return CommonRanking(shift, n, intervals)


def coverage_warnings(outcomes: Outcomes, references: Sequence[Reference]) -> list[str]:
    """One line per reference under which the runs score different images, or a run scores part of what the
    reference labels; each line says how many images the runs have in common."""
    lines = []
    for j, ref in enumerate(outcomes.references):
        labelled = references[j].info.n_labelled
        counts = outcomes.scored[:, j].sum(axis=1)
        common = int(np.all(outcomes.scored[:, j], axis=0).sum())
        differ = len(outcomes.runs) > 1 and bool((outcomes.scored[:, j] != outcomes.scored[0, j]).any())
        partial = [run for run, c in zip(outcomes.runs, counts) if c < labelled]
        if differ:
            each = ", ".join(f"{run} {c:,}" for run, c in zip(outcomes.runs, counts))
            lines.append(
                f"under {ref}, the runs are scored on different images ({each} of the {labelled:,} it labels; "
                f"{common:,} in common): each run's scores are on its own images, and top-1 on different images "
                "are not comparable with each other; the ranking uses only images every run scored"
            )
        elif partial:
            lines.append(
                f"under {ref}, {', '.join(partial)} scored {int(counts[0]):,} of the {labelled:,} images it labels "
                "(the rest were not predicted, or failed for reasons of the infrastructure)"
            )
        lines += _extreme_notes(outcomes, j, counts, labelled)
    return lines


def _extreme_notes(outcomes: Outcomes, j: int, counts: np.ndarray, labelled: int) -> list[str]:
    """A top-1 of exactly 0 or 1 on part of a reference usually says how that part was chosen: under reference j
    on the run's own images, and under the first reference on the images reference j scores (the paired row)."""
    notes = []
    for i, run in enumerate(outcomes.runs):
        n, right = int(counts[i]), int(outcomes.correct[i, j].sum())
        if 0 < n < labelled and right in (0, n):
            notes.append(_extreme(run, outcomes.references[j], f"its {n:,} images", right == 0))
        if j == 0:
            continue
        common = outcomes.scored[i, 0] & outcomes.scored[i, j]
        shared, base_right = int(common.sum()), int((outcomes.correct[i, 0] & common).sum())
        if 0 < shared < int(outcomes.scored[i, 0].sum()) and base_right in (0, shared):
            where = f"the {shared:,} images {outcomes.references[j]} scores"
            notes.append(_extreme(run, outcomes.references[0], where, base_right == 0))
    return notes


def _extreme(run: str, reference: str, where: str, never: bool) -> str:
    return (
        f"{run} is {'never' if never else 'always'} right under {reference} on {where}: images chosen by a model's "
        "(dis)agreement with these labels (such as cleanlab's candidate label errors, picked among the images where "
        "its prediction differs from the original label) score 0 % or 100 % by construction"
    )
