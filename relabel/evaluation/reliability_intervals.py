"""Intervals of RR, of the overall score and of the ranks in the reliability table, from one joint bootstrap.

Every part that is a sample of images is resampled, and every row of a task sees the same resamples:

- P: the evaluated dataset's common images (`dataset_scores.CommonScores.resample`, seeded per dataset);
- CDC: each dataset's common images on their own, the evaluated dataset with P's resamples;
- RR: the images of the robustness run, clean and perturbed with the same images (paired); runs of the same
  dataset on the same images share their resamples (seeded by the seed, the dataset and the image ids), runs on
  other images are resampled on their own. A robustness run stored before per-image outcomes were kept has no
  resamples, and its RR no interval;
- E is held fixed: it is a measurement (latency, memory, FLOPs, cost), not a sample of images.

Resample b of the overall score is Σ w_j · part_j[b] with each part's resample b; ranks by P and by overall are
taken within each resample among the task's rows with an overall score, and their 95 % percentile intervals (and
that of places gained) are read by `evaluator.ranking.rank_intervals`. Images of different datasets are independent
samples, so their resamples are independent draws; the robustness run's images are resampled apart from P's even
where they are a subset of the same dataset, which leaves out the (small) correlation between P and RR.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from evaluator.model_reliability import PARTS, overall_of_resamples, resampled_retention
from evaluator.paired import percentile_interval
from evaluator.ranking import rank_intervals
from relabel.evaluation.results import ReliabilityRow, RobustnessResult
from relabel.evaluation.robustness_outcomes import RobustnessOutcomes


def robustness_resamples(
    results: Mapping[str, RobustnessResult],
    reference_of: Callable[[RobustnessResult], str | None],
    n_boot: int,
    seed: int,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """RR of each row's robustness run over `n_boot` resamples of its images, (n_boot,) by row name, against the
    reference `reference_of` gives (the one RR is read against); and notes for runs without per-image outcomes."""
    if not n_boot:
        return {}, []
    usable: dict[int, tuple[str, RobustnessOutcomes, str]] = {}  # by result: dataset, outcomes, reference
    old: dict[str, list[str]] = {}
    other_reference: dict[str, list[str]] = {}
    for run, result in results.items():
        ref, outcomes = reference_of(result), result.outcomes
        label = f"#{result.id}" if result.id is not None else result.model
        if outcomes is None:
            old.setdefault(label, []).append(run)
        elif ref is None or ref not in outcomes.scored:
            other_reference.setdefault(label, []).append(run)
        else:
            usable[id(result)] = (result.dataset, outcomes, ref)
    resampled: dict[int, np.ndarray] = {}
    for key, (dataset, outcomes, ref) in usable.items():
        # runs on the same images draw the same resamples (JointBootstrap depends on the image count and the seed
        # only), whatever their grids: a CLIP run with typos beside a classifier without them
        group_seed = (seed << 32) + zlib.crc32(dataset.encode() + outcomes.image_ids.tobytes())
        values = resampled_retention(
            outcomes.correct[ref][None], outcomes.scored[ref][None], n_boot=n_boot, seed=group_seed
        )
        resampled[key] = values[:, 0]
    notes = [
        f"RR interval unknown for {', '.join(runs)}: robustness run {label} was stored without per-image outcomes "
        "(before they were kept); running `relabel evaluate robustness` again keeps them"
        for label, runs in old.items()
    ] + [
        f"RR interval unknown for {', '.join(runs)}: robustness run {label} kept no per-image outcomes against the "
        "reference RR is read against"
        for label, runs in other_reference.items()
    ]
    return {run: resampled[id(r)] for run, r in results.items() if id(r) in resampled}, notes


def interval(resampled: np.ndarray | None) -> tuple[float, float] | None:
    """The 95 % percentile interval of `resampled` (NaN resamples ignored); None without a finite one."""
    if resampled is None or not np.isfinite(resampled).any():
        return None
    low, high = percentile_interval(resampled)
    return float(low), float(high)


def with_overall_intervals(
    members: Sequence[ReliabilityRow], complete: Sequence[str], weights: Mapping[str, float], n_boot: int
) -> tuple[list[ReliabilityRow], list[str]]:
    """`members` (the rows of one task) with the intervals of the overall score of each row of `complete` (those
    with an overall score) and of their ranks by P and by overall; notes for what could not be resampled."""
    rows = {r.run: r for r in members}
    if not n_boot or not complete:
        return list(members), []
    needed = [k for k in PARTS if weights[k] > 0 and k != "efficiency"]
    missing = {run: [k for k in needed if k not in rows[run].resampled] for run in complete}
    ready = [run for run in complete if not missing[run]]
    notes = []
    lacking = [f"{run} ({', '.join(parts)})" for run, parts in missing.items() if parts]
    if lacking:
        notes.append(
            f"overall 95 % CI unknown for {', '.join(lacking)}: a weighted part has no resamples"
            + ("; so are the rank intervals of its task" if len(complete) > 1 else "")
        )
    if not ready:
        return list(members), notes
    parts = {k: np.stack([rows[run].resampled[k] for run in ready], axis=1) for k in needed}
    if weights["efficiency"] > 0:
        parts["efficiency"] = np.array([rows[run].efficiency for run in ready], dtype=np.float64)
    totals = overall_of_resamples(parts, weights)
    for i, run in enumerate(ready):
        rows[run] = replace(rows[run], overall_ci=interval(totals[:, i]))
    if len(ready) == len(complete) and all("capability" in rows[run].resampled for run in ready):
        rows.update(_rank_intervals(rows, ready, totals))  # the ranks need every ranked row's resamples
    return [rows[r.run] for r in members], notes


def _rank_intervals(rows: dict[str, ReliabilityRow], ready: list[str], totals: np.ndarray) -> dict[str, ReliabilityRow]:
    if len(ready) == 1:  # alone in its task: first by both, in every resample
        return {ready[0]: replace(rows[ready[0]], rank_by_capability_ci=(1, 1), rank_by_overall_ci=(1, 1),
                                  shift_ci=(0, 0))}  # fmt: skip
    capability = np.stack([rows[run].resampled["capability"] for run in ready], axis=1)
    found = rank_intervals(capability, totals, ready)
    return {
        i.name: replace(rows[i.name], rank_by_capability_ci=i.rank_a, rank_by_overall_ci=i.rank_b, shift_ci=i.shift)
        for i in found
    }


def uncertainty(n_boot: int) -> str:
    """What the table's 95 % intervals are, and what has none."""
    if not n_boot:
        return "not computed: the evaluation ran without bootstrap resamples (--boot 0)"
    return (
        "95 % intervals: P (and each dataset's top-1) the Wilson score interval on its images; CDC the percentile "
        f"interval over {n_boot} joint bootstrap resamples of images (every run of a dataset resampled with the same "
        "images, each dataset on its own); the label-noise sensitivity a paired bootstrap over the same images; RR "
        f"the percentile interval over {n_boot} resamples of the robustness run's images (clean and perturbed with "
        "the same images; runs on the same images with the same resamples), unknown for runs stored without "
        "per-image outcomes; the overall score, the ranks by P and by overall and the places gained percentile "
        "intervals over the same joint resamples (P, CDC and RR resampled together for every row of a task, E held "
        "fixed: it is a measurement, not a sample of images). Not computed for E itself"
    )
